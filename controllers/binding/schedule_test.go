package binding

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// readCounter counts the reads of a binding's objects by kind.
type readCounter struct {
	vault.Client
	mu                        sync.Mutex
	role, roleID, entity, all int
}

func (c *readCounter) ReadRole(ctx context.Context, mount, name string) (map[string]any, error) {
	c.count(&c.role)
	return c.Client.ReadRole(ctx, mount, name)
}

func (c *readCounter) ReadRoleID(ctx context.Context, mount, name string) (string, error) {
	c.count(&c.roleID)
	return c.Client.ReadRoleID(ctx, mount, name)
}

func (c *readCounter) ReadEntityByName(ctx context.Context, name string) (*vault.Entity, error) {
	c.count(&c.entity)
	return c.Client.ReadEntityByName(ctx, name)
}

func (c *readCounter) count(n *int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*n++
}

func (c *readCounter) take() (role, roleID, entity int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	role, roleID, entity = c.role, c.roleID, c.entity
	c.role, c.roleID, c.entity = 0, 0, 0
	return role, roleID, entity
}

// scheduleHarness is a harness with one binding (web01), a clock the test
// moves (now), a check schedule that spreads first checks to half the
// interval (newSchedule makes another: a new process) and the reads of
// the binding's objects counted.
func scheduleHarness(t *testing.T) (h *harness, reads *readCounter, now *time.Time, newSchedule func() *checkSchedule) {
	h = newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	clock := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	now = &clock
	h.r.clock = func() time.Time { return *now }
	newSchedule = func() *checkSchedule {
		s := newCheckSchedule()
		s.spread = func(d time.Duration) time.Duration { return d / 2 }
		return s
	}
	h.r.checks = newSchedule()
	reads = &readCounter{Client: h.v}
	h.r.Connections = &connection.Connections{Client: h.c, NewClient: func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return reads, nil }}
	return h, reads, now, newSchedule
}

