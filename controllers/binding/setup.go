package binding

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
)

// SetupWithManager watches bindings, and re-queues them when their
// template, their connection or its Secrets, their namespace, or a binding
// claiming the same minion ID changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.checks = newCheckSchedule()
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Lost != nil {
		// The collector marked or collected a lost minion: its claimants
		// learn the window's end, or create the minion afresh.
		b = b.WatchesRawSource(r.Lost.Claimants(r.Client))
	}
	return b.
		For(&v1alpha1.MinionBinding{}, builder.WithPredicates(predicate.Or(watch.SpecOrRequest, watch.RecordRepaired))).
		Watches(&v1alpha1.MinionTemplate{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfTemplate),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.VaultConnection{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfConnection),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, watch.BecameReady, watch.IdentityChanged))).
		WatchesRawSource(r.Connections.Opened(r.bindingsOfConnection)).
		// Metadata only: the operator holds no Secret or ConfigMap data
		// in its cache; it reads data by name when a version changes.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfSecret)).
		WatchesMetadata(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfConfigMap)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.bindingsInNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&v1alpha1.MinionBinding{}, handler.EnqueueRequestsFromMapFunc(r.otherClaimants),
			builder.WithPredicates(predicate.Or(watch.ClaimReleased, watch.HoldsChanged))).
		Watches(&v1alpha1.MinionBinding{}, changedFirst{}).
		WithOptions(opts).
		Named("minionbinding").
		Complete(r)
}

func (r *Reconciler) bindingsOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	reqs, err := watch.BindingsOfTemplates(ctx, r.Client, []string{o.GetName()})
	return watch.Mapped(ctx, reqs, err)
}

// bindingsOfConnection wakes the bindings that use a connection (through
// their template, or, when being deleted or switched, the one they wrote
// through), so a fixed address or credential is picked up without waiting
// for backoff.
func (r *Reconciler) bindingsOfConnection(ctx context.Context, o client.Object) []reconcile.Request {
	reqs, err := r.connectionBindings(ctx, o.GetName())
	return watch.Mapped(ctx, reqs, err)
}

func (r *Reconciler) connectionBindings(ctx context.Context, conn string) ([]reconcile.Request, error) {
	out, err := watch.BindingsBy(ctx, r.Client, watch.BindingConnectionIndex, conn)
	if err != nil {
		return nil, err
	}
	templates, err := watch.TemplatesBy(ctx, r.Client, watch.TemplateConnectionIndex, conn)
	if err != nil {
		return nil, err
	}
	reqs, err := watch.BindingsOfTemplates(ctx, r.Client, templates)
	return watch.UniqueRequests(append(out, reqs...)), err
}

// bindingsOfSecret wakes the bindings of every connection that reads the
// Secret: a rotated token or secret ID ends an AccessDenied backoff at once.
func (r *Reconciler) bindingsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	conns, err := watch.ConnectionsBy(ctx, r.Client, watch.ConnectionSecretIndex, watch.ObjectKey(o.GetNamespace(), o.GetName()))
	if err != nil {
		return watch.Mapped(ctx, nil, err)
	}
	var out []reconcile.Request
	for _, conn := range conns {
		reqs, err := r.connectionBindings(ctx, conn)
		if err != nil {
			return watch.Mapped(ctx, nil, err)
		}
		out = append(out, reqs...)
	}
	return watch.UniqueRequests(out)
}

// bindingsOfConfigMap wakes the bindings of the templates whose parameter
// stack reads the ConfigMap: a fixed parameter file ends a RenderFailed.
func (r *Reconciler) bindingsOfConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	templates, err := watch.TemplatesBy(ctx, r.Client, watch.TemplateConfigMapIndex, watch.ObjectKey(o.GetNamespace(), o.GetName()))
	if err != nil {
		return watch.Mapped(ctx, nil, err)
	}
	reqs, err := watch.BindingsOfTemplates(ctx, r.Client, templates)
	return watch.Mapped(ctx, reqs, err)
}

func (r *Reconciler) bindingsInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return watch.BindingsOfNamespace(ctx, r.Client, o.GetName())
}

// otherClaimants wakes the other claimants of a minion ID when one starts
// being deleted (they now wait for it), when it is gone (the next in line
// takes the ID over), and when it starts or stops holding it (the claim
// order changed).
func (r *Reconciler) otherClaimants(ctx context.Context, o client.Object) []reconcile.Request {
	return watch.OtherClaimants(ctx, r.Client, o)
}
