package lost

import (
	"context"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

const mount = "salt-minions"

// world is a Vault (the fake) with minions written as the operator writes
// them, a cluster (the fake API server) and a collector with a clock.
type world struct {
	t    *testing.T
	v    *vaulttest.Fake
	c    client.Client
	rec  *events.FakeRecorder
	col  *Collector
	now  time.Time
	key  string
	woke []string
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	v := vaulttest.NewFake()
	info, _ := v.ServerInfo(context.Background())
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault"},
		Status: v1alpha1.VaultConnectionStatus{ClusterID: info.ClusterID}}
	apimeta.SetStatusCondition(&conn.Status.Conditions, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Succeeded"})
	// The template whose AppRole mount the sweep lists.
	tpl := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: v1alpha1.MinionTemplateSpec{
		ConnectionRef: v1alpha1.VaultConnectionReference{Name: "vault"}, AppRole: &v1alpha1.MinionAppRoleSpec{Mount: mount}}}
	c := testkit.Builder().WithObjects(append([]client.Object{conn, tpl}, objs...)...).WithStatusSubresource(conn).Build()
	w := &world{t: t, v: v, c: c, rec: events.NewFakeRecorder(100), now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC),
		key: ownership.VaultKey(info.ClusterID, "")}
	notices := &lostnotice.Notices{}
	w.col = &Collector{Client: c, APIReader: c, Recorder: w.rec, Notices: notices, ClusterID: testkit.Cluster,
		Window: time.Hour, Interval: 10 * time.Minute, SeesAllBindings: true,
		Connections: &connection.Connections{Client: c, NewClient: func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return v, nil }},
		clock:       func() time.Time { return w.now }}
	notices.OnNotice(w.col.notice)
	// What Claimants would enqueue, recorded.
	_ = notices.Claimants(nil)
	return w
}

// minion writes a minion as the operator does for owner: the entity with
// its marker, its alias named by a role ID chosen for owner, the role.
func (w *world) minion(owner ownership.Owner, id, entity string, extra map[string]string) (roleID string) {
	w.t.Helper()
	ctx := context.Background()
	md := map[string]string{ownership.MarkerKey: owner.Marker(), "roles": "web"}
	for k, v := range extra {
		md[k] = v
	}
	eid, err := w.v.WriteEntityByName(ctx, entity, md)
	if err != nil {
		w.t.Fatal(err)
	}
	roleID = ownership.NewRoleID(owner, ownership.RolePlace{Mount: mount, Role: id}, [16]byte{byte(len(id)), 7})
	acc, _ := w.v.MountAccessor(ctx, mount)
	if _, err := w.v.CreateEntityAlias(ctx, roleID, acc, eid); err != nil {
		w.t.Fatal(err)
	}
	if err := w.v.WriteRole(ctx, mount, id, map[string]any{"role_id": roleID, "token_policies": []string{"x"}}); err != nil {
		w.t.Fatal(err)
	}
	return roleID
}

// pass runs the collector's reconcile of the Vault and returns the
// requeue.
func (w *world) pass() time.Duration {
	w.t.Helper()
	res, err := w.col.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: w.key}})
	if err != nil {
		w.t.Fatal(err)
	}
	return res.RequeueAfter
}

// drainSweep runs passes, each at the requeue asked for, until the
// sweep's reads are done.
func (w *world) drainSweep() {
	w.t.Helper()
	st := w.col.state(w.key)
	for range 1000 {
		if len(st.queue) == 0 && len(st.pending) == 0 {
			return
		}
		next := w.pass()
		if len(st.queue) == 0 && len(st.pending) == 0 {
			return
		}
		w.now = w.now.Add(next)
	}
	w.t.Fatal("the sweep never ended")
}

func (w *world) exists(id, entity string) (role, ent bool) {
	ctx := context.Background()
	r, _ := w.v.ReadRole(ctx, mount, id)
	e, _ := w.v.ReadEntityByName(ctx, entity)
	return r != nil, e != nil
}

func (w *world) entityMeta(entity string) map[string]string {
	e, _ := w.v.ReadEntityByName(context.Background(), entity)
	if e == nil {
		return nil
	}
	return e.Metadata
}

