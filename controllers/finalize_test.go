package controllers

import (
	"context"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
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
		return nil, waiting(waitingForCredential, "Secret ops/token does not exist")
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

// A record that no longer decodes (edited by hand) does not wedge the
// deletion: the binding says so in one event and deletes what status says
// it wrote, as far as Vault proves it the binding's.
func TestDeletionWithABrokenRecordLooksWhereStatusSays(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	ctx := context.Background()
	h.reconcile("salt", "web01")
	h.events()
	b := h.get("salt", "web01")
	b.Annotations[v1alpha1.VaultObjectsAnnotation] = "not json"
	if err := h.c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	h.deleteAndFinalize("salt", "web01")
	if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r != nil {
		t.Error("role remains although status names it")
	}
	evs := h.events()
	if n := strings.Count(evs, "looking only where status says"); n != 1 || !strings.Contains(evs, v1alpha1.DeletionBlockedReason) {
		t.Errorf("want one DeletionBlocked event about the record, got:\n%s", evs)
	}
	if !strings.Contains(evs, "Deleted from Vault") {
		t.Errorf("no Deleted event:\n%s", evs)
	}
}
