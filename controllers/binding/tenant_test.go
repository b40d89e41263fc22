package binding

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// These tests play a hostile tenant, who may create, edit and delete
// MinionBindings (spec, annotations, finalizers; not status) in its own
// namespace, against a victim's minion. test/e2e plays the same against
// the real servers.

// vaultState is what an attack must not change: the victim's role ID,
// entity ID, alias ID and metadata.
type minionState struct {
	roleID, entityID, aliasID string
	metadata                  map[string]string
}

func stateOf(t *testing.T, v *vaulttest.Fake, minion, entity string) minionState {
	t.Helper()
	ctx := context.Background()
	id, _ := v.ReadRoleID(ctx, "salt-minions", minion)
	e, _ := v.ReadEntityByName(ctx, entity)
	st := minionState{roleID: id}
	if e != nil {
		st.entityID, st.metadata = e.ID, e.Metadata
		if len(e.Aliases) == 1 {
			st.aliasID = e.Aliases[0].ID
		}
	}
	return st
}

func (s minionState) same(o minionState) bool {
	if s.roleID != o.roleID || s.entityID != o.entityID || s.aliasID != o.aliasID || len(s.metadata) != len(o.metadata) {
		return false
	}
	for k, v := range s.metadata {
		if o.metadata[k] != v {
			return false
		}
	}
	return s.roleID != "" && s.entityID != "" && s.aliasID != ""
}

func attacker(name, ns, minion, template string) *v1alpha1.MinionBinding {
	return &v1alpha1.MinionBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.Now(),
			Finalizers: []string{v1alpha1.Finalizer}},
		Spec: v1alpha1.MinionBindingSpec{MinionID: minion, TemplateRef: v1alpha1.MinionTemplateReference{Name: template}},
	}
}

func (h *harness) deleteAndFinalize(ns, name string) {
	h.t.Helper()
	b := h.get(ns, name)
	if b == nil {
		h.t.Fatalf("%s/%s does not exist", ns, name)
	}
	if err := h.c.Delete(context.Background(), b); err != nil {
		h.t.Fatal(err)
	}
	h.reconcile(ns, name)
	if h.get(ns, name) != nil {
		h.t.Fatalf("%s/%s is still there after its finalizer ran", ns, name)
	}
}

// heldMinion is salt/web01 holding its minion (its template retaining or
// not), with namespace ns for another binding, and the minion's state.
func heldMinion(t *testing.T, retain bool, ns string) (*harness, minionState) {
	t.Helper()
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	if retain {
		objs[2].(*v1alpha1.MinionTemplate).Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain
	}
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	h := newHarness(t, objs...)
	h.r.APIReader = h.c
	h.reconcile("salt", "web01")
	return h, stateOf(t, h.v, "web01", "salt_minion_web01")
}

// deleteWithoutFinalizer is a tenant stripping its binding's finalizer
// and deleting it: the operator removes nothing.
func (h *harness) deleteWithoutFinalizer(ns, name string) {
	h.t.Helper()
	b := h.get(ns, name)
	patch := client.MergeFrom(b.DeepCopy())
	b.Finalizers = nil
	if err := h.c.Patch(context.Background(), b, patch); err != nil {
		h.t.Fatal(err)
	}
	if err := h.c.Delete(context.Background(), b); err != nil {
		h.t.Fatal(err)
	}
}

func reason(b *v1alpha1.MinionBinding) string {
	if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		return c.Reason
	}
	return ""
}

