package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// statusRefreshDelay bounds how often binding deltas refresh a template's
// status: during a burst of new bindings, once a second, not once per
// binding.
const statusRefreshDelay = time.Second

// SetupWithManager watches templates (full scans), bindings (deltas: the
// binding's own key), the ConfigMaps of parameter stacks, namespaces (their
// labels decide which bindings render), and VaultConnections (a Vault that
// changed identity is scanned again).
func (r *MinionTemplateReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.index = newPolicyIndex()
	refreshes := make(chan event.TypedGenericEvent[string], 1024)
	r.refresh = func(template string) {
		select {
		case refreshes <- event.TypedGenericEvent[string]{Object: template}:
		default: // a refresh is pending anyway
		}
	}
	delayed := handler.TypedFuncs[string, reconcile.Request]{
		GenericFunc: func(_ context.Context, ev event.TypedGenericEvent[string], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: ev.Object}}, statusRefreshDelay)
		},
	}
	b := r.Bindings
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.MinionTemplate{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, reconcileRequested))).
		Watches(&v1alpha1.MinionBinding{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		}), builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionStarted))).
		// The other claimants of a minion ID render (or not) when the
		// holder goes away.
		Watches(&v1alpha1.MinionBinding{}, handler.EnqueueRequestsFromMapFunc(b.sameMinionID), builder.WithPredicates(claimReleased)).
		// Metadata only: ConfigMap data is read by name when its version
		// changes (Templates.Compile), never cached.
		WatchesMetadata(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.templatesOfConfigMap)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(b.bindingsInNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&v1alpha1.VaultConnection{}, handler.EnqueueRequestsFromMapFunc(r.templatesOfConnection),
			builder.WithPredicates(identityChanged)).
		WatchesRawSource(source.TypedChannel(refreshes, delayed)).
		WithOptions(opts).
		Named("miniontemplate").
		Complete(r)
}

func (r *MinionTemplateReconciler) templatesOfConnection(ctx context.Context, o client.Object) []reconcile.Request {
	names, err := templatesBy(ctx, r.Client, templateConnectionIndex, o.GetName())
	return mapped(ctx, templateRequests(names), err)
}

// templatesOfConfigMap wakes the templates whose parameter stack reads
// the ConfigMap.
func (r *MinionTemplateReconciler) templatesOfConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	names, err := templatesBy(ctx, r.Client, templateConfigMapIndex, objectKey(o.GetNamespace(), o.GetName()))
	return mapped(ctx, templateRequests(names), err)
}

func templateRequests(names []string) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(names))
	for _, n := range names {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return out
}