// A binding in sync is not read from Vault until its check is due; a new
// process spreads the first checks over the interval; a change of the
// rendering reads what it writes (the entity for a metadata rollout, the
// role for a role change), and drift made between two checks is found at
// the next check, as before.
func TestChecksAreSpreadAndChangesReadWhatTheyWrite(t *testing.T) {
	h, reads, now, newSchedule := scheduleHarness(t)
	ttl := func(s string) func(*v1alpha1.MinionTemplate) {
		return func(t *v1alpha1.MinionTemplate) {
			v := intstr.FromString(s)
			t.Spec.AppRole = &v1alpha1.MinionAppRoleSpec{TokenTTL: &v}
		}
	}
	metadata := func(v string) func(*v1alpha1.MinionTemplate) {
		return func(t *v1alpha1.MinionTemplate) { t.Spec.Metadata.Entity["rollout"] = v }
	}
	type counts struct{ role, roleID, entity, writes int }
	steps := []struct {
		name   string
		before func()
		want   counts
		// requeue is the wait the reconcile asks for (0: not checked).
		requeue time.Duration
	}{
		{"a new binding", nil, counts{role: 1, entity: 1, writes: 3}, 0},
		{"in sync, its check not due: nothing read", nil, counts{}, 0},
		{"a new process: the first check half an interval away (spread)", func() { h.r.checks = newSchedule() }, counts{}, 30 * time.Minute},
		{"its check due: everything read", func() { *now = now.Add(31 * time.Minute) }, counts{role: 1, roleID: 1, entity: 1}, 0},
		{"the template changes entity metadata: the entity read and written, the role not read",
			func() { h.editTemplate(metadata("1")) }, counts{entity: 1, writes: 1}, 0},
		{"the template changes the role: the role read and written", func() { h.editTemplate(ttl("2h")) },
			counts{role: 1, roleID: 1, entity: 1, writes: 1}, 0},
		{"a new process, then a metadata rollout: status's role digest stands in for its memory, the role not read",
			func() { h.r.checks = newSchedule(); h.editTemplate(metadata("1b")) }, counts{entity: 1, writes: 1}, 0},
		{"a new process, then a role change: status's digest is another role's, the role read and written",
			func() { h.r.checks = newSchedule(); h.editTemplate(ttl("3h")) }, counts{role: 1, roleID: 1, entity: 1, writes: 1}, 0},
		{"a new process whose first check of the binding is due: status's digest does not stand in",
			func() {
				h.r.checks = newSchedule()
				h.r.checks.spread = func(time.Duration) time.Duration { return 0 }
				h.editTemplate(metadata("1c"))
			}, counts{role: 1, roleID: 1, entity: 1, writes: 1}, 0},
		{"the role deleted by hand, then a metadata rollout: the role is taken as it was",
			func() {
				if err := h.v.DeleteRole(context.Background(), "salt-minions", "web01"); err != nil {
					t.Fatal(err)
				}
				h.editTemplate(metadata("2"))
			}, counts{entity: 1, writes: 1}, 0},
		{"at the next check the role is found missing and created again", func() { *now = now.Add(2 * time.Hour) },
			counts{role: 1, entity: 1, writes: 2}, 0},
		{"the connection's Vault identity changes (a mount enabled again): checked at once", func() {
			conn := &v1alpha1.VaultConnection{}
			if err := h.c.Get(context.Background(), types.NamespacedName{Name: "vault"}, conn); err != nil {
				t.Fatal(err)
			}
			conn.Status.Identity = "remounted"
			if err := h.c.Status().Update(context.Background(), conn); err != nil {
				t.Fatal(err)
			}
		}, counts{role: 1, roleID: 1, entity: 1}, 0},
		{"and not again before the interval", nil, counts{}, 0},
		{"a forced reconcile reads everything", func() {
			h.editBinding(func(b *v1alpha1.MinionBinding) {
				b.Annotations[v1alpha1.ReconcileRequestAnnotation] = "now"
				b.Generation-- // an annotation is not the spec
			})
		}, counts{role: 1, roleID: 1, entity: 1}, 0},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		reads.take()
		h.v.ResetCalls()
		res := h.reconcile("salt", "web01")
		role, roleID, entity := reads.take()
		got := counts{role, roleID, entity, h.v.Writes()}
		if got != s.want {
			t.Errorf("%s: %+v, want %+v", s.name, got, s.want)
		}
		if s.requeue > 0 && res.RequeueAfter != s.requeue {
			t.Errorf("%s: requeued after %s, want %s", s.name, res.RequeueAfter, s.requeue)
		}
		if c := outcome.ReadyOf(h.get("salt", "web01")); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s: not Ready: %+v", s.name, c)
		}
	}
	if md := h.get("salt", "web01").Status.Entity.Metadata; md["rollout"] != "2" {
		t.Errorf("entity metadata in status %v", md)
	}
}

// A reconcile that fails drops the role's digest from status, wherever it
// failed: what the failed run did to the role is not known, so a new
// process reads the role before its rollout.
func TestAFailureDropsTheRoleDigest(t *testing.T) {
	for _, failing := range []string{"ReadEntityByName", "WriteEntityByName"} {
		t.Run(failing, func(t *testing.T) {
			h, reads, _, newSchedule := scheduleHarness(t)
			h.reconcile("salt", "web01")
			if st := h.get("salt", "web01").Status.AppRole; st == nil || st.ParamsDigest == "" {
				t.Fatalf("status.appRole after the first apply: %+v, want a paramsDigest", st)
			}
			h.editTemplate(func(t *v1alpha1.MinionTemplate) { t.Spec.Metadata.Entity["rollout"] = "1" })
			h.v.FailNext(failing, errors.New("500 internal error"))
			if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "salt", Name: "web01"}}); err == nil {
				t.Fatal("the reconcile with a failing call succeeded")
			}
			if st := h.get("salt", "web01").Status.AppRole; st == nil || st.ParamsDigest != "" {
				t.Fatalf("status.appRole after a failed apply: %+v, want no paramsDigest", st)
			}
			h.r.checks = newSchedule()
			reads.take()
			h.reconcile("salt", "web01")
			if role, _, _ := reads.take(); role != 1 {
				t.Errorf("a new process's rollout after the failure read the role %d times, want 1", role)
			}
			if st := h.get("salt", "web01").Status.AppRole; st == nil || st.ParamsDigest == "" {
				t.Errorf("status.appRole after the apply that read the role: %+v, want a paramsDigest", st)
			}
		})
	}
}