// A tenant creates a binding with the victim's minion ID and a hand-set
// finalizer (and a record naming the victim's objects, with any template
// or none), then deletes it: nothing of the victim changes.
func TestTenantCannotDeleteAnotherMinion(t *testing.T) {
	forged := `[{"vault":"` + testVaultID + `","connection":"vault","mount":"salt-minions","entity":"salt_minion_web01"}]`
	tests := []struct {
		name   string
		evil   *v1alpha1.MinionBinding
		record string // the attacker's hand-written record, if any
		reason string
	}{
		{name: "same template, hand-set finalizer", evil: attacker("evil", "salt", "web01", "t"), reason: v1alpha1.DuplicateMinionIDReason},
		{name: "and a forged record", evil: attacker("evil", "salt", "web01", "t"), record: forged, reason: v1alpha1.DuplicateMinionIDReason},
		{name: "a missing template and a forged record", evil: attacker("evil", "salt", "web01", "nope"), record: forged, reason: v1alpha1.TemplateNotFoundReason},
		{name: "the minion ID in another case", evil: attacker("evil", "salt", "WEB01", "t"), record: forged, reason: v1alpha1.DuplicateMinionIDReason},
		// The deletion then looks only where the attacker's status says,
		// which only the operator writes.
		{name: "a record that does not decode", evil: attacker("evil", "salt", "web01", "t"), record: "not json", reason: v1alpha1.DuplicateMinionIDReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.record != "" {
				tt.evil.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: tt.record}
			}
			h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
			h.reconcile("salt", "web01")
			before := stateOf(t, h.v, "web01", "salt_minion_web01")
			tt.evil.CreationTimestamp = metav1.NewTime(time.Now().Add(time.Second))
			if err := h.c.Create(context.Background(), tt.evil); err != nil {
				t.Fatal(err)
			}
			h.v.ResetCalls()
			h.reconcile("salt", "evil")
			if got := reason(h.get("salt", "evil")); got != tt.reason {
				t.Fatalf("attacker's binding: %q, want %q", got, tt.reason)
			}
			h.deleteAndFinalize("salt", "evil")
			if after := stateOf(t, h.v, "web01", "salt_minion_web01"); !before.same(after) {
				t.Fatalf("the victim's minion changed:\n%+v\n%+v", before, after)
			}
			if w := h.v.Writes(); w != 0 {
				t.Errorf("%d Vault writes for the attacker's binding", w)
			}
			if ev := h.events(); strings.Contains(ev, "Deleted from Vault") {
				t.Errorf("events %q", ev)
			}
		})
	}
}

// A record naming an entity a Vault administrator made (no alias, no
// marker) deletes nothing, and the event names only what was deleted.
func TestForgedRecordNamingAnAdministratorsEntity(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	ctx := context.Background()
	adminID, err := h.v.WriteEntityByName(ctx, "ops-admin", map[string]string{"team": "ops"})
	if err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "web01")
	b := h.get("salt", "web01")
	patch := client.MergeFrom(b.DeepCopy())
	b.Annotations[v1alpha1.VaultObjectsAnnotation] = `[{"vault":"` + testVaultID + `","connection":"vault","mount":"salt-minions","entity":"ops-admin"},` +
		`{"vault":"` + testVaultID + `","connection":"vault","mount":"gone-mount","entity":"never-existed"}]`
	if err := h.c.Patch(ctx, b, patch); err != nil {
		t.Fatal(err)
	}
	h.deleteAndFinalize("salt", "web01")
	if e, _ := h.v.ReadEntityByName(ctx, "ops-admin"); e == nil || e.ID != adminID || e.Metadata["team"] != "ops" {
		t.Fatalf("the administrator's entity changed: %+v", e)
	}
	ev := h.events()
	if !strings.Contains(ev, "entity ops-admin") || !strings.Contains(ev, v1alpha1.NotOwnedReason) {
		t.Errorf("events do not say what was left: %q", ev)
	}
	if strings.Contains(ev, "never-existed") && strings.Contains(ev, "Deleted from Vault: entity never-existed") {
		t.Errorf("the Deleted event lists an object that never existed: %q", ev)
	}
	// The binding's own objects are gone: the forged record did not shield them either.
	if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r != nil {
		t.Error("the binding's own role was left")
	}
}

// Two connections to one Vault: a switch of the template's connectionRef
// either way moves nothing and deletes nothing.
func TestConnectionSwitchWithinOneVault(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	objs = append(objs, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault-b"}, Status: v1alpha1.VaultConnectionStatus{ClusterID: testVaultID}})
	h := newHarness(t, objs...)
	ctx := context.Background()
	h.reconcile("salt", "web01")
	before := stateOf(t, h.v, "web01", "salt_minion_web01")
	for _, conn := range []string{"vault-b", "vault", "vault-b"} {
		tpl := &v1alpha1.MinionTemplate{}
		if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl); err != nil {
			t.Fatal(err)
		}
		tpl.Spec.ConnectionRef.Name = conn
		tpl.Generation++
		if err := h.c.Update(ctx, tpl); err != nil {
			t.Fatal(err)
		}
		h.v.ResetCalls()
		h.reconcile("salt", "web01")
		if w := h.v.Writes(); w != 0 {
			t.Errorf("switch to %s: %d Vault writes", conn, w)
		}
		b := h.get("salt", "web01")
		inv, _ := ownership.Decode(b.Annotations[v1alpha1.VaultObjectsAnnotation])
		if len(inv) != 1 || inv[0].Connection != conn || reason(b) != v1alpha1.SucceededReason {
			t.Errorf("switch to %s: record %+v, %s", conn, inv, reason(b))
		}
	}
	if after := stateOf(t, h.v, "web01", "salt_minion_web01"); !before.same(after) {
		t.Fatalf("the minion changed:\n%+v\n%+v", before, after)
	}
}

