package manifest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/internal/testing/samples"
)

// The gate over the samples and a few more bindings: the namespace
// selector (once per template and namespace), the claim order of files
// (namespace/name; a binding that holds its minion ID keeps it), from
// claimants that are copies of what the order reads.
func TestFactsAdmit(t *testing.T) {
	dir := samples.Copy(t)
	samples.WriteFile(t, filepath.Join(dir, "more.yaml"), `apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata: {name: a-first, namespace: default}
spec: {minionID: DB01, templateRef: {name: salt-minions}, grains: {id: DB01}, pillar: {roles: [db], env: prod}}
---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata: {name: t1, namespace: team}
spec: {minionID: team1, templateRef: {name: salt-minions}, grains: {id: team1}, pillar: {roles: [db], env: prod}}
---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata: {name: t2, namespace: team}
spec: {minionID: team2, templateRef: {name: salt-minions}, grains: {id: team2}, pillar: {roles: [db], env: prod}}
---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata: {name: zz-holder, namespace: default}
spec: {minionID: web01, templateRef: {name: salt-minions}, grains: {id: web01}, pillar: {roles: [web], env: prod}}
status: {appRole: {roleID: r-1}}
`)
	m, err := ReadSet([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFacts(m, nil)
	got := map[string]string{}
	for _, b := range m.Bindings {
		a, err := admission.Admit(context.Background(), f, b)
		switch v, refused := admission.AsVerdict(err); {
		case refused:
			got[b.Namespace+"/"+b.Name] = v.Reason
		case err != nil:
			t.Fatal(err)
		case a.Ahead != nil:
			got[b.Namespace+"/"+b.Name] = "behind " + a.Ahead.Namespace + "/" + a.Ahead.Name
			if a.Ahead.Spec.Pillar != nil || a.Ahead.Spec.MinionID == "" {
				t.Errorf("claimant %s: not the claim's copy: %+v", a.Ahead.Name, a.Ahead.Spec)
			}
		default:
			got[b.Namespace+"/"+b.Name] = "admitted"
		}
	}
	want := map[string]string{
		"default/a-first":   "admitted",
		"default/build01":   "admitted",
		"default/db01":      "behind default/a-first",
		"default/web01":     v1alpha1.DuplicateMinionIDReason,
		"default/zz-holder": "admitted",
		"team/t1":           v1alpha1.NamespaceNotAllowedReason,
		"team/t2":           v1alpha1.NamespaceNotAllowedReason,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%v", got)
	}
	if len(f.verdicts) != 2 {
		t.Errorf("namespace verdicts %v: want one per template and namespace", f.verdicts)
	}
}

// The gate itself refuses a binding whose template is not among the
// manifests (TemplateNotFound, waiting) or does not compile (RenderFailed,
// stalled, in the operator's words, with the template's own error beside
// it); a template is compiled once, whatever the number of its bindings.
func TestFactsRefuseThroughTheGate(t *testing.T) {
	dir := samples.Copy(t)
	sample, err := os.ReadFile(filepath.Join(dir, "miniontemplate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Its parameters come from a ConfigMap the files lack.
	broken := strings.Replace(string(sample), "name: salt-minions", "name: broken", 1) +
		"  parameters: {configMapRefs: [{name: no-such-configmap, namespace: default}]}\n"
	samples.WriteFile(t, filepath.Join(dir, "broken.yaml"), broken)
	samples.WriteFile(t, filepath.Join(dir, "more.yaml"), `apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata: {name: b1, namespace: default}
spec: {minionID: b1, templateRef: {name: broken}, grains: {id: b1}}
---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata: {name: b2, namespace: default}
spec: {minionID: b2, templateRef: {name: broken}, grains: {id: b2}}
---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata: {name: lost, namespace: default}
spec: {minionID: lost, templateRef: {name: no-such-template}, grains: {id: lost}}
`)
	m, err := ReadSet([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFacts(m, nil)
	var first *TemplateError
	for _, b := range m.Bindings {
		if b.Spec.TemplateRef.Name == "salt-minions" {
			continue
		}
		_, err := admission.Admit(context.Background(), f, b)
		v, ok := admission.AsVerdict(err)
		if !ok {
			t.Fatalf("%s: %v, want a verdict", b.Name, err)
		}
		if b.Name == "lost" {
			if v.Kind != admission.Waiting || v.Reason != v1alpha1.TemplateNotFoundReason || v.Message != `MinionTemplate "no-such-template" is not among the manifests` {
				t.Errorf("lost: %+v", v)
			}
			continue
		}
		var te *TemplateError
		if !errors.As(err, &te) || v.Kind != admission.Stalled || v.Reason != v1alpha1.RenderFailedReason ||
			v.Message != fmt.Sprintf("template %q: %v", "broken", te.Err) {
			t.Fatalf("%s: %+v, want RenderFailed with the template's error", b.Name, v)
		}
		if first == nil {
			first = te
		} else if te != first {
			t.Errorf("%s: the template was compiled again", b.Name)
		}
	}
	if first == nil {
		t.Fatal("no binding of the broken template")
	}
}