// A reconcile that waits before Vault (here on its connection's gate)
// changed nothing of the role: status keeps the digest, and a new
// process's rollout after it reads no role.
func TestAWaitKeepsTheRoleDigest(t *testing.T) {
	h, reads, _, newSchedule := scheduleHarness(t)
	h.reconcile("salt", "web01")
	ctx := context.Background()
	closed := &vault.Error{Op: "read auth/token/lookup-self", StatusCode: 403, Messages: []string{"permission denied"}}
	if err := h.r.Connections.Probe(ctx, "vault", func(vault.Client) error { return closed }); err == nil {
		t.Fatal("the failing check passed")
	}
	h.editTemplate(func(t *v1alpha1.MinionTemplate) { t.Spec.Metadata.Entity["rollout"] = "1" })
	reads.take()
	h.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "salt", Name: "web01"}})
	b := h.get("salt", "web01")
	if ready := outcome.ReadyOf(b); ready == nil || ready.Status == metav1.ConditionTrue {
		t.Fatalf("the reconcile behind a closed gate: Ready %+v", ready)
	}
	if st := b.Status.AppRole; st == nil || st.ParamsDigest == "" {
		t.Fatalf("status.appRole after a wait: %+v, want the paramsDigest kept", st)
	}
	if err := h.r.Connections.Probe(ctx, "vault", func(vc vault.Client) error { return vc.CheckToken(ctx) }); err != nil {
		t.Fatal(err)
	}
	h.r.checks = newSchedule()
	reads.take()
	h.reconcile("salt", "web01")
	if role, _, _ := reads.take(); role != 0 {
		t.Errorf("a new process's rollout after a wait read the role %d times, want 0", role)
	}
}

// Only a binding that status says is in sync for what it renders now, with
// nothing asked of the operator, waits for its check.
func TestInSync(t *testing.T) {
	cur := ownership.Placement{Vault: "v", Connection: "vault", Mount: "salt-minions", Entity: "salt_minion_web01", DeletionPolicy: "Delete"}
	stale := cur
	stale.Mount = "old"
	base := func() *v1alpha1.MinionBinding {
		b := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Generation: 3, Annotations: map[string]string{}}}
		controllerutil.AddFinalizer(b, v1alpha1.Finalizer)
		b.Status = v1alpha1.MinionBindingStatus{ObservedGeneration: 3, LastAppliedHash: "h", Conditions: []metav1.Condition{{
			Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.SucceededReason, ObservedGeneration: 3}}}
		return b
	}
	tests := []struct {
		name string
		edit func(b *v1alpha1.MinionBinding)
		inv  ownership.Inventory
		want bool
	}{
		{"in sync", nil, ownership.Inventory{cur}, true},
		{"the spec changed", func(b *v1alpha1.MinionBinding) { b.Generation++ }, ownership.Inventory{cur}, false},
		{"the rendering changed", func(b *v1alpha1.MinionBinding) { b.Status.LastAppliedHash = "old" }, ownership.Inventory{cur}, false},
		{"a reconcile requested", func(b *v1alpha1.MinionBinding) { b.Annotations[v1alpha1.ReconcileRequestAnnotation] = "now" }, ownership.Inventory{cur}, false},
		{"a reconcile request handled", func(b *v1alpha1.MinionBinding) {
			b.Annotations[v1alpha1.ReconcileRequestAnnotation], b.Status.LastHandledReconcileAt = "now", "now"
		}, ownership.Inventory{cur}, true},
		{"a handled request's annotation removed", func(b *v1alpha1.MinionBinding) { b.Status.LastHandledReconcileAt = "now" }, ownership.Inventory{cur}, true},
		{"drift detected (detect-only)", func(b *v1alpha1.MinionBinding) { b.Status.Conditions[0].Reason = "DriftDetected" }, ownership.Inventory{cur}, false},
		{"not Ready", func(b *v1alpha1.MinionBinding) { b.Status.Conditions[0].Status = metav1.ConditionFalse }, ownership.Inventory{cur}, false},
		{"Ready for an older spec", func(b *v1alpha1.MinionBinding) { b.Status.Conditions[0].ObservedGeneration = 2 }, ownership.Inventory{cur}, false},
		{"no finalizer", func(b *v1alpha1.MinionBinding) { b.Finalizers = nil }, ownership.Inventory{cur}, false},
		{"the record lost the placement", nil, ownership.Inventory{}, false},
		{"a stale placement to remove", nil, ownership.Inventory{cur, stale}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := base()
			if tc.edit != nil {
				tc.edit(b)
			}
			if got := inSync(b, "h", tc.inv, cur); got != tc.want {
				t.Errorf("inSync %v, want %v", got, tc.want)
			}
		})
	}
}