// shard is one operator instance: its own cache (only its bindings), the
// cluster's API server for the holder check, one shared Vault.
func shard(t *testing.T, v *vaulttest.Fake, cluster string, apiServer client.Client, objs ...client.Object) *harness {
	h := newHarness(t, objs...)
	h.v = v
	h.r.Connections.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return v, nil }
	h.r.ClusterID = cluster
	h.r.APIReader = apiServer
	h.rec = events.NewFakeRecorder(100)
	h.r.Recorder = h.rec
	return h
}

// Two shards of one cluster, and two clusters on one Vault, with the same
// minion ID: one owner, the other refused and writing nothing, ever;
// deleting the refused one deletes nothing; once the holder of this
// cluster is gone, the other takes over.
func TestOneMinionOneOwnerAcrossShardsAndClusters(t *testing.T) {
	for _, sameCluster := range []bool{true, false} {
		name := map[bool]string{true: "two shards", false: "two clusters"}[sameCluster]
		t.Run(name, func(t *testing.T) {
			v := vaulttest.NewFake()
			v.EnableAuth("salt-minions")
			base := fixtures(map[string]any{"roles": []string{"web"}})
			holder := base[3].(*v1alpha1.MinionBinding)
			other := holder.DeepCopy()
			other.Namespace, other.UID = "salt", "uid-other"
			other.Name = "web01-b"
			// The cluster's API server, as the holder check sees it.
			all := newHarness(t, append(base[:3:3], holder.DeepCopy(), other.DeepCopy())...).c
			cluster2 := testCluster
			if !sameCluster {
				cluster2 = "other-cluster"
			}
			a := shard(t, v, testCluster, all, base...)
			b := shard(t, v, cluster2, all, append(base[:3:3], other)...)

			a.reconcile("salt", "web01")
			before := stateOf(t, v, "web01", "salt_minion_web01")
			v.ResetCalls()
			for range 3 {
				b.reconcile("salt", "web01-b")
				a.reconcile("salt", "web01")
			}
			if w := v.Writes(); w != 0 {
				t.Fatalf("%d writes with two owners in steady state", w)
			}
			got := b.get("salt", "web01-b")
			if reason(got) != v1alpha1.MinionIDConflictReason || apimeta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.StalledCondition) {
				t.Fatalf("the second binding: %+v", got.Status.Conditions)
			}
			if msg := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReadyCondition).Message; !strings.Contains(msg, "salt/web01") || !strings.Contains(msg, testCluster) {
				t.Errorf("the refusal does not name the holder: %q", msg)
			}
			if reason(a.get("salt", "web01")) != v1alpha1.SucceededReason {
				t.Fatalf("the holder: %+v", a.get("salt", "web01").Status.Conditions)
			}
			// The refused binding got no finalizer and no record; a tenant
			// sets both by hand, naming the holder's objects: its deletion
			// still deletes nothing.
			refused := b.get("salt", "web01-b")
			if len(refused.Finalizers) != 0 || refused.Annotations[v1alpha1.VaultObjectsAnnotation] != "" {
				t.Fatalf("a refused binding was given %v and record %q", refused.Finalizers, refused.Annotations[v1alpha1.VaultObjectsAnnotation])
			}
			patch := client.MergeFrom(refused.DeepCopy())
			refused.Finalizers = []string{v1alpha1.Finalizer}
			refused.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: `[{"vault":"` + testVaultID +
				`","connection":"vault","mount":"salt-minions","entity":"salt_minion_web01"}]`}
			if err := b.c.Patch(context.Background(), refused, patch); err != nil {
				t.Fatal(err)
			}
			b.deleteAndFinalize("salt", "web01-b")
			if after := stateOf(t, v, "web01", "salt_minion_web01"); !before.same(after) {
				t.Fatalf("deleting the refused binding changed the minion:\n%+v\n%+v", before, after)
			}
		})
	}
}

