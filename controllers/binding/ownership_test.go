package binding

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// Someone who may edit bindings (not status) points the record at another
// minion's objects. The binding deletes only its own role, and leaves the
// other minion's entity, with a warning.
func TestForgedRecordCannotDeleteOthersObjects(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	victim := objs[3].(*v1alpha1.MinionBinding).DeepCopy()
	victim.Name, victim.Spec.MinionID, victim.ResourceVersion, victim.UID = "victim", "victim", "", "uid-victim"
	h := newHarness(t, append(objs, victim)...)
	ctx := context.Background()
	h.reconcile("salt", "web01")
	h.reconcile("salt", "victim")
	vEntity, _ := h.v.ReadEntityByName(ctx, "salt_minion_victim")
	if vEntity == nil || len(vEntity.Aliases) != 1 {
		t.Fatalf("victim entity %+v", vEntity)
	}

	b := h.get("salt", "web01")
	patch := client.MergeFrom(b.DeepCopy())
	b.Annotations[v1alpha1.VaultObjectsAnnotation] = `[{"connection":"vault","mount":"salt-minions","entity":"salt_minion_web01"},` +
		`{"connection":"vault","mount":"other-mount","entity":"salt_minion_victim"}]`
	if err := h.c.Patch(ctx, b, patch); err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "web01")
	if e, _ := h.v.ReadEntityByName(ctx, "salt_minion_victim"); e == nil || e.ID != vEntity.ID || len(e.Aliases) != 1 {
		t.Fatalf("the victim's entity was touched: %+v", e)
	}
	if r, _ := h.v.ReadRole(ctx, "salt-minions", "victim"); r == nil {
		t.Fatal("the victim's role was deleted")
	}
	if ev := h.events(); !strings.Contains(ev, v1alpha1.NotOwnedReason) || !strings.Contains(ev, "salt_minion_victim") {
		t.Errorf("events %q", ev)
	}
	if got := h.get("salt", "web01").Annotations[v1alpha1.VaultObjectsAnnotation]; got != `[{"vault":"`+testVaultID+`","connection":"vault","mount":"salt-minions","entity":"salt_minion_web01","deletionPolicy":"Delete"}]` {
		t.Errorf("record %s", got)
	}
}

// A Vault conflict (the entity has an alias on the mount already, and the
// rename is refused) is retried, never Stalled.
func TestVaultConflictIsRetried(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	h.v.FailNext("CreateEntityAlias", &vault.Error{Op: "write identity/entity-alias", StatusCode: 400,
		Messages: []string{"Alias already exists for requested entity and mount accessor"}})
	_, err := h.r.Reconcile(context.Background(), reqFor("salt", "web01"))
	if err == nil {
		t.Fatal("a conflict must be returned for backoff")
	}
	b := h.get("salt", "web01")
	ready := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	if ready == nil || ready.Reason != v1alpha1.VaultConflictReason || apimeta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.StalledCondition) {
		t.Fatalf("conditions %+v", b.Status.Conditions)
	}
	// What was written is reported: the entity (the alias failed, so the
	// role was not created).
	if b.Status.Entity == nil || b.Status.Entity.ID == "" || h.v.Calls("WriteRole") != 0 {
		t.Errorf("status after a half-failed apply %+v %+v", b.Status.Entity, b.Status.AppRole)
	}
	h.reconcile("salt", "web01")
	if c := apimeta.FindStatusCondition(h.get("salt", "web01").Status.Conditions, v1alpha1.ReadyCondition); c.Status != metav1.ConditionTrue {
		t.Fatalf("did not converge: %+v", c)
	}
}

// A holder keeps its minion ID against another claim, even one that looks
// older (creation times have a resolution of a second, and the name decides
// ties); a holder being deleted keeps it until it is gone, and the claimant
// waits (not Stalled).
func TestMinionIDHandover(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	holder := objs[3].(*v1alpha1.MinionBinding)
	holder.Name = "zz-holder"
	h := newHarness(t, objs...)
	h.reconcile("salt", "zz-holder")
	if !apimeta.IsStatusConditionTrue(h.get("salt", "zz-holder").Status.Conditions, v1alpha1.ReadyCondition) {
		t.Fatal("the holder is not Ready")
	}
	claimant := holder.DeepCopy()
	claimant.Name, claimant.ResourceVersion = "aa-claimant", ""
	claimant.CreationTimestamp = metav1.NewTime(holder.CreationTimestamp.Add(-time.Hour))
	if err := h.c.Create(context.Background(), claimant); err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "aa-claimant")
	c := h.get("salt", "aa-claimant")
	if r := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ReadyCondition); r.Reason != v1alpha1.DuplicateMinionIDReason {
		t.Fatalf("claimant %+v", c.Status.Conditions)
	}
	// The holder starts being deleted: the claimant waits for it.
	if err := h.c.Delete(context.Background(), h.get("salt", "zz-holder")); err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "aa-claimant")
	c = h.get("salt", "aa-claimant")
	if r := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ReadyCondition); r.Reason != v1alpha1.MinionIDReleasingReason ||
		apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.StalledCondition) || h.v.Calls("WriteRole") != 1 {
		t.Fatalf("claimant %+v, %d role writes", c.Status.Conditions, h.v.Calls("WriteRole"))
	}
	h.reconcile("salt", "zz-holder") // finalizer: Vault cleaned, binding gone
	h.reconcile("salt", "aa-claimant")
	if !apimeta.IsStatusConditionTrue(h.get("salt", "aa-claimant").Status.Conditions, v1alpha1.ReadyCondition) {
		t.Fatalf("claimant after the handover %+v", h.get("salt", "aa-claimant").Status.Conditions)
	}
}

