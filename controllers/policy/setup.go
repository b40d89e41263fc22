package policy

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
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
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
)

// statusRefreshDelay bounds how often binding deltas refresh a template's
// status: during a burst of new bindings, once a second, not once per
// binding.
const statusRefreshDelay = time.Second

// SetupWithManager registers the two controllers over one policy index.
// They are two controllers, not one with two kinds of key, so that each
// queue holds one kind and each has its own metrics: "miniontemplate"
// (templates: scans, retries and status; the name metrics and dashboards
// know) and "miniontemplate-delta" (bindings: one binding's policies).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.init()
	refreshes := make(chan event.TypedGenericEvent[string], 1024)
	r.refresh = func(template string) {
		select {
		case refreshes <- event.TypedGenericEvent[string]{Object: template}:
		default: // a refresh is pending anyway
		}
	}
	if err := r.setupScan(mgr, opts, refreshes); err != nil {
		return err
	}
	return r.setupDelta(mgr, opts)
}

// setupScan watches templates (full scans), the ConfigMaps of parameter
// stacks, VaultConnections (a Vault that changed identity is scanned
// again) and the deltas' requests for a status refresh.
func (r *Reconciler) setupScan(mgr ctrl.Manager, opts controller.Options, refreshes <-chan event.TypedGenericEvent[string]) error {
	delayed := handler.TypedFuncs[string, reconcile.Request]{
		GenericFunc: func(_ context.Context, ev event.TypedGenericEvent[string], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: ev.Object}}, statusRefreshDelay)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.MinionTemplate{}, builder.WithPredicates(watch.SpecOrRequest)).
		// Metadata only: ConfigMap data is read by name when its version
		// changes (Templates.Compile), never cached.
		WatchesMetadata(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.templatesOfConfigMap)).
		Watches(&v1alpha1.VaultConnection{}, handler.EnqueueRequestsFromMapFunc(r.templatesOfConnection),
			builder.WithPredicates(predicate.Or(watch.IdentityChanged, watch.BecameReady))).
		WatchesRawSource(r.Connections.Opened(r.templatesOfConnection)).
		WatchesRawSource(source.TypedChannel(refreshes, delayed)).
		WithOptions(opts).
		Named("miniontemplate").
		Complete(r)
}

// setupDelta watches bindings (their own key), the other claimants of a
// minion ID when the holder goes away (they render now), and namespaces
// (their labels decide which bindings render).
func (r *Reconciler) setupDelta(mgr ctrl.Manager, opts controller.Options) error {
	return builder.TypedControllerManagedBy[bindingKey](mgr).
		Watches(&v1alpha1.MinionBinding{}, handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []bindingKey {
			return []bindingKey{{Namespace: o.GetNamespace(), Name: o.GetName()}}
		}), builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, watch.DeletionStarted, holdingChanged))).
		Watches(&v1alpha1.MinionBinding{}, handler.TypedEnqueueRequestsFromMapFunc(r.otherClaimants), builder.WithPredicates(watch.ClaimReleased)).
		Watches(&corev1.Namespace{}, handler.TypedEnqueueRequestsFromMapFunc(r.bindingsInNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(controller.TypedOptions[bindingKey]{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		WithLogConstructor(func(key *bindingKey) logr.Logger {
			log := mgr.GetLogger().WithValues("controller", "miniontemplate-delta")
			if key != nil {
				log = log.WithValues("MinionBinding", klog.KRef(key.Namespace, key.Name))
			}
			return log
		}).
		Named("miniontemplate-delta").
		Complete(policyDeltaReconciler{r})
}

// otherClaimants names the other bindings of a minion ID when one starts
// being deleted or is gone: the next in line renders its policies now.
func (r *Reconciler) otherClaimants(ctx context.Context, o client.Object) []bindingKey {
	return bindingKeys(watch.OtherClaimants(ctx, r.Client, o))
}

// bindingsInNamespace names the bindings of a namespace whose labels
// changed: a template's namespaceSelector may select them now, or not.
func (r *Reconciler) bindingsInNamespace(ctx context.Context, o client.Object) []bindingKey {
	return bindingKeys(watch.BindingsOfNamespace(ctx, r.Client, o.GetName()))
}

func bindingKeys(reqs []reconcile.Request) []bindingKey {
	out := make([]bindingKey, len(reqs))
	for i, req := range reqs {
		out[i] = bindingKey(req.NamespacedName)
	}
	return out
}

func (r *Reconciler) templatesOfConnection(ctx context.Context, o client.Object) []reconcile.Request {
	names, err := watch.TemplatesBy(ctx, r.Client, watch.TemplateConnectionIndex, o.GetName())
	return watch.Mapped(ctx, templateRequests(names), err)
}

// templatesOfConfigMap wakes the templates whose parameter stack reads
// the ConfigMap.
func (r *Reconciler) templatesOfConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	names, err := watch.TemplatesBy(ctx, r.Client, watch.TemplateConfigMapIndex, watch.ObjectKey(o.GetNamespace(), o.GetName()))
	return watch.Mapped(ctx, templateRequests(names), err)
}

func templateRequests(names []string) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(names))
	for _, n := range names {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return out
}
