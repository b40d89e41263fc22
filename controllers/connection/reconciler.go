package connection

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
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/patch"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// Reconciler logs in (through the shared client cache),
// reports whether Vault is reachable, its version, and its identity: every
// spec.checkInterval it checks that the token works and that Vault is still
// the Vault the operator wrote to. A changed identity (status.identity)
// wakes every binding and template of the connection.
type Reconciler struct {
	client.Client
	Recorder    events.EventRecorder
	Connections *Connections
	// Metrics get each check's verdict and the token's lease (nil: none).
	Metrics *metrics.Metrics
}

// lastLoginRefresh: a check that succeeds moves status.lastLoginTime only
// when it is this old, so that a healthy connection is not a status write
// every checkInterval.
const lastLoginRefresh = 10 * time.Minute

// +kubebuilder:rbac:groups=minionvault.dev,resources=vaultconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups=minionvault.dev,resources=vaultconnections/status,verbs=patch

// connectionScope records what one check of a connection saw; its
// status, events and requeue are derived from it in finishStatus.
type connectionScope struct {
	statusBefore *v1alpha1.VaultConnectionStatus
	readyBefore  *metav1.Condition
	outcome      outcome.Outcome
	// requeue is when the connection is checked again; 0 is the next
	// periodic check (spec.checkInterval, jittered).
	requeue time.Duration
}