// A new process's first checks are spread evenly over the interval.
func TestFirstChecksAreSpread(t *testing.T) {
	s := newCheckSchedule()
	now := time.Now()
	const n, buckets = 10000, 10
	var counts [buckets]int
	for i := range n {
		at := s.next(types.NamespacedName{Name: string(rune('a' + i%26)), Namespace: time.Duration(i).String()}, "uid", "", now, time.Hour)
		d := at.Sub(now)
		if d < 0 || d >= time.Hour {
			t.Fatalf("first check %s after the start, outside the interval", d)
		}
		counts[int(d*buckets/time.Hour)]++
	}
	for i, c := range counts {
		// n/buckets = 1,000 each; a binomial's deviation is about 30.
		if c < 850 || c > 1150 {
			t.Errorf("%d of %d first checks in tenth %d of the interval: %v", c, n, i, counts)
		}
	}
}

// The role's fingerprint (status.appRole.paramsDigest) names one role in
// one Vault: a binding whose spec names another minion (a tenant's edit),
// another mount, another Vault or a mount enabled again since does not
// match it, so its role is read before anything is written for it.
func TestRoleFingerprint(t *testing.T) {
	res := func(edit func(*render.Result)) *render.Result {
		r := &render.Result{AppRole: render.AppRolePayload{Mount: "salt-minions", RoleName: "web01", Params: []render.Param{{Name: "token_ttl", Value: int64(3600)}}}}
		if edit != nil {
			edit(r)
		}
		return r
	}
	base := roleFingerprint("vault-a", "id-1", res(nil))
	tests := []struct {
		name            string
		vault, identity string
		res             *render.Result
		same            bool
	}{
		{"the same rendering", "vault-a", "id-1", res(nil), true},
		{"another minion's role", "vault-a", "id-1", res(func(r *render.Result) { r.AppRole.RoleName = "db01" }), false},
		{"another mount", "vault-a", "id-1", res(func(r *render.Result) { r.AppRole.Mount = "other" }), false},
		{"another parameter", "vault-a", "id-1", res(func(r *render.Result) { r.AppRole.Params[0].Value = int64(7200) }), false},
		{"another Vault", "vault-b", "id-1", res(nil), false},
		{"a mount enabled again (the connection's identity)", "vault-a", "id-2", res(nil), false},
	}
	for _, tc := range tests {
		if got := roleFingerprint(tc.vault, tc.identity, tc.res) == base; got != tc.same {
			t.Errorf("%s: same fingerprint %v, want %v", tc.name, got, tc.same)
		}
	}
}

