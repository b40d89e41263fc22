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

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/cli"
)

// planApply runs `minionvault plan` against the live state, then lets the
// operator reconcile, and compares the writes the plan listed with the
// writes Vault's audit log shows the operator made. The operator reaches
// Vault through its own connection and token, so its writes are told
// apart from the test's and other tests' by the token's accessor.
type planApply struct {
	s        *suite
	audit    *auditLog
	accessor string
	dir      string
}

// paTemplate is a template of this test: its own mount, entity names and
// policy documents (prefix_<role>), so that a switch between two templates
// moves every object.
func paTemplate(name, mount, entity, prefix string) *v1alpha1.MinionTemplate {
	return &v1alpha1.MinionTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: "pa-vault"},
			Policies:      &v1alpha1.PoliciesSpec{Assign: []string{prefix + "_{pillar[roles]}"}},
			Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			AppRole:       &v1alpha1.MinionAppRoleSpec{Mount: mount},
			EntityName:    entity,
			PolicyDocuments: []v1alpha1.PolicyDocument{{Name: prefix + "_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{
				{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}},
			AllowedPolicies: []string{prefix + "_*"},
		},
	}
}

// manifests writes what plan reads: the connection and both templates as
// the cluster has them (edited by editTemplate), and the binding b (a copy
// of the cluster's, with its record and status, or a new one).
func (pa *planApply) manifests(t *testing.T, b *v1alpha1.MinionBinding, editTemplate func(*v1alpha1.MinionTemplate)) string {
	t.Helper()
	ctx := context.Background()
	var docs []string
	add := func(kind string, obj runtime.Object) {
		raw, err := yaml.Marshal(obj)
		pa.s.must(err)
		docs = append(docs, "apiVersion: minionvault.dev/v1alpha1\nkind: "+kind+"\n"+string(raw))
	}
	conn := &v1alpha1.VaultConnection{}
	pa.s.must(pa.s.c.Get(ctx, types.NamespacedName{Name: "pa-vault"}, conn))
	add("VaultConnection", conn)
	for _, name := range []string{"pa-a", "pa-b"} {
		tpl := &v1alpha1.MinionTemplate{}
		pa.s.must(pa.s.c.Get(ctx, types.NamespacedName{Name: name}, tpl))
		if editTemplate != nil {
			editTemplate(tpl)
		}
		add("MinionTemplate", tpl)
	}
	add("MinionBinding", b)
	file := filepath.Join(pa.dir, "manifests.yaml")
	pa.s.must(os.WriteFile(file, []byte(strings.Join(docs, "---\n")), 0o644))
	return file
}

// live is the binding as the cluster has it (kubectl get -o yaml).
func (pa *planApply) live(t *testing.T) *v1alpha1.MinionBinding {
	t.Helper()
	b := pa.s.binding("pa", "pa1")
	if b == nil {
		t.Fatal("binding pa/pa1 does not exist")
	}
	return b
}

// plan runs `minionvault plan -o json` and returns its exit code and the
// writes it lists, normalised as the audit log's are, in the order listed.
func (pa *planApply) plan(t *testing.T, file string, wantCode int) (all, binding []string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"plan", "-f", file, "-o", "json"}, &out, &errOut)
	var p cli.PlanResult
	if err := json.Unmarshal(out.Bytes(), &p); err != nil || code != wantCode {
		t.Fatalf("plan: exit %d (want %d), %v\n%s\n%s", code, wantCode, err, out.String(), errOut.String())
	}
	for _, tp := range p.Templates {
		for _, c := range tp.Changes {
			all = append(all, normalWrite(c.Action, c.Path))
		}
	}
	for _, b := range p.Bindings {
		for _, c := range b.Changes {
			all = append(all, normalWrite(c.Action, c.Path))
			binding = append(binding, normalWrite(c.Action, c.Path))
		}
	}
	t.Logf("plan: %q", all)
	return all, binding
}

// normalWrite is a write as "write PATH" or "delete PATH": Vault logs a
// create or an update as either, by whether the object existed.
func normalWrite(op, path string) string {
	if op == "delete" {
		return "delete " + path
	}
	return "write " + path
}