// Reconcile is one check: get, check, and status patched once at the end
// whatever happened, and not at all when nothing in it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	conn := &v1alpha1.VaultConnection{}
	if err := r.Get(ctx, req.NamespacedName, conn); err != nil {
		if apierrors.IsNotFound(err) {
			r.Connections.Forget(req.Name) // no login, no renewals for a deleted connection
			r.Metrics.ForgetConnection(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	sc := &connectionScope{statusBefore: conn.Status.DeepCopy(), readyBefore: outcome.ReadyOf(conn)}
	defer func() { result, retErr = r.finishStatus(ctx, conn, sc) }()

	found, err := r.check(ctx, conn)
	if err == nil {
		sc.outcome = r.connected(conn, found.info, found.mounts)
		r.Metrics.Connection(conn.Name, true, found.expires, found.lease)
		return ctrl.Result{}, nil
	}
	r.failed(ctx, conn, found, err, sc)
	return ctrl.Result{}, nil
}

// checked is what a check found: Vault's answer, and the token's lease
// read after it (the check renewed the token, or logged in again, when
// that was due).
type checked struct {
	info    vault.ServerInfo
	mounts  map[string]vault.AuthMount
	asked   bool // the check reached ServerInfo
	expires time.Time
	lease   time.Duration
}

// check asks Vault whether the connection works: its seal status, the
// token, and the auth mounts (its identity). The verdict opens or closes
// the gate of the connection's bindings and templates (gate.go). Each
// request is sent once: a failing check is itself checked again within
// seconds (retryAfter), and the workers serve every connection.
func (r *Reconciler) check(ctx context.Context, conn *v1alpha1.VaultConnection) (checked, error) {
	var c checked
	var leaser vault.TokenLeaser
	ctx = vault.WithoutRetries(ctx)
	err := r.Connections.Probe(ctx, conn.Name, func(vc vault.Client) (err error) {
		leaser, _ = vc.(vault.TokenLeaser)
		c.asked = true
		if c.info, err = vc.ServerInfo(ctx); err == nil {
			err = unsealed(c.info)
		}
		if err == nil {
			// ServerInfo needs no token: check that the credentials work too.
			err = vc.CheckToken(ctx)
		}
		if err == nil {
			c.mounts, err = vc.AuthMounts(ctx)
		}
		return err
	})
	if err == nil && leaser != nil {
		c.expires, c.lease = leaser.TokenLease()
	}
	return c, err
}

// failed records a failed check: the error, the Vault that answered (if
// any), the outcome, and when the connection is checked again.
func (r *Reconciler) failed(ctx context.Context, conn *v1alpha1.VaultConnection, c checked, err error, sc *connectionScope) {
	r.Metrics.ConnectionFailed(conn.Name)
	conn.Status.LastError = outcome.Truncate(err.Error())
	info := c.info
	if !c.asked && !outcome.IsWaiting(err) {
		// The login failed before the check could ask (a new process, a
		// token that died with the Vault it was made in): ask without one.
		// Not when the check asked and Vault did not answer: asking again
		// doubles the wait on a Vault that hangs, while this controller's
		// workers serve every connection.
		if si, serr := r.Connections.ServerInfo(vault.WithoutRetries(ctx), conn); serr == nil {
			info = si
		}
	}
	r.reports(conn, info)
	var next checkAgain
	sc.outcome, next = failedCheck(err)
	switch next {
	case afterWait:
		res, _ := outcome.ResultFor(sc.outcome, nil, 0) // a wait: no error
		sc.requeue = res.RequeueAfter
	case onRetrySchedule:
		ctrl.LoggerFrom(ctx).Info("Vault connection check failed", "connection", conn.Name, "reason", sc.outcome.Reason, "error", err.Error())
		sc.requeue = r.Connections.retryAfter(conn.Name, conn.EffectiveCheckInterval())
	}
}

// checkAgain is when a connection whose check failed is checked again.
type checkAgain int

const (
	// atInterval: the next periodic check (spec.checkInterval); a new
	// generation reconciles at once.
	atInterval checkAgain = iota
	// afterWait: the outcome table's requeue for a wait (outcome.ResultFor,
	// outcome.WaitAfter); the connection's Secrets are watched, so it
	// usually looks sooner.
	afterWait
	// onRetrySchedule: within seconds (retryAfter), not with the work
	// queue's backoff (from milliseconds up to a quarter of an hour): its
	// bindings and templates wait on this check alone, so it must notice a
	// Vault that is back soon, and a dead token costs these few requests
	// only.
	onRetrySchedule
)

// failedCheck maps the error of a failed check to the connection's
// outcome and when it is checked again. A wait that only an edit of the
// connection ends stalls it until the next check; any other wait (a
// Secret, a key, an auth method missing) goes through the outcome table;
// a failure of Vault or of the credentials is checked again soon.
func failedCheck(err error) (outcome.Outcome, checkAgain) {
	if reason, ok := outcome.StalledConnection(err); ok {
		return outcome.Outcome{Kind: outcome.OutcomeStalled, Reason: reason, Message: err.Error()}, atInterval
	}
	o := outcome.For(err)
	if outcome.IsWaiting(err) {
		return o, afterWait
	}
	return o, onRetrySchedule
}

// finishStatus derives the status from the scope (observedGeneration,
// Ready, Reconciling, Stalled, UntestedVersion), reports transitions as
// events, patches the status when it changed, and says when the
// connection is checked again.
func (r *Reconciler) finishStatus(ctx context.Context, conn *v1alpha1.VaultConnection, sc *connectionScope) (ctrl.Result, error) {
	conn.Status.ObservedGeneration = conn.Generation
	outcome.SetConditions(conn, sc.outcome)
	r.versionReported(conn)
	r.events(conn, sc.readyBefore)
	if err := patch.Status(ctx, r.Client, conn, sc.statusBefore, connectionStatus); err != nil {
		// Backoff: controller-runtime ignores a requeue returned with an
		// error.
		return ctrl.Result{}, err
	}
	if sc.requeue == 0 {
		return ctrl.Result{RequeueAfter: outcome.Jitter(conn.EffectiveCheckInterval())}, nil
	}
	return ctrl.Result{RequeueAfter: sc.requeue}, nil
}

// reports records the cluster ID that a failing check's sys/seal-status
// (no token needed) reported: a token that died because Vault was
// initialised anew fails the check for good, and status must not go on
// naming the Vault that was. A binding's stale place in that Vault then has
// no connection reporting it, and is forgotten instead of waited on through
// this connection for ever (binding.clientFor). A Vault that did not answer,
// or answered sealed (no cluster ID), leaves the last one: it may be the
// same Vault, and its places are waited on. The identity stays as the last
// passing check found it (the mounts need the token): the check that
// passes again finds it changed, and wakes the connection's bindings.
func (r *Reconciler) reports(conn *v1alpha1.VaultConnection, info vault.ServerInfo) {
	st := &conn.Status
	if info.ClusterID == "" || info.ClusterID == st.ClusterID {
		return
	}
	if st.ClusterID != "" && r.Recorder != nil {
		outcome.Emit(r.Recorder, conn, "Warning", "VaultChanged", "Check",
			"Vault reports cluster ID %s, was %s, and the check fails: Vault was initialised anew or the address reaches another Vault; places in the Vault that was are forgotten where no connection reports it",
			info.ClusterID, st.ClusterID)
	}
	st.ClusterID = info.ClusterID
	if info.Version != "" {
		st.VaultVersion = info.Version
	}
}

// errNoClusterID: sys/seal-status names no cluster ID, as a sealed (or
// not initialised) Vault answers. A check must not pass on such an answer:
// a node unsealed between it and the token lookup passes the lookup and
// sys/auth (it answers unsealed a few milliseconds after sys/unseal is
// sent, and the lookup used to be retried for up to ~0.75 s), and status
// took an empty cluster ID and an identity made of it, then the next
// check the real ones back: two identity changes, each one comparing every
// binding and template of the connection with Vault (a read storm after a
// sealed restart of the standby an HA benchmark's operator pointed at).
// Not a *vault.Error: transient, so the gate stays closed and the
// connection is checked again within minRetry.
var errNoClusterID = errors.New("sys/seal-status names no cluster ID: Vault is sealed or not initialised")

// unsealed refuses what a sealed Vault says of itself (no cluster ID): the
// identity a passing check records must name the Vault it checked.
func unsealed(info vault.ServerInfo) error {
	if info.ClusterID == "" {
		return fmt.Errorf("checking Vault %s: %w", info.Version, errNoClusterID)
	}
	return nil
}

// connected records a passing check in status: Vault's version and
// identity (a change wakes everything written there), and the login time.
func (r *Reconciler) connected(conn *v1alpha1.VaultConnection, info vault.ServerInfo, mounts map[string]vault.AuthMount) outcome.Outcome {
	st := &conn.Status
	identity := vaultIdentity(info.ClusterID, mounts)
	if st.Identity != "" && st.Identity != identity && r.Recorder != nil {
		was := "was " + st.ClusterID
		if st.ClusterID == info.ClusterID {
			// Recorded by a failing check (reports) since the identity was.
			was = "found while the check failed"
		}
		outcome.Emit(r.Recorder, conn, "Warning", "VaultChanged", "Check",
			"Vault's identity changed (cluster ID %s, %s; or an AppRole mount was re-created): reconciling every binding and template of this connection now",
			info.ClusterID, was)
	}
	st.VaultVersion, st.ClusterID, st.Identity = info.Version, info.ClusterID, identity
	st.LastError = ""
	if now := metav1.Now(); st.LastLoginTime == nil || now.Sub(st.LastLoginTime.Time) > lastLoginRefresh {
		st.LastLoginTime = &now
	}
	return outcome.Outcome{Kind: outcome.OutcomeReady, Reason: v1alpha1.SucceededReason, Message: fmt.Sprintf("connected to Vault %s", info.Version)}
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
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	// A binding's failure that the connection's token check confirms
	// (gate.go) comes in here: the connection is checked now.
	closed := make(chan event.GenericEvent, 64)
	r.Connections.OnClosed(func(name string) {
		select {
		case closed <- event.GenericEvent{Object: &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
		default: // a check is on its way already
		}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.VaultConnection{}, builder.WithPredicates(watch.SpecOrRequest)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.connectionsOfSecret)).
		WatchesRawSource(source.Channel(closed, &handler.EnqueueRequestForObject{})).
		WithOptions(opts).
		Named("vaultconnection").
		Complete(r)
}

func (r *Reconciler) connectionsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	names, err := watch.ConnectionsBy(ctx, r.Client, watch.ConnectionSecretIndex, watch.ObjectKey(o.GetNamespace(), o.GetName()))
	out := make([]reconcile.Request, 0, len(names))
	for _, n := range names {
		out = append(out, reconcile.Request{NamespacedName: watch.Named(n)})
	}
	return watch.Mapped(ctx, out, err)
}
