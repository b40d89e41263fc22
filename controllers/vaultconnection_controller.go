package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// VaultConnectionReconciler logs in (through the shared client cache) and
// reports whether Vault is reachable, and its version.
type VaultConnectionReconciler struct {
	client.Client
	Connections *Connections
	Interval    time.Duration
}

// +kubebuilder:rbac:groups=minionvault.dev,resources=vaultconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups=minionvault.dev,resources=vaultconnections/status,verbs=patch

func (r *VaultConnectionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	conn := &v1alpha1.VaultConnection{}
	if err := r.Get(ctx, req.NamespacedName, conn); err != nil {
		if apierrors.IsNotFound(err) {
			r.Connections.Forget(req.Name) // no login, no renewals for a deleted connection
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := conn.DeepCopy()
	var o outcome
	defer func() {
		conn.Status.ObservedGeneration = conn.Generation
		setConditions(conn, o)
		if err := r.Status().Patch(ctx, conn, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
		if retErr == nil && result.RequeueAfter == 0 {
			result.RequeueAfter = jitter(r.Interval)
		}
	}()
	vc, _, err := r.Connections.Get(ctx, conn.Name)
	if err == nil {
		var version string
		if version, err = vc.Version(ctx); err == nil {
			// Version needs no token: check that the credentials work too.
			err = vc.CheckToken(ctx)
		}
		if err == nil {
			conn.Status.VaultVersion = version
			conn.Status.LastError = ""
			now := metav1.Now()
			conn.Status.LastLoginTime = &now
			o = outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason, message: fmt.Sprintf("connected to Vault %s", version)}
			return ctrl.Result{}, nil
		}
	}
	conn.Status.LastError = truncate(err.Error())
	if isWaiting(err) {
		o = outcome{kind: outcomeWaiting, reason: v1alpha1.ConnectionNotReadyReason, message: err.Error()}
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	o = outcome{kind: outcomeFailed, reason: unavailableReason(err), message: err.Error()}
	return ctrl.Result{}, err
}

// SetupWithManager watches connections and the Secrets they read.
func (r *VaultConnectionReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Interval == 0 {
		r.Interval = 5 * time.Minute
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.VaultConnection{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.connectionsOfSecret)).
		WithOptions(opts).
		Named("vaultconnection").
		Complete(r)
}

func (r *VaultConnectionReconciler) connectionsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1alpha1.VaultConnectionList{}
	if err := r.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, c := range list.Items {
		if usesSecret(&c, o.GetNamespace(), o.GetName()) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: c.Name}})
		}
	}
	return out
}

func usesSecret(c *v1alpha1.VaultConnection, ns, name string) bool {
	var refs []v1alpha1.SecretKeyReference
	if t := c.Spec.TLS; t != nil && t.CASecretRef != nil {
		refs = append(refs, t.CASecretRef.Resolve())
	}
	if a := c.Spec.Auth.AppRole; a != nil {
		refs = append(refs, a.SecretIDSecretRef.Resolve())
	}
	if t := c.Spec.Auth.Token; t != nil {
		refs = append(refs, t.SecretRef.Resolve())
	}
	for _, r := range refs {
		if r.Namespace == ns && r.Name == name {
			return true
		}
	}
	return false
}
