package offline

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/internal/testing/samples"
	"github.com/minionvault/minion-vault-operator/pkg/render"
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
	m, err := ReadManifests([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFacts(m, nil)
	tpl := m.Templates[0]
	rt, err := convert.Template(tpl.Obj.Name, &tpl.Obj.Spec, m.ConfigMaps, tpl.Doc.MetadataOrder())
	if err != nil {
		t.Fatal(err)
	}
	f.SetCompiled(tpl.Obj.Name, render.Compile(rt))
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