// operatorWrites are the operator's writes since mark, from the audit log.
// The entity lookup is a POST that changes nothing: a read.
func (pa *planApply) operatorWrites(t *testing.T, mark int64) (all, binding []string) {
	t.Helper()
	for _, p := range pa.audit.since(t, mark, pa.accessor).Paths {
		op, path, _ := strings.Cut(p, " ")
		if path == "identity/lookup/entity" {
			continue
		}
		w := normalWrite(op, path)
		all = append(all, w)
		if !strings.HasPrefix(path, "sys/policies/acl/") {
			binding = append(binding, w)
		}
	}
	return all, binding
}

// converges waits until the operator's writes since mark are the plan's
// (a multiset: the template and binding reconcilers run side by side),
// then for the log to settle, and checks again: exactly the plan, the
// binding's own writes in the plan's order.
func (pa *planApply) converges(t *testing.T, mark int64, want, wantBinding []string) {
	t.Helper()
	sorted := func(l []string) []string { l = slices.Clone(l); slices.Sort(l); return l }
	eventually(t, 60*time.Second, "the operator's writes equal the plan's", func() error {
		if got, _ := pa.operatorWrites(t, mark); !slices.Equal(sorted(got), sorted(want)) {
			return fmt.Errorf("audit log %q, plan %q", got, want)
		}
		return nil
	})
	pa.audit.settle(t)
	got, gotBinding := pa.operatorWrites(t, mark)
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("after the log settled: audit log %q, plan %q", got, want)
	}
	if !slices.Equal(gotBinding, wantBinding) {
		t.Errorf("the binding's writes in the audit log %q, in the plan %q", gotBinding, wantBinding)
	}
}

// contains fails unless the plan lists every write of some (so that an
// empty plan and an idle operator cannot pass for each other).
func contains(t *testing.T, plan []string, some ...string) {
	t.Helper()
	for _, w := range some {
		if !slices.Contains(plan, w) {
			t.Fatalf("the plan %q lacks %q", plan, w)
		}
	}
}

