package binding

import (
	"context"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The cost of a binding is what a fleet pays ten thousand times: these are
// the per-binding fleet budgets (Kubernetes and Vault calls), counted on the fake API server and Vault.
func TestBindingCostBudgets(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	var patches, statusPatches int
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			statusPatches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	type budget struct{ patches, statusPatches, vaultWrites, vaultReads int }
	check := func(what string, want budget) {
		t.Helper()
		got := budget{patches, statusPatches, h.v.Writes(), h.v.Calls(vault.OpRead)}
		if got != want {
			t.Errorf("%s: %+v, want %+v", what, got, want)
		}
		patches, statusPatches = 0, 0
		h.v.ResetCalls()
	}

	// A new binding: the finalizer and the record of what will be written
	// in one patch, then the status; role, entity and alias written, the
	// role ID and the entity read (the mount accessor read once per
	// connection, then cached by the real client; the fake counts it).
	h.reconcile("salt", "web01")
	b := h.get("salt", "web01")
	if !apimeta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ReadyCondition) {
		t.Fatalf("conditions %+v", b.Status.Conditions)
	}
	if got := b.Annotations[v1alpha1.VaultObjectsAnnotation]; got != `[{"vault":"`+testVaultID+`","connection":"vault","mount":"salt-minions","entity":"salt_minion_web01","deletionPolicy":"Delete"}]` {
		t.Errorf("record %s", got)
	}
	check("new binding", budget{patches: 1, statusPatches: 1, vaultWrites: 3, vaultReads: 3})

	// A resync in sync: three reads (+ the accessor), nothing written
	// anywhere.
	h.reconcile("salt", "web01")
	check("resync in sync", budget{vaultReads: 4})

	// A changed pillar: the status, and what differs in Vault.
	b = h.get("salt", "web01")
	b.Spec.Pillar = rawDoc(map[string]any{"roles": []string{"web", "db"}})
	b.Generation++
	if err := h.c.Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "web01")
	check("changed roles", budget{statusPatches: 1, vaultWrites: 2, vaultReads: 4})
}
