package watch

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// ReconcileRequested passes an object whose reconcile.minionvault.dev/requestedAt
// annotation changed (flux reconcile style). Other annotation changes do not
// wake it: the operator writes its own ownership record as an annotation,
// and reacting to that would reconcile every new binding twice.
var ReconcileRequested = onUpdate(func(ev event.UpdateEvent) bool {
	return ev.ObjectNew.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation] !=
		ev.ObjectOld.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]
})

// SpecOrRequest passes what asks a controller for its object: its
// creation and deletion, a new generation, a reconcile request. Not the
// operator's own writes of status or of its record: each would reconcile
// again right after the reconcile it records (for a connection, a second
// check of Vault that races its bindings' first requests).
var SpecOrRequest = predicate.Or(predicate.GenerationChangedPredicate{}, ReconcileRequested)

// RecordRepaired passes a binding whose record of its Vault objects
// (VaultObjectsAnnotation) changed to or from one that cannot be read: a
// binding stalled by a broken record recovers as soon as it is mended or
// removed, and one broken by hand says so at once. The operator never
// writes a broken record, so its own record updates do not pass.
var RecordRepaired = onUpdate(func(ev event.UpdateEvent) bool {
	before := ev.ObjectOld.GetAnnotations()[v1alpha1.VaultObjectsAnnotation]
	after := ev.ObjectNew.GetAnnotations()[v1alpha1.VaultObjectsAnnotation]
	if before == after {
		return false
	}
	_, errBefore := ownership.Decode(before)
	_, errAfter := ownership.Decode(after)
	return errBefore != nil || errAfter != nil
})

// ClaimReleased passes a binding that starts being deleted, or is gone.
var ClaimReleased = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	UpdateFunc:  DeletionStarted.UpdateFunc,
}

// HoldsChanged passes a binding that starts or stops holding its minion
// ID (admission.Holds: the operator recorded its role in status). The
// claim order of the other claimants changed: one that Vault's state
// refused meanwhile (the holder's marker read before its status was
// written) is told by the claim order now, not at its next retry.
var HoldsChanged = BindingFlipped(admission.Holds)

// BindingFlipped passes an update of a binding that changes what is says
// of it.
func BindingFlipped(is func(*v1alpha1.MinionBinding) bool) predicate.Funcs {
	return onUpdate(func(ev event.UpdateEvent) bool {
		o, ok1 := ev.ObjectOld.(*v1alpha1.MinionBinding)
		n, ok2 := ev.ObjectNew.(*v1alpha1.MinionBinding)
		return ok1 && ok2 && is(o) != is(n)
	})
}

// onUpdate passes the updates f passes, and no create, delete or generic
// event (predicate.Funcs passes what it has no func for).
func onUpdate(f func(event.UpdateEvent) bool) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  f,
	}
}

// DeletionStarted passes an object whose deletion timestamp was just set.
var DeletionStarted = onUpdate(func(ev event.UpdateEvent) bool {
	return !ev.ObjectNew.GetDeletionTimestamp().IsZero() && ev.ObjectOld.GetDeletionTimestamp().IsZero()
})

// IdentityChanged passes a VaultConnection whose Vault changed identity
// (re-initialised, restored, an AppRole mount re-created): everything
// written there must be checked now, not at the next interval.
var IdentityChanged = onUpdate(func(ev event.UpdateEvent) bool {
	o, ok1 := ev.ObjectOld.(*v1alpha1.VaultConnection)
	n, ok2 := ev.ObjectNew.(*v1alpha1.VaultConnection)
	return ok1 && ok2 && o.Status.Identity != "" && n.Status.Identity != "" && o.Status.Identity != n.Status.Identity
})

// BecameReady passes a VaultConnection whose Ready condition turned True:
// its bindings stop backing off and converge as soon as Vault is back.
var BecameReady = onUpdate(func(ev event.UpdateEvent) bool {
	return ConnectionReady(ev.ObjectNew) && !ConnectionReady(ev.ObjectOld)
})

func ConnectionReady(o client.Object) bool {
	c, ok := o.(*v1alpha1.VaultConnection)
	return ok && apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ReadyCondition)
}