func owner(ns, name, uid string) ownership.Owner {
	return ownership.Owner{Cluster: testkit.Cluster, Namespace: ns, Name: name, UID: uid}
}

func liveBinding(o ownership.Owner, id, entity string, withStatus bool) *v1alpha1.MinionBinding {
	b := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: types.UID(o.UID)},
		Spec: v1alpha1.MinionBindingSpec{MinionID: id, TemplateRef: v1alpha1.MinionTemplateReference{Name: "t"}}}
	if withStatus {
		b.Status.Connection = "vault"
		b.Status.AppRole = &v1alpha1.AppRoleStatus{Mount: mount, Name: id, RoleID: "known"}
		b.Status.Entity = &v1alpha1.EntityStatus{Name: entity, ID: "eid"}
	}
	return b
}

// A lost minion (its binding gone, no finalizer ran) found by the sweep is
// marked (one write: the window starts), kept until the window ends, then
// collected: the role first, then the entity.
func TestLostMinionMarkedKeptCollected(t *testing.T) {
	w := newWorld(t)
	gone := owner("team-a", "web01", "uid-gone")
	w.minion(gone, "web01", "minion-web01", nil)
	w.v.ResetCalls()

	w.pass()
	w.drainSweep()
	md := w.entityMeta("minion-web01")
	since, ok := ownership.LostSince(md)
	if !ok || w.v.Writes() != 1 {
		t.Fatalf("after the sweep: %d writes, metadata %v: want the lost mark only", w.v.Writes(), md)
	}
	if md[ownership.MarkerKey] != gone.Marker() || md["roles"] != "web" {
		t.Errorf("the mark changed the rest of the metadata: %v", md)
	}
	if ev := testkit.Drain(w.rec); !strings.Contains(ev, "MinionLost") || !strings.Contains(ev, "uid-gone") || !strings.Contains(ev, v1alpha1.CollectAnnotation) {
		t.Errorf("events: %q", ev)
	}

	// Within the window: kept, nothing written however often it looks.
	w.v.ResetCalls()
	for range 3 {
		w.now = w.now.Add(10 * time.Minute)
		w.col.notice(lostnotice.Candidate{Vault: w.key, Connection: "vault", Mount: mount, Role: "web01", Entity: "minion-web01"})
		w.pass()
	}
	if w.v.Writes() != 0 {
		t.Fatalf("%d writes within the window", w.v.Writes())
	}
	if role, ent := w.exists("web01", "minion-web01"); !role || !ent {
		t.Fatal("collected within the window")
	}

	// The window's end is the requeue asked for.
	w.now = since.Add(time.Hour)
	w.pass()
	if role, ent := w.exists("web01", "minion-web01"); role || ent {
		t.Fatalf("after the window: role %v, entity %v left", role, ent)
	}
	if got := w.v.Calls("DeleteRole"); got != 1 || w.v.Calls("DeleteEntityByName") != 1 {
		t.Errorf("deletes: role %d, entity %d", got, w.v.Calls("DeleteEntityByName"))
	}
	if ev := testkit.Drain(w.rec); !strings.Contains(ev, "MinionCollected") || !strings.Contains(ev, "AppRole salt-minions/web01") {
		t.Errorf("events: %q", ev)
	}
}

