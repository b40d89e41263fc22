package binding

import (
	"context"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A Retain survives the template being deleted before its bindings.
func TestDeletionRetainsWhenTheTemplateWentFirst(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	objs[2].(*v1alpha1.MinionTemplate).Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain
	h := newHarness(t, objs...)
	ctx := context.Background()
	h.reconcile("salt", "web01")
	if got := h.get("salt", "web01").Status.DeletionPolicy; got != v1alpha1.DeletionPolicyRetain {
		t.Fatalf("status.deletionPolicy %q", got)
	}
	tpl := &v1alpha1.MinionTemplate{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	h.deleteAndFinalize("salt", "web01")
	if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r == nil {
		t.Error("role deleted despite Retain")
	}
}

// A connection that exists but cannot log in (its Secret is missing)
// blocks the deletion instead of leaving a working AppRole behind; once it
// can log in, the deletion completes.
func TestDeletionWaitsForACredential(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	ctx := context.Background()
	h.reconcile("salt", "web01")
	working := h.r.Connections.NewClient
	h.r.Connections.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) {
		return nil, outcome.Waiting(outcome.WaitingForCredential, "Secret ops/token does not exist")
	}
	if err := h.c.Delete(ctx, h.get("salt", "web01")); err != nil {
		t.Fatal(err)
	}
	res := h.reconcile("salt", "web01")
	b := h.get("salt", "web01")
	if b == nil {
		t.Fatal("the binding went away while its AppRole could not be deleted")
	}
	ready := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	if ready == nil || ready.Reason != v1alpha1.DeletionBlockedReason || res.RequeueAfter == 0 {
		t.Fatalf("Ready %+v, requeue %s", ready, res.RequeueAfter)
	}
	if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r == nil {
		t.Fatal("role gone although Vault was not reachable")
	}
	h.r.Connections.NewClient = working
	h.reconcile("salt", "web01")
	if h.get("salt", "web01") != nil {
		t.Fatal("binding still exists")
	}
	if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r != nil {
		t.Error("role remains")
	}
}

// A record that cannot be read (edited by hand: not JSON, or naming an
// object no Vault path can have) does not wedge the deletion: the binding
// says so in one event and deletes what status says it wrote, as far as
// Vault proves it the binding's.
func TestDeletionWithABrokenRecordLooksWhereStatusSays(t *testing.T) {
	for _, record := range []string{
		"not json",
		`[{"vault":"` + testVaultID + `","connection":"vault","mount":"salt-minions","entity":".."}]`,
		`[{"vault":"` + testVaultID + `","connection":"vault","mount":"../sys","entity":"salt_minion_web01"}]`,
	} {
		t.Run(record, func(t *testing.T) {
			h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
			ctx := context.Background()
			h.reconcile("salt", "web01")
			h.events()
			b := h.get("salt", "web01")
			b.Annotations[v1alpha1.VaultObjectsAnnotation] = record
			if err := h.c.Update(ctx, b); err != nil {
				t.Fatal(err)
			}
			h.deleteAndFinalize("salt", "web01")
			if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r != nil {
				t.Error("role remains although status names it")
			}
			if e, _ := h.v.ReadEntityByName(ctx, "salt_minion_web01"); e != nil {
				t.Error("entity remains although status names it")
			}
			evs := h.events()
			if n := strings.Count(evs, "looking only where status says"); n != 1 || !strings.Contains(evs, v1alpha1.DeletionBlockedReason) {
				t.Errorf("want one DeletionBlocked event about the record, got:\n%s", evs)
			}
			if !strings.Contains(evs, "Deleted from Vault") {
				t.Errorf("no Deleted event:\n%s", evs)
			}
		})
	}
}

// A live binding whose record was broken by hand stalls, and recovers as
// soon as the record is removed (the change wakes it: RecordRepaired).
func TestBrokenRecordStallsUntilRemoved(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	ctx := context.Background()
	h.reconcile("salt", "web01")
	b := h.get("salt", "web01")
	good := b.DeepCopy()
	b.Annotations[v1alpha1.VaultObjectsAnnotation] = `[{"vault":"v","connection":"vault","mount":"salt-minions","entity":".."}]`
	if err := h.c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if !watch.RecordRepaired.Update(event.UpdateEvent{ObjectOld: good, ObjectNew: b}) {
		t.Error("breaking the record does not wake the binding")
	}
	h.reconcile("salt", "web01")
	stalled := h.get("salt", "web01")
	if !apimeta.IsStatusConditionTrue(stalled.Status.Conditions, v1alpha1.StalledCondition) || !strings.Contains(reason(stalled)+readyMessageOf(stalled), "cannot name an object") {
		t.Fatalf("a broken record: %+v", stalled.Status.Conditions)
	}
	fixed := stalled.DeepCopy()
	delete(fixed.Annotations, v1alpha1.VaultObjectsAnnotation)
	if err := h.c.Update(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	if !watch.RecordRepaired.Update(event.UpdateEvent{ObjectOld: stalled, ObjectNew: fixed}) {
		t.Fatal("removing the broken record does not wake the binding")
	}
	h.reconcile("salt", "web01")
	if got := reason(h.get("salt", "web01")); got != v1alpha1.SucceededReason {
		t.Errorf("after the record was removed: %s", got)
	}
}

func readyMessageOf(b *v1alpha1.MinionBinding) string {
	if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		return c.Message
	}
	return ""
}

// Retaining never waits for Vault: with its connection unable to log in,
// a binding whose template retains is let go all the same, the objects
// left unmarked, and a warning says what that means.
func TestRetainDoesNotWaitForVault(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	objs[2].(*v1alpha1.MinionTemplate).Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain
	h := newHarness(t, objs...)
	ctx := context.Background()
	h.reconcile("salt", "web01")
	h.events()
	h.r.Connections.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) {
		return nil, outcome.Waiting(outcome.WaitingForCredential, "Secret ops/token does not exist")
	}
	h.deleteAndFinalize("salt", "web01")
	if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r == nil {
		t.Error("Retain deleted the role")
	}
	if e, _ := h.v.ReadEntityByName(ctx, "salt_minion_web01"); e == nil || e.Metadata[ownership.RetainedKey] != "" {
		t.Errorf("entity %+v", e)
	}
	if evs := h.events(); !strings.Contains(evs, "RetainedUnmarked") || !strings.Contains(evs, "Secret ops/token does not exist") {
		t.Errorf("events %q", evs)
	}
}
