package controllers

import (
	"context"

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
)

// Field indexes.
const (
	minionIDIndex    = "spec.minionID.lower"
	templateRefIndex = "spec.templateRef.name"
)

// SetupIndexes registers the field indexes the reconcilers query.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.MinionBinding{}, minionIDIndex, func(o client.Object) []string {
		return []string{minionIDKey(o.(*v1alpha1.MinionBinding).Spec.MinionID)}
	}); err != nil {
		return err
	}
	return idx.IndexField(ctx, &v1alpha1.MinionBinding{}, templateRefIndex, func(o client.Object) []string {
		return []string{o.(*v1alpha1.MinionBinding).Spec.TemplateRef.Name}
	})
}

// SetupWithManager watches bindings, and re-queues them when their
// template, their connection or its Secrets, their namespace, or a binding
// claiming the same minion ID changes.
func (r *MinionBindingReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.MinionBinding{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, reconcileRequested))).
		Watches(&v1alpha1.MinionTemplate{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfTemplate),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.VaultConnection{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfConnection),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, becameReady, identityChanged))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfSecret)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfConfigMap)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.bindingsInNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&v1alpha1.MinionBinding{}, handler.EnqueueRequestsFromMapFunc(r.sameMinionID),
			builder.WithPredicates(claimReleased)).
		WithOptions(opts).
		Named("minionbinding").
		Complete(r)
}

func (r *MinionBindingReconciler) bindingsOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1alpha1.MinionBindingList{}
	if err := r.List(ctx, list, client.MatchingFields{templateRefIndex: o.GetName()}); err != nil {
		return nil
	}
	return requests(list)
}

// bindingsOfConnection wakes the bindings that use a connection (through
// their template, or, when being deleted, the one they wrote through), so
// a fixed address or credential is picked up without waiting for backoff.
func (r *MinionBindingReconciler) bindingsOfConnection(ctx context.Context, o client.Object) []reconcile.Request {
	templates := &v1alpha1.MinionTemplateList{}
	if err := r.List(ctx, templates); err != nil {
		return nil
	}
	uses := map[string]bool{}
	for _, t := range templates.Items {
		if t.Spec.ConnectionRef.Name == o.GetName() {
			uses[t.Name] = true
		}
	}
	list := &v1alpha1.MinionBindingList{}
	if err := r.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, b := range list.Items {
		if uses[b.Spec.TemplateRef.Name] || b.Status.Connection == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
		}
	}
	return out
}

// bindingsOfSecret wakes the bindings of every connection that reads the
// Secret: a rotated token or secret ID ends an AccessDenied backoff at once.
func (r *MinionBindingReconciler) bindingsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	conns := &v1alpha1.VaultConnectionList{}
	if err := r.List(ctx, conns); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range conns.Items {
		if usesSecret(&conns.Items[i], o.GetNamespace(), o.GetName()) {
			out = append(out, r.bindingsOfConnection(ctx, &conns.Items[i])...)
		}
	}
	return out
}

// bindingsOfConfigMap wakes the bindings of the templates whose parameter
// stack reads the ConfigMap: a fixed parameter file ends a RenderFailed.
func (r *MinionBindingReconciler) bindingsOfConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, tpl := range templatesUsingConfigMap(ctx, r.Client, o) {
		list := &v1alpha1.MinionBindingList{}
		if err := r.List(ctx, list, client.MatchingFields{templateRefIndex: tpl}); err != nil {
			return nil
		}
		out = append(out, requests(list)...)
	}
	return out
}

// templatesUsingConfigMap names the templates whose parameters.configMapRefs
// include the ConfigMap.
func templatesUsingConfigMap(ctx context.Context, c client.Reader, cm client.Object) []string {
	list := &v1alpha1.MinionTemplateList{}
	if err := c.List(ctx, list); err != nil {
		return nil
	}
	var out []string
	for _, t := range list.Items {
		if p := t.Spec.Parameters; p != nil {
			for _, ref := range p.ConfigMapRefs {
				if ref.Namespace == cm.GetNamespace() && ref.Name == cm.GetName() {
					out = append(out, t.Name)
					break
				}
			}
		}
	}
	return out
}

func (r *MinionBindingReconciler) bindingsInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1alpha1.MinionBindingList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetName())); err != nil {
		return nil
	}
	return requests(list)
}

// sameMinionID wakes the other claimants of a minion ID when one starts
// being deleted (they now wait for it) and when it is gone (the next in
// line takes the ID over).
func (r *MinionBindingReconciler) sameMinionID(ctx context.Context, o client.Object) []reconcile.Request {
	b := o.(*v1alpha1.MinionBinding)
	list := &v1alpha1.MinionBindingList{}
	if err := r.List(ctx, list, client.MatchingFields{minionIDIndex: minionIDKey(b.Spec.MinionID)}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, req := range requests(list) {
		if req.NamespacedName != (types.NamespacedName{Namespace: b.Namespace, Name: b.Name}) {
			out = append(out, req)
		}
	}
	return out
}

func requests(list *v1alpha1.MinionBindingList) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, b := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
	}
	return out
}

// reconcileRequested passes an object whose reconcile.minionvault.dev/requestedAt
// annotation changed (flux reconcile style). Other annotation changes do not
// wake it: the operator writes its own ownership record as an annotation,
// and reacting to that would reconcile every new binding twice.
var reconcileRequested = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		return ev.ObjectNew.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation] !=
			ev.ObjectOld.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]
	},
}

// claimReleased passes a binding that starts being deleted, or is gone.
var claimReleased = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	UpdateFunc:  deletionStarted.UpdateFunc,
}

// deletionStarted passes an object whose deletion timestamp was just set.
var deletionStarted = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		return !ev.ObjectNew.GetDeletionTimestamp().IsZero() && ev.ObjectOld.GetDeletionTimestamp().IsZero()
	},
}

// identityChanged passes a VaultConnection whose Vault changed identity
// (re-initialised, restored, an AppRole mount re-created): everything
// written there must be checked now, not at the next interval.
var identityChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		o, ok1 := ev.ObjectOld.(*v1alpha1.VaultConnection)
		n, ok2 := ev.ObjectNew.(*v1alpha1.VaultConnection)
		return ok1 && ok2 && o.Status.Identity != "" && n.Status.Identity != "" && o.Status.Identity != n.Status.Identity
	},
}

// becameReady passes a VaultConnection whose Ready condition turned True:
// its bindings stop backing off and converge as soon as Vault is back.
var becameReady = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		return connectionReady(ev.ObjectNew) && !connectionReady(ev.ObjectOld)
	},
}

func connectionReady(o client.Object) bool {
	c, ok := o.(*v1alpha1.VaultConnection)
	return ok && apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ReadyCondition)
}
