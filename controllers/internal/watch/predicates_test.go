package watch

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// The events that wake a binding or a template, and those that must not:
// the operator's own annotation and status writes would otherwise
// reconcile every new binding twice.
func TestPredicates(t *testing.T) {
	now := metav1.Now()
	binding := func(gen int64, ann map[string]string, deleting bool) *v1alpha1.MinionBinding {
		b := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: gen, Annotations: ann}}
		if deleting {
			b.DeletionTimestamp = &now
		}
		return b
	}
	conn := func(identity string, ready bool) *v1alpha1.VaultConnection {
		c := &v1alpha1.VaultConnection{}
		c.Status.Identity = identity
		if ready {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue}}
		}
		return c
	}
	holding := func(b *v1alpha1.MinionBinding, roleID string) *v1alpha1.MinionBinding {
		b.Status.AppRole = &v1alpha1.AppRoleStatus{Mount: "salt-minions", Name: "b", RoleID: roleID}
		return b
	}
	forBinding := predicate.Or(SpecOrRequest, RecordRepaired)
	connAt := func(gen int64, ann map[string]string, ready bool) *v1alpha1.VaultConnection {
		c := conn("a", ready)
		c.Generation, c.Annotations = gen, ann
		return c
	}
	owned := map[string]string{v1alpha1.VaultObjectsAnnotation: `[{"vault":"v","connection":"c","mount":"salt-minions","entity":"e"}]`}
	moved := map[string]string{v1alpha1.VaultObjectsAnnotation: `[{"vault":"v","connection":"c","mount":"salt-minions-b","entity":"e"}]`}
	broken := map[string]string{v1alpha1.VaultObjectsAnnotation: `[{"vault":"v","connection":"c","mount":"salt-minions","entity":".."}]`}
	asked := map[string]string{v1alpha1.ReconcileRequestAnnotation: "2026-12-03T00:00:00Z"}
	for _, tc := range []struct {
		name string
		p    predicate.Predicate
		old  client.Object
		new  client.Object
		want bool
	}{
		{"spec changed", forBinding, binding(1, nil, false), binding(2, nil, false), true},
		{"own ownership record written", forBinding, binding(1, nil, false), binding(1, owned, false), false},
		{"own ownership record rewritten", forBinding, binding(1, owned, false), binding(1, moved, false), false},
		{"a broken record removed", forBinding, binding(1, broken, false), binding(1, nil, false), true},
		{"a broken record mended", forBinding, binding(1, broken, false), binding(1, owned, false), true},
		{"a record broken by hand", forBinding, binding(1, owned, false), binding(1, broken, false), true},
		{"status or metadata only", forBinding, binding(1, owned, false), binding(1, owned, false), false},
		{"reconcile requested", forBinding, binding(1, owned, false), binding(1, asked, false), true},
		{"reconcile requested again, same value", forBinding, binding(1, asked, false), binding(1, asked, false), false},
		{"deletion starts", ClaimReleased, binding(1, nil, false), binding(1, nil, true), true},
		{"deleting, finalizer still there", ClaimReleased, binding(1, nil, true), binding(1, owned, true), false},
		{"starts holding its minion ID", HoldsChanged, binding(1, nil, false), holding(binding(1, owned, false), "r1"), true},
		{"stops holding its minion ID", HoldsChanged, holding(binding(1, owned, false), "r1"), binding(1, owned, false), true},
		{"holds it still, its role ID changed", HoldsChanged, holding(binding(1, owned, false), "r1"), holding(binding(1, owned, false), "r2"), false},
		{"a role recorded without its role ID", HoldsChanged, binding(1, nil, false), holding(binding(1, nil, false), ""), false},
		{"identity changed", IdentityChanged, conn("a", true), conn("b", true), true},
		{"identity first known", IdentityChanged, conn("", true), conn("b", true), false},
		{"identity same", IdentityChanged, conn("a", true), conn("a", true), false},
		{"connection became ready", BecameReady, conn("a", false), conn("a", true), true},
		// A connection is checked when asked, not for its own status.
		{"the connection's check written to status", SpecOrRequest, connAt(1, nil, false), connAt(1, nil, true), false},
		{"the connection's status back to not ready", SpecOrRequest, connAt(1, nil, true), connAt(1, nil, false), false},
		{"the connection edited", SpecOrRequest, connAt(1, nil, true), connAt(2, nil, true), true},
		{"a check of the connection requested", SpecOrRequest, connAt(1, nil, true), connAt(1, asked, true), true},
		{"another annotation on the connection", SpecOrRequest, connAt(1, nil, true), connAt(1, map[string]string{"note": "x"}, true), false},
		{"connection stayed ready", BecameReady, conn("a", true), conn("a", true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
	if !SpecOrRequest.Create(event.CreateEvent{Object: connAt(1, nil, false)}) || !SpecOrRequest.Delete(event.DeleteEvent{Object: connAt(1, nil, true)}) {
		t.Error("a new or deleted object is not reconciled")
	}
	if !ClaimReleased.Delete(event.DeleteEvent{Object: binding(1, nil, true)}) {
		t.Error("a binding that is gone releases its minion ID")
	}
	if ClaimReleased.Create(event.CreateEvent{Object: binding(1, nil, false)}) {
		t.Error("a new binding releases nothing")
	}
	if HoldsChanged.Create(event.CreateEvent{Object: holding(binding(1, nil, false), "r1")}) {
		t.Error("a binding listed by a new process changes no claim order")
	}
	// The update predicates pass no other event: predicate.Funcs passes
	// any it has no func for.
	for name, p := range map[string]predicate.Funcs{"ReconcileRequested": ReconcileRequested, "RecordRepaired": RecordRepaired,
		"HoldsChanged": HoldsChanged, "DeletionStarted": DeletionStarted, "IdentityChanged": IdentityChanged, "BecameReady": BecameReady} {
		b := binding(1, asked, true)
		if p.Create(event.CreateEvent{Object: b}) || p.Delete(event.DeleteEvent{Object: b}) || p.Generic(event.GenericEvent{Object: b}) {
			t.Errorf("%s passes a create, delete or generic event", name)
		}
	}
}