// TestPlanEqualsApply: for every kind of change, the writes `minionvault
// plan` lists are exactly those the operator then makes, as Vault's audit
// log records them.
func TestPlanEqualsApply(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	pa := &planApply{s: s, audit: s.vaultAudit(t), dir: t.TempDir()}
	if err := s.root.Sys().EnableAuthWithOptionsWithContext(ctx, "pa-minions-b", &vaultapi.EnableAuthOptions{Type: "approle"}); err != nil && !strings.Contains(err.Error(), "already in use") {
		t.Fatal(err)
	}
	policy := strings.ReplaceAll(operatorPolicy(t), "auth/salt-minions/", "auth/+/")
	s.must(s.root.Sys().PutPolicyWithContext(ctx, "pa-operator", policy))
	tok, err := s.env.Vault.TokenWithPolicy(ctx, "pa-operator", "")
	s.must(err)
	pa.accessor = s.accessorOf(t, tok)
	s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pa-token", Namespace: operatorNamespace}, StringData: map[string]string{"token": tok}}))
	s.must(s.c.Create(ctx, tokenConnection("pa-vault", s.env.Vault.Addr, "pa-token")))
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pa"}}))
	s.must(s.c.Create(ctx, paTemplate("pa-a", "salt-minions", "pa_a_{minion}", "pa_a")))
	s.must(s.c.Create(ctx, paTemplate("pa-b", "pa-minions-b", "pa_b_{minion}", "pa_b")))
	// The plan reads Vault with the root token.
	t.Setenv("VAULT_TOKEN", s.env.Vault.RootToken)

	// step plans file, checks the plan has some, then does act and waits
	// for the operator's writes to be the plan's.
	step := func(t *testing.T, file string, code int, act func(), some ...string) {
		t.Helper()
		want, wantBinding := pa.plan(t, file, code)
		contains(t, want, some...)
		mark := pa.audit.mark(t)
		act()
		pa.converges(t, mark, want, wantBinding)
	}
	reconcile := func() { s.requestReconcile("pa", "pa1") }

	s.run("a new binding", func(t *testing.T) {
		b := binding("pa", "pa1", "pa1", map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = "pa-a"
		step(t, pa.manifests(t, b, nil), 1, func() { s.must(s.c.Create(ctx, b)) },
			"write identity/entity/name/pa_a_pa1", "write identity/entity-alias", "write auth/salt-minions/role/pa1", "write sys/policies/acl/pa_a_web")
		s.waitReady("pa", "pa1")
	})

	s.run("in sync: no write", func(t *testing.T) {
		step(t, pa.manifests(t, pa.live(t), nil), 0, reconcile)
	})

	s.run("drift: a role field changed in Vault", func(t *testing.T) {
		_, err := s.root.Logical().WriteWithContext(ctx, "auth/salt-minions/role/pa1", map[string]any{"token_policies": []string{"default"}})
		s.must(err)
		step(t, pa.manifests(t, pa.live(t), nil), 1, reconcile, "write auth/salt-minions/role/pa1")
	})

	s.run("drift: entity metadata changed", func(t *testing.T) {
		md := metadataOf(s.vaultRead("identity/entity/name/pa_a_pa1"))
		md["roles"] = "changed by hand"
		_, err := s.root.Logical().WriteWithContext(ctx, "identity/entity/name/pa_a_pa1", map[string]any{"metadata": md})
		s.must(err)
		step(t, pa.manifests(t, pa.live(t), nil), 1, reconcile, "write identity/entity/name/pa_a_pa1")
	})

	s.run("drift: the alias deleted", func(t *testing.T) {
		_, err := s.root.Logical().DeleteWithContext(ctx, "identity/entity-alias/id/"+pa.aliasID(t, "pa_a_pa1"))
		s.must(err)
		step(t, pa.manifests(t, pa.live(t), nil), 1, reconcile, "write identity/entity-alias")
	})

	s.run("drift: the role deleted", func(t *testing.T) {
		_, err := s.root.Logical().DeleteWithContext(ctx, "auth/salt-minions/role/pa1")
		s.must(err)
		step(t, pa.manifests(t, pa.live(t), nil), 1, reconcile,
			"write identity/entity-alias/id/"+pa.aliasID(t, "pa_a_pa1"), "write auth/salt-minions/role/pa1")
	})

	s.run("a switch of template", func(t *testing.T) {
		b := pa.live(t)
		b.Spec.TemplateRef.Name = "pa-b"
		step(t, pa.manifests(t, b, nil), 1, func() {
			s.must(s.patchBinding("pa", "pa1", func(b *v1alpha1.MinionBinding) { b.Spec.TemplateRef.Name = "pa-b" }))
		}, "write identity/entity/name/pa_b_pa1", "write auth/pa-minions-b/role/pa1", "delete auth/salt-minions/role/pa1",
			"delete identity/entity/name/pa_a_pa1", "write sys/policies/acl/pa_b_web", "delete sys/policies/acl/pa_a_web")
		s.waitReady("pa", "pa1")
	})

	s.run("a switch of mount", func(t *testing.T) {
		toA := func(tpl *v1alpha1.MinionTemplate) {
			if tpl.Name == "pa-b" {
				tpl.Spec.AppRole.Mount = "salt-minions"
			}
		}
		step(t, pa.manifests(t, pa.live(t), toA), 1, func() { s.must(s.patchTemplate("pa-b", toA)) },
			"write identity/entity-alias", "write auth/salt-minions/role/pa1", "delete auth/pa-minions-b/role/pa1")
	})

	s.run("a switch of entity name", func(t *testing.T) {
		toC := func(tpl *v1alpha1.MinionTemplate) {
			if tpl.Name == "pa-b" {
				tpl.Spec.EntityName = "pa_c_{minion}"
			}
		}
		step(t, pa.manifests(t, pa.live(t), toC), 1, func() { s.must(s.patchTemplate("pa-b", toC)) },
			"write identity/entity/name/pa_c_pa1", "write identity/entity-alias", "delete identity/entity/name/pa_b_pa1")
	})

	s.run("a half-failed apply", func(t *testing.T) {
		// The operator may read the role but not write it: with the role
		// deleted by hand, it links a new role ID and fails to create the
		// role.
		s.must(s.root.Sys().PutPolicyWithContext(ctx, "pa-operator", policy+"\npath \"auth/salt-minions/role/pa1\" {\n  capabilities = [\"read\"]\n}\n"))
		_, err := s.root.Logical().DeleteWithContext(ctx, "auth/salt-minions/role/pa1")
		s.must(err)
		asked := requestIn(t, s.c, "pa", "pa1")
		s.waitReason("pa", "pa1", v1alpha1.AccessDeniedReason)
		// A reconcile that failed did not repair Vault: the request stays
		// open, for the retries and the next operator.
		if got := s.binding("pa", "pa1").Status.LastHandledReconcileAt; got == asked {
			t.Errorf("the request is reported handled by a reconcile that failed (%s)", v1alpha1.AccessDeniedReason)
		}
		// Stopped, so that its retries do not race the plan; the policy
		// restored, the plan shows what the next operator does.
		s.stopOperator()
		s.must(s.root.Sys().PutPolicyWithContext(ctx, "pa-operator", policy))
		step(t, pa.manifests(t, pa.live(t), nil), 1, func() { s.runOperator(t) },
			"write identity/entity-alias/id/"+pa.aliasID(t, "pa_c_pa1"), "write auth/salt-minions/role/pa1")
		s.waitReady("pa", "pa1")
		if got := s.binding("pa", "pa1").Status.LastHandledReconcileAt; got != asked {
			t.Errorf("Ready after the repair, and the request is not reported handled: lastHandledReconcileAt %q, want %q", got, asked)
		}
	})

	s.run("a policy owned by another template", func(t *testing.T) {
		_, err := s.root.Logical().WriteWithContext(ctx, "sys/policies/acl/pa_b_db", map[string]any{"policy": "# Managed by minion-vault-operator for MinionTemplate \"someone-else\". Do not edit: changes are overwritten.\npath \"x\" {\n  capabilities = [\"read\"]\n}\n"})
		s.must(err)
		b := pa.live(t)
		b.Spec.Pillar = doc(map[string]any{"roles": []string{"db"}})
		// Exit 2: the template refuses to overwrite pa_b_db.
		step(t, pa.manifests(t, b, nil), 2, func() {
			s.must(s.patchBinding("pa", "pa1", func(b *v1alpha1.MinionBinding) { b.Spec.Pillar = doc(map[string]any{"roles": []string{"db"}}) }))
		}, "write identity/entity/name/pa_c_pa1", "write auth/salt-minions/role/pa1", "delete sys/policies/acl/pa_b_web")
		if p := s.vaultRead("sys/policies/acl/pa_b_db"); p == nil || !strings.Contains(fmt.Sprint(p["policy"]), "someone-else") {
			t.Errorf("the other template's policy was touched: %v", p)
		}
	})

	s.run("a deletion", func(t *testing.T) {
		b := pa.live(t)
		now := metav1.Now()
		b.DeletionTimestamp = &now
		step(t, pa.manifests(t, b, nil), 1, func() { s.must(s.c.Delete(ctx, pa.live(t))) },
			"delete auth/salt-minions/role/pa1", "delete identity/entity/name/pa_c_pa1")
		s.waitGone("pa", "pa1")
	})
}

// aliasID is the ID of the entity's only alias.
func (pa *planApply) aliasID(t *testing.T, entity string) string {
	t.Helper()
	e := pa.s.vaultRead("identity/entity/name/" + entity)
	if e == nil {
		t.Fatalf("entity %s does not exist", entity)
	}
	aliases, _ := e["aliases"].([]any)
	if len(aliases) != 1 {
		t.Fatalf("entity %s has aliases %v", entity, aliases)
	}
	return fmt.Sprint(aliases[0].(map[string]any)["id"])
}