// A binding reconciled before its connection's first check (no Vault
// identity in status yet) is checked again once the identity is known
// (the connection turning Ready wakes it), and its status digest then
// carries the identity: a new process's rollout reads no role.
func TestAnIdentityLearnedLaterIsInTheDigest(t *testing.T) {
	h, reads, _, newSchedule := scheduleHarness(t)
	h.reconcile("salt", "web01") // the connection not checked yet
	ctx := context.Background()
	conn := &v1alpha1.VaultConnection{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "vault"}, conn); err != nil {
		t.Fatal(err)
	}
	conn.Status.Identity = "checked"
	if err := h.c.Status().Update(ctx, conn); err != nil {
		t.Fatal(err)
	}
	reads.take()
	h.reconcile("salt", "web01") // woken by the connection's first check
	if role, _, _ := reads.take(); role != 1 {
		t.Errorf("the reconcile after the identity was learned read the role %d times, want 1 (a check)", role)
	}
	h.r.checks = newSchedule()
	h.editTemplate(func(t *v1alpha1.MinionTemplate) { t.Spec.Metadata.Entity["rollout"] = "1" })
	h.reconcile("salt", "web01")
	if role, _, _ := reads.take(); role != 0 {
		t.Errorf("a new process's rollout read the role %d times, want 0", role)
	}
}

// TestWhyCompare: the debug log's reason for comparing a binding with
// Vault names the fact that let it through: status, rendering, record,
// schedule, or the connection's Vault identity.
func TestWhyCompare(t *testing.T) {
	now := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	cur := ownership.Placement{Vault: "v", Connection: "c", Mount: "salt-minions", Entity: "salt_minion_web01"}
	settled := func() *v1alpha1.MinionBinding {
		b := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "web01", UID: "u1", Generation: 2}}
		controllerutil.AddFinalizer(b, v1alpha1.Finalizer)
		b.Status.ObservedGeneration, b.Status.LastAppliedHash = 2, "h"
		b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.SucceededReason, ObservedGeneration: 2}}
		return b
	}
	sk := scheduleKey{key: types.NamespacedName{Namespace: "salt", Name: "web01"}, uid: "u1", identity: "id1", interval: time.Hour}
	r := &Reconciler{checks: newCheckSchedule(), clock: func() time.Time { return now }}
	inv := ownership.Inventory{cur}

	notReady := settled()
	notReady.Status.Conditions[0].Status = metav1.ConditionFalse
	tests := []struct {
		name string
		obj  *v1alpha1.MinionBinding
		hash string
		inv  ownership.Inventory
		want string
	}{
		{"not Ready", notReady, "h", inv, "status is not Ready"},
		{"a new rendering", settled(), "h2", inv, "the rendering differs"},
		{"no record", settled(), "h", nil, "the placement is not recorded"},
		{"stale placement", settled(), "h", ownership.Inventory{cur, {Vault: "v", Connection: "c", Mount: "old", Entity: "e"}}, "stale placements"},
		{"not scheduled", settled(), "h", inv, "not scheduled"},
	}
	for _, tc := range tests {
		if got := r.whyCompare(tc.obj, sk, tc.hash, tc.inv, cur); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	r.checks.checked(sk.key, sk.uid, "id0", now.Add(time.Minute), knownRole{})
	if got := r.whyCompare(settled(), sk, "h", inv, cur); got != "the connection's Vault identity changed from id0 to id1" {
		t.Errorf("identity: %q", got)
	}
	r.checks.checked(sk.key, sk.uid, "id1", now.Add(-time.Minute), knownRole{})
	if got := r.whyCompare(settled(), sk, "h", inv, cur); !strings.HasPrefix(got, "its drift check is due") {
		t.Errorf("due: %q", got)
	}
}