// A holder that goes without its objects leaves them marked in Vault:
// deleted with deletionPolicy Retain (they are marked retained, kept for
// it), or with its finalizer stripped by hand (lost: kept for it for the
// restore window, then collected by the lost-minion collector). The same
// binding coming back under its name (a restore) takes them over and
// keeps the minion's credentials. Another binding of the minion ID is
// never handed them: it waits, and nothing is written.
func TestTakeOverFromAGoneHolder(t *testing.T) {
	tests := []struct {
		name, ns, binding string
		retain            bool
		keeps             bool
		want              string // the new binding's reason
		writes            int
	}{
		{name: "retained, the same binding created again", ns: "salt", binding: "web01", retain: true, keeps: true, want: v1alpha1.SucceededReason, writes: 1},
		{name: "retained, another binding of the namespace", ns: "salt", binding: "web01-new", retain: true, want: v1alpha1.MinionIDRetainedReason},
		{name: "retained, a binding of another namespace", ns: "other", binding: "web01", retain: true, want: v1alpha1.MinionIDRetainedReason},
		{name: "finalizer stripped, the same binding created again", ns: "salt", binding: "web01", keeps: true, want: v1alpha1.SucceededReason, writes: 1},
		{name: "finalizer stripped, a binding of another namespace", ns: "other", binding: "web01", want: v1alpha1.MinionIDLostReason},
		{name: "finalizer stripped, another binding of the namespace", ns: "salt", binding: "web01-new", want: v1alpha1.MinionIDLostReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, before := heldMinion(t, tt.retain, "other")
			if tt.retain {
				h.deleteAndFinalize("salt", "web01")
				if got := stateOf(t, h.v, "web01", "salt_minion_web01"); got.metadata[ownership.RetainedKey] == "" || got.roleID != before.roleID {
					t.Fatalf("retained without its mark: %+v", got)
				}
			} else {
				h.deleteWithoutFinalizer("salt", "web01")
			}

			next := attacker(tt.binding, tt.ns, "web01", "t")
			next.UID = "uid-next"
			next.Finalizers = nil
			next.Spec.Pillar = rawDoc(map[string]any{"roles": []string{"web"}})
			if err := h.c.Create(context.Background(), next); err != nil {
				t.Fatal(err)
			}
			h.v.ResetCalls()
			h.events()
			h.reconcile(tt.ns, tt.binding)
			if got := reason(h.get(tt.ns, tt.binding)); got != tt.want {
				t.Fatalf("the new binding: %q, want %q", got, tt.want)
			}
			if w := h.v.Writes(); w != tt.writes {
				t.Errorf("%d writes, want %d", w, tt.writes)
			}
			after := stateOf(t, h.v, "web01", "salt_minion_web01")
			if tt.want != v1alpha1.SucceededReason {
				if !before.same(stateOfKeepMark(after)) {
					t.Errorf("a refused binding changed the retained minion: %+v -> %+v", before, after)
				}
				return
			}
			if kept := after.roleID == before.roleID && after.entityID == before.entityID; kept != tt.keeps {
				t.Errorf("the minion's IDs kept %v, want %v: %+v -> %+v", kept, tt.keeps, before, after)
			}
			if m, _ := ownership.ParseMarker(after.metadata[ownership.MarkerKey]); m.UID != "uid-next" || after.metadata[ownership.RetainedKey] != "" {
				t.Errorf("metadata after the takeover: %v", after.metadata)
			}
		})
	}
}

// stateOfKeepMark is s without the retained mark, to compare with the
// state before the deletion.
func stateOfKeepMark(s minionState) minionState {
	md := map[string]string{}
	for k, v := range s.metadata {
		if k != ownership.RetainedKey {
			md[k] = v
		}
	}
	s.metadata = md
	return s
}

