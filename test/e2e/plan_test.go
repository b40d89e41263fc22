//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/cli"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
)

const planManifests = `apiVersion: minionvault.dev/v1alpha1
kind: VaultConnection
metadata:
  name: plan-vault
spec:
  address: %s
  auth:
    token:
      secretRef: {name: vault-token, namespace: minionvault-system}
---
apiVersion: v1
kind: Namespace
metadata:
  name: plan
  labels: {team: plan}
---
apiVersion: minionvault.dev/v1alpha1
kind: MinionTemplate
metadata:
  name: plan
spec:
  connectionRef: {name: plan-vault}
  policies:
    assign: ['saltstack/{minion}', 'plan_role_{pillar[roles]}']
  metadata:
    entity:
      roles: '{pillar[roles]}'
  policyDocuments:
    - name: 'plan_role_{pillar[roles]}'
      rules:
        - path: 'salt/data/roles/{pillar[roles]}'
          capabilities: [read]
  namespaceSelector:
    matchLabels: {team: plan}
  allowedPolicies: ['saltstack/*', 'plan_role_*']
---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata:
  name: plan-web
  namespace: plan
spec:
  minionID: plan-web
  templateRef: {name: plan}
  grains: {id: plan-web}
  pillar:
    roles: [web, db]
---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata:
  name: plan-db
  namespace: plan
spec:
  minionID: plan-db
  templateRef: {name: plan}
  grains: {id: plan-db}
  pillar:
    roles: [db]
`

// TestPlan: `minionvault plan` against the real Vault shows nothing once
// the operator has converged, and exactly the operator's next writes after
// an edit of the manifests.
func TestPlan(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "manifests.yaml")
	s.must(os.WriteFile(file, fmt.Appendf(nil, planManifests, s.env.Vault.Addr), 0o644))
	s.applyFile(ctx, file)
	s.waitReady("plan", "plan-web")
	s.waitReady("plan", "plan-db")
	eventually(t, 30*time.Second, "template plan Ready", func() error {
		mt := &v1alpha1.MinionTemplate{}
		if err := s.c.Get(ctx, types.NamespacedName{Name: "plan"}, mt); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(mt.Status.Conditions, v1alpha1.ReadyCondition) || mt.Status.Policies == nil || mt.Status.Policies.Count != 2 {
			return fmt.Errorf("status %+v", mt.Status)
		}
		return nil
	})
	// The root token may list policies; the plan then also finds deletions.
	t.Setenv("VAULT_TOKEN", s.env.Vault.RootToken)
	writes := s.writes.writes.Load()

	s.run("converged: no changes, exit 0", func(t *testing.T) {
		code, plan, _ := runPlan(t, file)
		if code != 0 || plan.Summary != (cli.PlanSummary{}) {
			t.Errorf("exit %d, summary %+v: %+v", code, plan.Summary, plan)
		}
	})

	s.run("an edit: exactly the operator's next writes, exit 1", func(t *testing.T) {
		edited := strings.Replace(fmt.Sprintf(planManifests, s.env.Vault.Addr), "roles: [web, db]", "roles: [web, mail]", 1)
		edited = strings.Replace(edited, "roles: [db]\n", "roles: [web]\n", 1)
		s.must(os.WriteFile(file, []byte(edited), 0o644))
		code, plan, text := runPlan(t, file)
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		var got []string
		for _, tp := range plan.Templates {
			for _, c := range tp.Changes {
				got = append(got, c.Action+" "+c.Path)
			}
		}
		for _, b := range plan.Bindings {
			for _, c := range b.Changes {
				got = append(got, c.Action+" "+c.Path)
			}
		}
		want := []string{
			"create sys/policies/acl/plan_role_mail",
			"delete sys/policies/acl/plan_role_db", // no binding renders "db" any more
			"update identity/entity/name/salt_minion_plan-db",
			"update auth/salt-minions/role/plan-db",
			"update identity/entity/name/salt_minion_plan-web",
			"update auth/salt-minions/role/plan-web",
		}
		if !slices.Equal(got, want) {
			t.Errorf("changes\n %q\nwant\n %q", got, want)
		}
		for _, line := range []string{`~ roles: "db,web" -> "mail,web"`, `- path "salt/data/roles/db" {`, "Plan: 1 to create, 4 to change, 1 to delete."} {
			if !strings.Contains(text, line) {
				t.Errorf("text plan lacks %q:\n%s", line, text)
			}
		}
		if n := s.writes.writes.Load(); n != writes {
			t.Errorf("the plans made %d Vault writes", n-writes)
		}

		// Applied, the operator converges, and the plan is empty again.
		s.applyFile(ctx, file)
		eventually(t, 60*time.Second, "plan empty after the operator applied the edit", func() error {
			var out bytes.Buffer
			if code := cli.Main([]string{"plan", "-f", file}, &out, &out); code != 0 {
				return fmt.Errorf("exit %d: %s", code, out.String())
			}
			return nil
		})
		if code, plan, _ := runPlan(t, file); code != 0 || plan.Summary != (cli.PlanSummary{}) {
			t.Errorf("converged again, yet exit %d, summary %+v", code, plan.Summary)
		}
	})
}

// runPlan runs the CLI's plan, JSON and text, and returns the exit code.
func runPlan(t *testing.T, file string) (int, cli.PlanResult, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"plan", "-f", file, "-o", "json"}, &out, &errOut)
	var plan cli.PlanResult
	if code == 0 || code == 1 {
		if err := json.Unmarshal(out.Bytes(), &plan); err != nil {
			t.Fatalf("plan output: %v\n%s\n%s", err, out.String(), errOut.String())
		}
	} else {
		t.Fatalf("plan exit %d: %s%s", code, out.String(), errOut.String())
	}
	var text bytes.Buffer
	if c := cli.Main([]string{"plan", "-f", file}, &text, &errOut); c != code {
		t.Fatalf("text plan exit %d, json %d:\n%s\n%s%s", c, code, out.String(), text.String(), errOut.String())
	}
	return code, plan, text.String()
}

// applyFile creates or updates (spec) every object of the file.
func (s *suite) applyFile(ctx context.Context, file string) {
	s.t.Helper()
	docs, err := manifest.ReadFile(file)
	s.must(err)
	for _, d := range docs {
		raw := d.Value.AppendJSON(nil)
		var obj client.Object
		switch d.Kind {
		case "Namespace":
			obj = &corev1.Namespace{}
		case "VaultConnection":
			obj = &v1alpha1.VaultConnection{}
		case "MinionTemplate":
			obj = &v1alpha1.MinionTemplate{}
		case "MinionBinding":
			obj = &v1alpha1.MinionBinding{}
		default:
			s.t.Fatalf("applyFile: kind %q", d.Kind)
		}
		s.must(yaml.Unmarshal(raw, obj))
		existing := obj.DeepCopyObject().(client.Object)
		err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		switch {
		case apierrors.IsNotFound(err):
			s.must(s.c.Create(ctx, obj))
		case err != nil:
			s.t.Fatal(err)
		default:
			obj.SetResourceVersion(existing.GetResourceVersion())
			s.must(s.c.Update(ctx, obj))
		}
	}
}