func reqFor(ns, name string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// What an administrator or a Salt master does by hand to a minion's
// objects (an alias or the entity deleted, the metadata map replaced)
// never leaves the operator unable to prove them: a switch of template and
// a deletion right after still remove everything, nothing is left to
// block the minion's next binding, and a wiped marker is written back.
func TestHandEditsNeverStrandTheMinion(t *testing.T) {
	ctx := context.Background()
	deleteAlias := func(t *testing.T, v *vaulttest.Fake) {
		e, _ := v.ReadEntityByName(ctx, "salt_minion_web01")
		if e == nil || len(e.Aliases) != 1 {
			t.Fatalf("entity %+v", e)
		}
		if err := v.DeleteEntityAlias(ctx, e.Aliases[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	deleteEntity := func(t *testing.T, v *vaulttest.Fake) {
		if err := v.DeleteEntityByName(ctx, "salt_minion_web01"); err != nil {
			t.Fatal(err)
		}
	}
	replaceMetadata := func(t *testing.T, v *vaulttest.Fake) {
		// A Salt master's entity write: the whole map, marker gone.
		if _, err := v.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{"minion-id": "web01"}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		edit       func(*testing.T, *vaulttest.Fake)
		thenSwitch bool // the binding switches template before it is deleted
	}{
		{"alias deleted, then a switch", deleteAlias, true},
		{"entity deleted, then a switch", deleteEntity, true},
		{"metadata replaced, then a switch", replaceMetadata, true},
		{"alias deleted, then the deletion", deleteAlias, false},
		{"entity deleted, then the deletion", deleteEntity, false},
		{"metadata replaced, then the deletion", replaceMetadata, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := fixtures(map[string]any{"roles": []string{"web"}})
			t2 := objs[2].(*v1alpha1.MinionTemplate).DeepCopy()
			t2.Name, t2.UID, t2.Spec.EntityName = "t2", "uid-t2", "minion_b_{minion}"
			t2.Spec.AppRole = &v1alpha1.MinionAppRoleSpec{Mount: "salt-minions-b"}
			h := newHarness(t, append(objs, t2)...)
			h.v.EnableAuth("salt-minions-b")
			h.reconcile("salt", "web01")
			tt.edit(t, h.v)
			if tt.thenSwitch {
				b := h.get("salt", "web01")
				patch := client.MergeFrom(b.DeepCopy())
				b.Spec.TemplateRef.Name, b.Generation = "t2", b.Generation+1
				if err := h.c.Patch(ctx, b, patch); err != nil {
					t.Fatal(err)
				}
				h.reconcile("salt", "web01")
				if got := reason(h.get("salt", "web01")); got != v1alpha1.SucceededReason {
					t.Fatalf("after the switch: %s (%s)", got, h.events())
				}
				if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r != nil {
					t.Fatalf("the old role was left after the switch: %s", h.events())
				}
			}
			h.deleteAndFinalize("salt", "web01")
			for _, mount := range []string{"salt-minions", "salt-minions-b"} {
				if r, _ := h.v.ReadRole(ctx, mount, "web01"); r != nil {
					t.Errorf("role %s/web01 left in Vault with its policies %v: %s", mount, r["token_policies"], h.events())
				}
			}
			for _, e := range []string{"salt_minion_web01", "minion_b_web01"} {
				if got, _ := h.v.ReadEntityByName(ctx, e); got != nil {
					t.Errorf("entity %s left in Vault: %v", e, got.Metadata)
				}
			}
			// The minion's next binding, in another namespace.
			next := attacker("web01", "other", "web01", "t")
			next.Finalizers = nil
			next.Spec.Pillar = rawDoc(map[string]any{"roles": []string{"web"}})
			if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}); err != nil {
				t.Fatal(err)
			}
			if err := h.c.Create(ctx, next); err != nil {
				t.Fatal(err)
			}
			h.reconcile("other", "web01")
			if got := reason(h.get("other", "web01")); got != v1alpha1.SucceededReason {
				t.Fatalf("the minion's next binding: %s (%s)", got, h.events())
			}
		})
	}
}

// A marker wiped by a metadata map replaced whole (a Salt master's entity
// write) is written back: the binding's role, whose role ID proves it,
// links the entity.
func TestWipedMarkerIsWrittenBack(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	h.reconcile("salt", "web01")
	// Status lost too (as after a restore): only the role proves it.
	b := h.get("salt", "web01")
	b.Status = v1alpha1.MinionBindingStatus{}
	if err := h.c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := h.v.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{"minion-id": "web01"}); err != nil {
		t.Fatal(err)
	}
	h.events()
	h.reconcile("salt", "web01")
	e, _ := h.v.ReadEntityByName(ctx, "salt_minion_web01")
	if m, ok := ownership.ParseMarker(e.Metadata[ownership.MarkerKey]); !ok || m.UID != "uid-web01" || e.Metadata["roles"] != "web" || e.Metadata["minion-id"] != "web01" {
		t.Fatalf("metadata after the repair: %v", e.Metadata)
	}
	// Another writer removed the proof: the operator's correction is said
	// as any drift correction is (not as a takeover: it was the binding's).
	if got, ev := reason(h.get("salt", "web01")), h.events(); got != v1alpha1.SucceededReason ||
		!strings.Contains(ev, "DriftCorrected") || !strings.Contains(ev, "owner marker was removed") || strings.Contains(ev, "TakenOver") {
		t.Errorf("%s, events %q", got, ev)
	}
	if d := h.get("salt", "web01").Status.DriftCorrections; d == nil || d.Count != 1 {
		t.Errorf("status.driftCorrections %+v, want the correction counted", d)
	}
}