// Status is output only: losing it (a restore without status) writes
// nothing, and a Retain still retains.
func TestStatusLossChangesNothing(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	objs[2].(*v1alpha1.MinionTemplate).Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain
	h := newHarness(t, objs...)
	ctx := context.Background()
	h.reconcile("salt", "web01")
	before := stateOf(t, h.v, "web01", "salt_minion_web01")

	b := h.get("salt", "web01")
	b.Status = v1alpha1.MinionBindingStatus{}
	if err := h.c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	h.v.ResetCalls()
	h.reconcile("salt", "web01")
	if w := h.v.Writes(); w != 0 {
		t.Fatalf("%d Vault writes after status was lost", w)
	}
	if reason(h.get("salt", "web01")) != v1alpha1.SucceededReason {
		t.Fatalf("conditions %+v", h.get("salt", "web01").Status.Conditions)
	}
	// Status lost again, then the template, then the binding: Retain.
	b = h.get("salt", "web01")
	b.Status = v1alpha1.MinionBindingStatus{}
	if err := h.c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	tpl := &v1alpha1.MinionTemplate{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	h.deleteAndFinalize("salt", "web01")
	if after := stateOf(t, h.v, "web01", "salt_minion_web01"); after.roleID != before.roleID || after.entityID != before.entityID {
		t.Fatalf("Retain did not retain after status was lost: %+v", after)
	}
}

// The previous release wrote no marker: its own objects are proven by the
// IDs it recorded in status, marked with one write, and its record is not
// rewritten.
func TestUpgradeMarksThePreviousReleasesObjects(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	ctx := context.Background()
	// What the previous release left: role, entity (no marker), alias,
	// the record without a Vault, status with the IDs.
	if err := h.v.WriteRole(ctx, "salt-minions", "web01", map[string]any{"token_policies": []string{"salt_role_web"}}); err != nil {
		t.Fatal(err)
	}
	roleID, _ := h.v.ReadRoleID(ctx, "salt-minions", "web01")
	entityID, _ := h.v.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{"roles": "web", "roles__0": "web"})
	acc, _ := h.v.MountAccessor(ctx, "salt-minions")
	if _, err := h.v.CreateEntityAlias(ctx, roleID, acc, entityID); err != nil {
		t.Fatal(err)
	}
	b := h.get("salt", "web01")
	b.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: `[{"connection":"vault","mount":"salt-minions","entity":"salt_minion_web01"}]`}
	b.Finalizers = []string{v1alpha1.Finalizer}
	if err := h.c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = h.get("salt", "web01")
	b.Status = v1alpha1.MinionBindingStatus{Connection: "vault",
		AppRole: &v1alpha1.AppRoleStatus{Mount: "salt-minions", Name: "web01", RoleID: roleID},
		Entity:  &v1alpha1.EntityStatus{Name: "salt_minion_web01", ID: entityID}}
	if err := h.c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	rv := h.get("salt", "web01").ResourceVersion
	h.v.ResetCalls()
	h.reconcile("salt", "web01")
	if got := reason(h.get("salt", "web01")); got != v1alpha1.SucceededReason {
		t.Fatalf("after the upgrade: %q", got)
	}
	e, _ := h.v.ReadEntityByName(ctx, "salt_minion_web01")
	if m, ok := ownership.ParseMarker(e.Metadata[ownership.MarkerKey]); !ok || m.UID != "uid-web01" || e.ID != entityID {
		t.Fatalf("entity after the upgrade %+v", e)
	}
	if id, _ := h.v.ReadRoleID(ctx, "salt-minions", "web01"); id != roleID {
		t.Errorf("role ID changed: %s -> %s", roleID, id)
	}
	// Only the entity is written (the marker, and the rendered policies
	// the old role lacked in this fixture: its parameters).
	if w := h.v.Calls("WriteEntityByName"); w != 1 {
		t.Errorf("%d entity writes, want 1", w)
	}
	if got := h.get("salt", "web01"); got.Annotations[v1alpha1.VaultObjectsAnnotation] != `[{"connection":"vault","mount":"salt-minions","entity":"salt_minion_web01"}]` {
		t.Errorf("the record was rewritten: %s (resourceVersion %s -> %s)", got.Annotations[v1alpha1.VaultObjectsAnnotation], rv, got.ResourceVersion)
	}

	// Without the status proof (lost before the upgrade), the same objects
	// are nobody's the operator knows: refused, nothing written.
	h2 := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	h2.v = vaulttest.NewFake()
	h2.v.EnableAuth("salt-minions")
	h2.r.Connections.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return h2.v, nil }
	if _, err := h2.v.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{"roles": "web"}); err != nil {
		t.Fatal(err)
	}
	h2.v.ResetCalls()
	res := h2.reconcile("salt", "web01")
	if got := reason(h2.get("salt", "web01")); got != v1alpha1.NotOwnedReason || h2.v.Writes() != 0 || res.RequeueAfter == 0 || res.RequeueAfter > 10*time.Minute {
		t.Fatalf("unmarked entity: %q, %d writes, requeue %s", got, h2.v.Writes(), res.RequeueAfter)
	}
}

