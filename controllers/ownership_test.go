package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
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
