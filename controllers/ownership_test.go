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

func TestRecordedPlacements(t *testing.T) {
	withStatus := func(b *v1alpha1.MinionBinding) {
		b.Status.Connection = "vault"
		b.Status.AppRole = &v1alpha1.AppRoleStatus{Mount: "salt-minions", Name: "web01"}
		b.Status.Entity = &v1alpha1.EntityStatus{Name: "salt_minion_web01"}
	}
	tests := []struct {
		name       string
		annotation string
		status     bool
		want       []placement
		wantErr    string
	}{
		{name: "nothing yet"},
		{name: "from the annotation", annotation: `[{"connection":"vault","mount":"m","entity":"e"}]`,
			want: []placement{{"vault", "m", "e"}}},
		{name: "status of an older operator", status: true, want: []placement{{"vault", "salt-minions", "salt_minion_web01"}}},
		{name: "both, the same place (entity names are case-insensitive)", status: true,
			annotation: `[{"connection":"vault","mount":"salt-minions","entity":"Salt_Minion_Web01"}]`,
			want:       []placement{{"vault", "salt-minions", "Salt_Minion_Web01"}}},
		{name: "a switch in progress", status: true, annotation: `[{"connection":"vault","mount":"b","entity":"e"}]`,
			want: []placement{{"vault", "b", "e"}, {"vault", "salt-minions", "salt_minion_web01"}}},
		{name: "not JSON", annotation: `role web01`, wantErr: "not a JSON list"},
		{name: "an entry without a mount", annotation: `[{"connection":"vault","entity":"e"}]`, wantErr: "needs a connection, a mount and an entity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &v1alpha1.MinionBinding{}
			if tt.annotation != "" {
				b.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: tt.annotation}
			}
			if tt.status {
				withStatus(b)
			}
			got, err := recordedPlacements(b)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("[%d] %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestEntityIsOurs(t *testing.T) {
	recorded := &v1alpha1.EntityStatus{ID: "e-1"}
	alias := func(names ...string) []vault.Alias {
		var out []vault.Alias
		for _, n := range names {
			out = append(out, vault.Alias{Name: n})
		}
		return out
	}
	tests := []struct {
		name   string
		entity vault.Entity
		want   bool
	}{
		{"the entity status recorded", vault.Entity{ID: "e-1", Aliases: alias("someone-else")}, true},
		{"no alias: no login can use it", vault.Entity{ID: "e-2"}, true},
		{"aliased by our role IDs", vault.Entity{ID: "e-2", Aliases: alias("rid-old", "rid-new")}, true},
		{"another minion's login", vault.Entity{ID: "e-2", Aliases: alias("victim-rid")}, false},
		{"ours and another's", vault.Entity{ID: "e-2", Aliases: alias("rid-old", "victim-rid")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := entityIsOurs(&tt.entity, recorded, []string{"rid-old", "rid-new"}); got != tt.want {
				t.Errorf("entityIsOurs = %v, want %v", got, tt.want)
			}
		})
	}
}

// Someone who may edit bindings (not status) points the record at another
// minion's objects. The binding deletes only its own role, and leaves the
// other minion's entity, with a warning.
func TestForgedRecordCannotDeleteOthersObjects(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	victim := objs[3].(*v1alpha1.MinionBinding).DeepCopy()
	victim.Name, victim.Spec.MinionID, victim.ResourceVersion = "victim", "victim", ""
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
	if ev := h.events(); !strings.Contains(ev, "EntityNotOwned") {
		t.Errorf("events %q", ev)
	}
	if got := h.get("salt", "web01").Annotations[v1alpha1.VaultObjectsAnnotation]; got != `[{"connection":"vault","mount":"salt-minions","entity":"salt_minion_web01"}]` {
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
	// What was written is recorded: the entity's ID, for a deletion.
	if b.Status.Entity == nil || b.Status.Entity.ID == "" || b.Status.AppRole == nil || b.Status.AppRole.RoleID == "" {
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
