package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// SetupWithManager watches bindings, and re-queues them when their
// template, their connection or its Secrets, their namespace, or a binding
// claiming the same minion ID changes.
func (r *MinionBindingReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.MinionBinding{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, ReconcileRequested, RecordRepaired))).
		Watches(&v1alpha1.MinionTemplate{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfTemplate),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.VaultConnection{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfConnection),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, BecameReady, IdentityChanged))).
		// Metadata only: the operator holds no Secret or ConfigMap data
		// in its cache; it reads data by name when a version changes.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfSecret)).
		WatchesMetadata(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfConfigMap)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.bindingsInNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&v1alpha1.MinionBinding{}, handler.EnqueueRequestsFromMapFunc(r.sameMinionID),
			builder.WithPredicates(ClaimReleased)).
		WithOptions(opts).
		Named("minionbinding").
		Complete(r)
}

func (r *MinionBindingReconciler) bindingsOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	reqs, err := BindingsOfTemplates(ctx, r.Client, []string{o.GetName()})
	return Mapped(ctx, reqs, err)
}

// bindingsOfConnection wakes the bindings that use a connection (through
// their template, or, when being deleted or switched, the one they wrote
// through), so a fixed address or credential is picked up without waiting
// for backoff.
func (r *MinionBindingReconciler) bindingsOfConnection(ctx context.Context, o client.Object) []reconcile.Request {
	reqs, err := r.connectionBindings(ctx, o.GetName())
	return Mapped(ctx, reqs, err)
}

func (r *MinionBindingReconciler) connectionBindings(ctx context.Context, conn string) ([]reconcile.Request, error) {
	out, err := BindingsBy(ctx, r.Client, BindingConnectionIndex, conn)
	if err != nil {
		return nil, err
	}
	templates, err := TemplatesBy(ctx, r.Client, TemplateConnectionIndex, conn)
	if err != nil {
		return nil, err
	}
	reqs, err := BindingsOfTemplates(ctx, r.Client, templates)
	return UniqueRequests(append(out, reqs...)), err
}

// bindingsOfSecret wakes the bindings of every connection that reads the
// Secret: a rotated token or secret ID ends an AccessDenied backoff at once.
func (r *MinionBindingReconciler) bindingsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	conns, err := ConnectionsBy(ctx, r.Client, ConnectionSecretIndex, ObjectKey(o.GetNamespace(), o.GetName()))
	if err != nil {
		return Mapped(ctx, nil, err)
	}
	var out []reconcile.Request
	for _, conn := range conns {
		reqs, err := r.connectionBindings(ctx, conn)
		if err != nil {
			return Mapped(ctx, nil, err)
		}
		out = append(out, reqs...)
	}
	return UniqueRequests(out)
}

// bindingsOfConfigMap wakes the bindings of the templates whose parameter
// stack reads the ConfigMap: a fixed parameter file ends a RenderFailed.
func (r *MinionBindingReconciler) bindingsOfConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	templates, err := TemplatesBy(ctx, r.Client, TemplateConfigMapIndex, ObjectKey(o.GetNamespace(), o.GetName()))
	if err != nil {
		return Mapped(ctx, nil, err)
	}
	reqs, err := BindingsOfTemplates(ctx, r.Client, templates)
	return Mapped(ctx, reqs, err)
}

// Mapped returns a map function's requests, or logs why it has none: a
// map function cannot return an error, and a silent nil would hide a
// missing index as "nothing depends on this".
func Mapped(ctx context.Context, reqs []reconcile.Request, err error) []reconcile.Request {
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Finding the objects to wake")
		return nil
	}
	return reqs
}

func (r *MinionBindingReconciler) bindingsInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return BindingsOfNamespace(ctx, r.Client, o.GetName())
}

// sameMinionID wakes the other claimants of a minion ID when one starts
// being deleted (they now wait for it) and when it is gone (the next in
// line takes the ID over).
func (r *MinionBindingReconciler) sameMinionID(ctx context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*v1alpha1.MinionBinding)
	if !ok {
		return nil
	}
	list := &v1alpha1.MinionBindingList{}
	if err := r.List(ctx, list, client.MatchingFields{MinionIDIndex: MinionIDKey(b.Spec.MinionID)}, client.UnsafeDisableDeepCopy); err != nil {
		return Mapped(ctx, nil, fmt.Errorf("listing the claimants of minion ID %q: %w", b.Spec.MinionID, err))
	}
	var out []reconcile.Request
	for _, req := range Requests(list) {
		if req.NamespacedName != (types.NamespacedName{Namespace: b.Namespace, Name: b.Name}) {
			out = append(out, req)
		}
	}
	return out
}

func Requests(list *v1alpha1.MinionBindingList) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, b := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
	}
	return out
}

// ReconcileRequested passes an object whose reconcile.minionvault.dev/requestedAt
// annotation changed (flux reconcile style). Other annotation changes do not
// wake it: the operator writes its own ownership record as an annotation,
// and reacting to that would reconcile every new binding twice.
var ReconcileRequested = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		return ev.ObjectNew.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation] !=
			ev.ObjectOld.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]
	},
}

// RecordRepaired passes a binding whose record of its Vault objects
// (VaultObjectsAnnotation) changed to or from one that cannot be read: a
// binding stalled by a broken record recovers as soon as it is mended or
// removed, and one broken by hand says so at once. The operator never
// writes a broken record, so its own record updates do not pass.
var RecordRepaired = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		before := ev.ObjectOld.GetAnnotations()[v1alpha1.VaultObjectsAnnotation]
		after := ev.ObjectNew.GetAnnotations()[v1alpha1.VaultObjectsAnnotation]
		if before == after {
			return false
		}
		_, errBefore := ownership.Decode(before)
		_, errAfter := ownership.Decode(after)
		return errBefore != nil || errAfter != nil
	},
}

// ClaimReleased passes a binding that starts being deleted, or is gone.
var ClaimReleased = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	UpdateFunc:  DeletionStarted.UpdateFunc,
}

// DeletionStarted passes an object whose deletion timestamp was just set.
var DeletionStarted = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		return !ev.ObjectNew.GetDeletionTimestamp().IsZero() && ev.ObjectOld.GetDeletionTimestamp().IsZero()
	},
}

// IdentityChanged passes a VaultConnection whose Vault changed identity
// (re-initialised, restored, an AppRole mount re-created): everything
// written there must be checked now, not at the next interval.
var IdentityChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		o, ok1 := ev.ObjectOld.(*v1alpha1.VaultConnection)
		n, ok2 := ev.ObjectNew.(*v1alpha1.VaultConnection)
		return ok1 && ok2 && o.Status.Identity != "" && n.Status.Identity != "" && o.Status.Identity != n.Status.Identity
	},
}

// BecameReady passes a VaultConnection whose Ready condition turned True:
// its bindings stop backing off and converge as soon as Vault is back.
var BecameReady = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		return ConnectionReady(ev.ObjectNew) && !ConnectionReady(ev.ObjectOld)
	},
}

func ConnectionReady(o client.Object) bool {
	c, ok := o.(*v1alpha1.VaultConnection)
	return ok && apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ReadyCondition)
}