// What is not lost is never touched: a live binding's minion, another
// cluster's, an administrator's (unmarked), one being deleted, and one the
// binding coming back under its name took back within the window.
func TestNotLostIsNeverTouched(t *testing.T) {
	live := owner("team-a", "web01", "uid-live")
	deleting := owner("team-a", "db01", "uid-del")
	now := metav1.Now()
	delBinding := liveBinding(deleting, "db01", "minion-db01", false)
	delBinding.DeletionTimestamp, delBinding.Finalizers = &now, []string{v1alpha1.Finalizer}
	w := newWorld(t, liveBinding(live, "web01", "minion-web01", false), delBinding)
	w.minion(live, "web01", "minion-web01", nil)
	w.minion(deleting, "db01", "minion-db01", nil)
	w.minion(ownership.Owner{Cluster: "other-cluster", Namespace: "x", Name: "y", UID: "u"}, "foreign01", "minion-foreign01", nil)
	ctx := context.Background()
	if _, err := w.v.WriteEntityByName(ctx, "salt-master-made", map[string]string{"minion-id": "mm01"}); err != nil {
		t.Fatal(err)
	}
	if err := w.v.WriteRole(ctx, mount, "mm01", map[string]any{"token_policies": []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	// Forged: an unmarked entity naming a gone binding in a key the
	// operator does not read, and a marker edited by hand.
	if _, err := w.v.WriteEntityByName(ctx, "edited", map[string]string{ownership.MarkerKey: "cluster=" + testkit.Cluster + " binding=team-b/x"}); err != nil {
		t.Fatal(err)
	}
	w.v.ResetCalls()
	w.pass()
	w.drainSweep()
	w.now = w.now.Add(48 * time.Hour)
	w.pass()
	w.drainSweep()
	if w.v.Writes() != 0 {
		t.Fatalf("%d writes, want none: nothing is lost", w.v.Writes())
	}
	if ev := testkit.Drain(w.rec); ev != "" {
		t.Errorf("events: %q", ev)
	}
}

// A binding created again under the lost one's name takes the objects
// back within the window (it rewrites the marker): the collector leaves
// them, even when the window has ended by its next look.
func TestTakenBackWithinTheWindowIsKept(t *testing.T) {
	w := newWorld(t)
	gone := owner("team-a", "web01", "uid-gone")
	w.minion(gone, "web01", "minion-web01", nil)
	w.pass()
	w.drainSweep()
	if _, ok := ownership.LostSince(w.entityMeta("minion-web01")); !ok {
		t.Fatal("not marked lost")
	}
	// The restore: a new UID under the same name, its marker rewritten
	// (and the lost mark dropped) by its reconcile.
	back := owner("team-a", "web01", "uid-back")
	if err := w.c.Create(context.Background(), liveBinding(back, "web01", "minion-web01", true)); err != nil {
		t.Fatal(err)
	}
	md, err := ownership.Metadata(w.entityMeta("minion-web01"), nil, back)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.v.WriteEntityByName(context.Background(), "minion-web01", md); err != nil {
		t.Fatal(err)
	}
	w.v.ResetCalls()
	w.now = w.now.Add(2 * time.Hour)
	w.pass()
	w.drainSweep()
	if role, ent := w.exists("web01", "minion-web01"); !role || !ent || w.v.Writes() != 0 {
		t.Fatalf("the restored minion: role %v, entity %v, %d writes", role, ent, w.v.Writes())
	}
}

// Retained minions wait for their binding until an administrator asks
// for them to be collected; a request naming a live binding collects
// nothing and says so.
func TestRetainedUntilReleased(t *testing.T) {
	live := owner("team-a", "db01", "uid-live")
	w := newWorld(t, liveBinding(live, "db01", "minion-db01", false))
	gone := owner("team-a", "web01", "uid-gone")
	w.minion(gone, "web01", "minion-web01", map[string]string{ownership.RetainedKey: "2026-12-01T00:00:00Z"})
	w.minion(live, "db01", "minion-db01", nil)
	w.v.ResetCalls()
	w.pass()
	w.drainSweep()
	w.now = w.now.Add(30 * 24 * time.Hour)
	w.pass()
	w.drainSweep()
	if role, ent := w.exists("web01", "minion-web01"); !role || !ent || w.v.Writes() != 0 {
		t.Fatalf("retained: role %v, entity %v, %d writes", role, ent, w.v.Writes())
	}

	conn := &v1alpha1.VaultConnection{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: "vault"}, conn); err != nil {
		t.Fatal(err)
	}
	conn.Annotations = map[string]string{v1alpha1.CollectAnnotation: "uid-gone, uid-live"}
	if err := w.c.Update(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	testkit.Drain(w.rec)
	w.pass()
	if role, ent := w.exists("web01", "minion-web01"); role || ent {
		t.Fatalf("released: role %v, entity %v left", role, ent)
	}
	if role, ent := w.exists("db01", "minion-db01"); !role || !ent {
		t.Fatal("a live binding's minion was collected by a request naming its UID")
	}
	ev := testkit.Drain(w.rec)
	if !strings.Contains(ev, "MinionCollected") || !strings.Contains(ev, "a cluster administrator asked") || !strings.Contains(ev, "CollectNothing") || !strings.Contains(ev, "uid-live") {
		t.Errorf("events: %q", ev)
	}
	// Asked once: the annotation left in place does nothing more.
	w.v.ResetCalls()
	w.pass()
	if ev := testkit.Drain(w.rec); ev != "" || w.v.Writes() != 0 {
		t.Errorf("the request again: %d writes, events %q", w.v.Writes(), ev)
	}
}

// The sweep reads nothing a live binding's status accounts for: a fleet
// with nothing lost costs its lists and no write, and the reads it makes
// are spread over the interval.
func TestSweepReadsOnlyWhatNoBindingAccountsFor(t *testing.T) {
	var objs []client.Object
	for i := range 20 {
		id := "m" + string(rune('a'+i))
		objs = append(objs, liveBinding(owner("fleet", id, "uid-"+id), id, "minion-"+id, true))
	}
	w := newWorld(t, objs...)
	for i := range 20 {
		id := "m" + string(rune('a'+i))
		w.minion(owner("fleet", id, "uid-"+id), id, "minion-"+id, nil)
	}
	// Two objects nobody accounts for: an administrator's entity and role.
	ctx := context.Background()
	if _, err := w.v.WriteEntityByName(ctx, "admin-made", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.v.WriteRole(ctx, mount, "by-hand", map[string]any{"token_policies": []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	w.v.ResetCalls()
	start := w.now
	w.pass()
	w.drainSweep()
	if reads, lists := w.v.Calls("read"), w.v.Calls("list"); reads != 2 || lists != 2 || w.v.Writes() != 0 {
		t.Errorf("one sweep: %d reads, %d lists, %d writes; want 2 reads (the two objects nobody accounts for), 2 lists, 0 writes",
			reads, lists, w.v.Writes())
	}
	// n reads are interval/(n+1) apart: the two here 3m20s.
	if spent := w.now.Sub(start); spent != 10*time.Minute/3 {
		t.Errorf("the sweep's two reads came %s apart in a 10m interval, want 3m20s: spread over it", spent)
	}
}

// The binding created again under the lost one's name (a restore) takes
// the objects back at its reconcile: the collector leaves them to it, not
// even marking them; unless it is Ready with other objects (it renders
// another entity now), when they are lost after all.
func TestBackUnderItsName(t *testing.T) {
	for _, tt := range []struct {
		name     string
		settled  bool // the binding back is Ready with another entity
		wantMark bool
	}{
		{name: "back, not reconciled yet: left to it"},
		{name: "back, Ready with another entity: lost", settled: true, wantMark: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			back := liveBinding(owner("team-a", "web01", "uid-back"), "web01", "minion-other", tt.settled)
			back.Generation = 1
			if tt.settled {
				apimeta.SetStatusCondition(&back.Status.Conditions, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue,
					Reason: v1alpha1.SucceededReason, ObservedGeneration: 1})
			}
			w := newWorld(t, back)
			w.minion(owner("team-a", "web01", "uid-gone"), "web01", "minion-web01", nil)
			w.v.ResetCalls()
			w.col.notice(lostnotice.Candidate{Vault: w.key, Connection: "vault", Mount: mount, Role: "web01", Entity: "minion-web01"})
			w.pass()
			if _, marked := ownership.LostSince(w.entityMeta("minion-web01")); marked != tt.wantMark || w.v.Writes() != map[bool]int{true: 1}[tt.wantMark] {
				t.Errorf("marked %v with %d writes, want marked %v", marked, w.v.Writes(), tt.wantMark)
			}
		})
	}
}

// A role whose entity was deleted by hand, its binding lost: its role ID
// says this cluster chose it for a binding no claimant is. It has nowhere
// to carry the mark: its window runs from when the collector found it, and
// then it is deleted. A role whose role ID names a live claimant is its.
func TestLostRoleWithoutEntity(t *testing.T) {
	claimant := owner("team-b", "db01", "uid-db")
	w := newWorld(t, liveBinding(claimant, "db01", "", false))
	ctx := context.Background()
	gone := owner("team-a", "web01", "uid-gone")
	w.minion(gone, "web01", "minion-web01", nil)
	w.minion(claimant, "db01", "minion-db01", nil)
	for _, e := range []string{"minion-web01", "minion-db01"} {
		if err := w.v.DeleteEntityByName(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	w.v.ResetCalls()
	w.pass()
	w.drainSweep()
	if role, _ := w.exists("web01", ""); !role || w.v.Writes() != 0 {
		t.Fatalf("within the window: role %v, %d writes", role, w.v.Writes())
	}
	w.now = w.now.Add(time.Hour)
	w.pass()
	if role, _ := w.exists("web01", ""); role {
		t.Error("the lost role is left after its window")
	}
	if role, _ := w.exists("db01", ""); !role {
		t.Error("a live claimant's role was collected")
	}
}

// A binding this process deleted the normal way costs no read when it
// disappears; one whose finalizer was stripped is looked at at once.
func TestDeletedBindingsLookedAtUnlessFinalizedHere(t *testing.T) {
	w := newWorld(t)
	normal := liveBinding(owner("team-a", "a", "uid-a"), "a1", "minion-a1", true)
	stripped := liveBinding(owner("team-a", "b", "uid-b"), "b1", "minion-b1", true)
	w.col.Notices.Finalized(normal.UID)
	for _, b := range []*v1alpha1.MinionBinding{normal, stripped} {
		w.col.bindingDeleted(context.Background(), event.TypedDeleteEvent[client.Object]{Object: b}, nil)
	}
	st := w.col.state(w.key)
	if len(st.pending) != 1 || st.pending[0].Entity != "minion-b1" || st.pending[0].Role != "b1" {
		t.Errorf("looked at %+v, want the stripped binding's minion only", st.pending)
	}
}

// Another writer of the same objects: a Salt master's sync_entities
// replaces a lost minion's metadata map whole, wiping the owner marker
// (and the lost mark). The role linked to the entity, whose role ID this
// cluster chose for a binding no claimant is, still proves it the lost
// minion's: it is collected when its window (from when this process found
// it so) ends, role and entity. An entity whose role Vault chose (made by
// hand or by the master) is nobody's the operator can name, and stays.
func TestAWipedMarkerStillGetsCollected(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.minion(owner("team-a", "web01", "uid-gone"), "web01", "minion-web01", nil)
	// The master's own minion: an entity linked to a role Vault chose.
	eid, err := w.v.WriteEntityByName(ctx, "minion-mm01", map[string]string{"minion-id": "mm01"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.v.WriteRole(ctx, mount, "mm01", map[string]any{"token_policies": []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	rid, _ := w.v.ReadRoleID(ctx, mount, "mm01")
	acc, _ := w.v.MountAccessor(ctx, mount)
	if _, err := w.v.CreateEntityAlias(ctx, rid, acc, eid); err != nil {
		t.Fatal(err)
	}
	if _, err := w.v.WriteEntityByName(ctx, "minion-web01", map[string]string{"minion-id": "web01"}); err != nil {
		t.Fatal(err) // sync_entities: the metadata map replaced
	}
	w.pass()
	w.drainSweep()
	if role, ent := w.exists("web01", "minion-web01"); !role || !ent {
		t.Fatalf("collected before its window: role %v, entity %v", role, ent)
	}
	w.now = w.now.Add(time.Hour)
	w.pass()
	w.drainSweep()
	if role, ent := w.exists("web01", "minion-web01"); role || ent {
		t.Errorf("a lost minion whose marker was wiped is left live: role %v, entity %v", role, ent)
	}
	if role, ent := w.exists("mm01", "minion-mm01"); !role || !ent {
		t.Errorf("the master's own minion was touched: role %v, entity %v", role, ent)
	}
}
