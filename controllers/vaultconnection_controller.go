package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// VaultConnectionReconciler logs in (through the shared client cache),
// reports whether Vault is reachable, its version, and its identity: every
// spec.checkInterval it checks that the token works and that Vault is still
// the Vault the operator wrote to. A changed identity (status.identity)
// wakes every binding and template of the connection.
type VaultConnectionReconciler struct {
	client.Client
	Recorder    events.EventRecorder
	Connections *Connections
}

// lastLoginRefresh: a check that succeeds moves status.lastLoginTime only
// when it is this old, so that a healthy connection is not a status write
// every checkInterval.
const lastLoginRefresh = 10 * time.Minute

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
	statusBefore := conn.Status.DeepCopy()
	var o outcome
	defer func() {
		conn.Status.ObservedGeneration = conn.Generation
		setConditions(conn, o)
		if err := patchStatus(ctx, r.Client, conn, statusBefore, connectionStatus); err != nil {
			retErr = errors.Join(retErr, err)
		}
		if retErr == nil && result.RequeueAfter == 0 {
			result.RequeueAfter = jitter(conn.EffectiveCheckInterval())
		}
	}()
	vc, _, err := r.Connections.Get(ctx, conn.Name)
	if err == nil {
		var info vault.ServerInfo
		var mounts map[string]vault.AuthMount
		if info, err = vc.ServerInfo(ctx); err == nil {
			// ServerInfo needs no token: check that the credentials work too.
			err = vc.CheckToken(ctx)
		}
		if err == nil {
			mounts, err = vc.AuthMounts(ctx)
		}
		if err == nil {
			st := &conn.Status
			identity := vaultIdentity(info.ClusterID, mounts)
			if st.Identity != "" && st.Identity != identity && r.Recorder != nil {
				emit(r.Recorder, conn, "Warning", "VaultChanged", "Check",
					"Vault's identity changed (cluster ID %s, was %s; or an AppRole mount was re-created): reconciling every binding and template of this connection now",
					info.ClusterID, st.ClusterID)
			}
			st.VaultVersion, st.ClusterID, st.Identity = info.Version, info.ClusterID, identity
			st.LastError = ""
			if now := metav1.Now(); st.LastLoginTime == nil || now.Sub(st.LastLoginTime.Time) > lastLoginRefresh {
				st.LastLoginTime = &now
			}
			o = outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason, message: fmt.Sprintf("connected to Vault %s", info.Version)}
			return ctrl.Result{}, nil
		}
	}
	conn.Status.LastError = truncate(err.Error())
	if reason, ok := stalledConnection(err); ok {
		// Only an edit of the connection helps: no retry before the next
		// check (a new generation reconciles at once).
		o = outcome{kind: outcomeStalled, reason: reason, message: err.Error()}
		return ctrl.Result{}, nil
	}
	if isWaiting(err) {
		o = outcome{kind: outcomeWaiting, reason: v1alpha1.ConnectionNotReadyReason, message: err.Error()}
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	o = outcomeFor(err)
	return ctrl.Result{}, err
}

func connectionStatus(c *v1alpha1.VaultConnection) *v1alpha1.VaultConnectionStatus { return &c.Status }

// vaultIdentity fingerprints a Vault: its cluster ID and the accessors of
// its AppRole mounts (a mount disabled and enabled again has a new
// accessor, and none of its roles).
func vaultIdentity(clusterID string, mounts map[string]vault.AuthMount) string {
	var parts []string
	for path, m := range mounts {
		if m.Type == "approle" {
			parts = append(parts, path+"="+m.Accessor)
		}
	}
	slices.Sort(parts)
	sum := sha256.Sum256([]byte(clusterID + "\n" + strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:8])
}

// SetupWithManager watches connections and the metadata of the Secrets
// they read: a new resourceVersion is a new login, and the data itself is
// read by name (Connections.secret), never cached.
func (r *VaultConnectionReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.VaultConnection{}).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.connectionsOfSecret)).
		WithOptions(opts).
		Named("vaultconnection").
		Complete(r)
}

func (r *VaultConnectionReconciler) connectionsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	names, err := connectionsBy(ctx, r.Client, connectionSecretIndex, objectKey(o.GetNamespace(), o.GetName()))
	out := make([]reconcile.Request, 0, len(names))
	for _, n := range names {
		out = append(out, reconcile.Request{NamespacedName: typesName(n)})
	}
	return mapped(ctx, out, err)
}
