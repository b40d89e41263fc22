//go:build integration

package e2e

import (
	"slices"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestDriftIsCorrectedOrOnlyReported: a change made in Vault by hand is
// corrected (foreign metadata keys stay), or only reported in detect-only
// mode, and corrected again once the template leaves it.
func TestDriftIsCorrectedOrOnlyReported(t *testing.T) {
	s := start(t)
	f := newSaltMinions(s, "drift")
	f.bind("web01", "web")
	web := f.id("web01")

	f.waitReady("web01")
	_, err := s.root.Logical().Write("identity/entity/name/salt_minion_"+web, map[string]any{"metadata": map[string]any{"roles": "hacked", "owner": "someone"}})
	s.must(err)
	_, err = s.root.Logical().Write("auth/salt-minions/role/"+web, map[string]any{"token_policies": []string{"root-ish"}})
	s.must(err)
	s.requestReconcile(f.ns, web)
	got := metadataOf(s.vaultRead("identity/entity/name/salt_minion_" + web))
	if got["roles"] != "web" || got["roles__0"] != "web" || got["owner"] != "someone" {
		t.Errorf("metadata after correction %v (foreign keys must stay)", got)
	}
	if p := strs(s.vaultRead("auth/salt-minions/role/" + web)["token_policies"]); !slices.Contains(p, f.role+"web") {
		t.Errorf("token_policies after correction %q", p)
	}
	s.event(web, "DriftCorrected")

	// The operator patches the template's status meanwhile: retry on a
	// conflict rather than fail on it.
	s.must(s.patchTemplate(f.tpl, func(mt *v1alpha1.MinionTemplate) { mt.Spec.DriftDetection = v1alpha1.DriftDetectionDetectOnly }))
	time.Sleep(300 * time.Millisecond)
	_, err = s.root.Logical().Write("identity/entity/name/salt_minion_"+web, map[string]any{"metadata": map[string]any{"roles": "hacked"}})
	s.must(err)
	s.requestReconcile(f.ns, web)
	if got := metadataOf(s.vaultRead("identity/entity/name/salt_minion_" + web)); got["roles"] != "hacked" {
		t.Errorf("detect-only wrote to Vault: %v", got)
	}
	b := s.binding(f.ns, web)
	if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Reason != "DriftDetected" {
		t.Errorf("conditions %+v", b.Status.Conditions)
	}
	s.event(web, "DriftDetected")
	s.must(s.patchTemplate(f.tpl, func(mt *v1alpha1.MinionTemplate) { mt.Spec.DriftDetection = v1alpha1.DriftDetectionCorrect }))
	s.requestReconcile(f.ns, web)
	if got := metadataOf(s.vaultRead("identity/entity/name/salt_minion_" + web)); got["roles"] != "web" {
		t.Errorf("not corrected after leaving detect-only: %v", got)
	}
}