// A tenant keeps a binding with a victim's minion ID, refused. The
// victim's namespace is deleted and re-created from its manifests (new
// UIDs, no status), as a restore or a GitOps re-create does. The restored
// binding gets its minion back with its credentials, whichever binding
// the operator looks at first; the claimant that waited stays refused and
// writes nothing.
func TestRestoredBindingOutranksAWaitingClaimant(t *testing.T) {
	tests := []struct {
		name string
		// retain: the victim's template retains (its deletion marks the
		// objects); otherwise its finalizer is stripped (a namespace
		// force-deleted, a cluster rebuilt), nothing is marked.
		retain bool
		// gap: the claimant is reconciled between the deletion and the
		// restore.
		gap bool
	}{
		{name: "deletionPolicy Retain, the claimant looked at in between", retain: true, gap: true},
		{name: "deletionPolicy Retain, restored at once", retain: true},
		{name: "finalizer stripped, restored at once", retain: false},
	}
	for _, tt := range tests {
		for _, squatterFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, claimant reconciled first %v", tt.name, squatterFirst), func(t *testing.T) {
				ctx := context.Background()
				h, victim := heldMinion(t, tt.retain, "squat")

				squatter := attacker("web01", "squat", "web01", "t")
				squatter.UID, squatter.Finalizers = "uid-squatter", nil
				squatter.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour)) // older than any restore
				squatter.Spec.Pillar = rawDoc(map[string]any{"roles": []string{"admin"}})
				if err := h.c.Create(ctx, squatter); err != nil {
					t.Fatal(err)
				}
				h.reconcile("squat", "web01")
				if got := reason(h.get("squat", "web01")); got != v1alpha1.DuplicateMinionIDReason {
					t.Fatalf("the claimant while the victim holds: %s", got)
				}

				if tt.retain {
					h.deleteAndFinalize("salt", "web01")
				} else {
					h.deleteWithoutFinalizer("salt", "web01")
				}
				h.v.ResetCalls()
				if tt.gap {
					h.reconcile("squat", "web01")
					if got := reason(h.get("squat", "web01")); got != v1alpha1.MinionIDRetainedReason || h.v.Writes() != 0 {
						t.Fatalf("the claimant in the gap: %s, %d writes (%s)", got, h.v.Writes(), h.events())
					}
				}
				restored := attacker("web01", "salt", "web01", "t")
				restored.UID, restored.Finalizers = "uid-restored", nil
				restored.Spec.Pillar = rawDoc(map[string]any{"roles": []string{"web"}})
				if err := h.c.Create(ctx, restored); err != nil {
					t.Fatal(err)
				}
				order := [][2]string{{"salt", "web01"}, {"squat", "web01"}}
				if squatterFirst {
					order[0], order[1] = order[1], order[0]
				}
				for range 2 {
					for _, k := range order {
						h.reconcile(k[0], k[1])
					}
				}
				if got := reason(h.get("salt", "web01")); got != v1alpha1.SucceededReason {
					t.Fatalf("the restored binding: %s (%s)", got, h.events())
				}
				if got := reason(h.get("squat", "web01")); got != v1alpha1.DuplicateMinionIDReason {
					t.Errorf("the claimant: %s", got)
				}
				after := stateOf(t, h.v, "web01", "salt_minion_web01")
				if after.roleID != victim.roleID || after.entityID != victim.entityID || after.metadata["roles"] != "web" {
					t.Errorf("the restored binding did not get its minion back: %+v -> %+v", victim, after)
				}
				if m, _ := ownership.ParseMarker(after.metadata[ownership.MarkerKey]); m.UID != "uid-restored" {
					t.Errorf("marker %q", after.metadata[ownership.MarkerKey])
				}
				if sq := h.get("squat", "web01"); len(sq.Finalizers) != 0 || sq.Status.AppRole != nil {
					t.Errorf("the claimant was recorded as a writer: %v %+v", sq.Finalizers, sq.Status.AppRole)
				}
			})
		}
	}
}
