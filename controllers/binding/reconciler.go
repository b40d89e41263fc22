package binding

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/clusterfacts"
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/patch"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Reconciler brings Vault to what a MinionBinding renders to:
// the minion's AppRole role, identity entity (metadata) and entity alias.
type Reconciler struct {
	client.Client
	Recorder    events.EventRecorder
	Connections *connection.Connections
	Templates   *clusterfacts.Templates
	Metrics     *metrics.Metrics
	// Rollouts, when the template controller runs beside this one, takes
	// the updates that a binding's own spec did not cause, for its
	// template's event (nil: each binding reports its own).
	Rollouts *outcome.Rollouts
	// DefaultInterval applies when a template sets no interval.
	DefaultInterval time.Duration

	// ClusterID identifies this Kubernetes cluster in the owner markers the
	// operator writes into Vault (pkg/ownership).
	ClusterID string
	// APIReader reads past the cache: whether the binding a marker names
	// still exists (another shard's bindings are not in the cache).
	APIReader client.Reader
	// SeesAllBindings: the cache holds every MinionBinding of the cluster
	// (no shard): a role whose role ID this cluster's operator chose for
	// a binding that no claimant of the minion ID is, is a gone binding's.
	SeesAllBindings bool
	// Lost connects the binding controller with the lost-minion collector
	// in this process (nil: none runs here); LostWindow is the restore
	// window a claimant of a lost minion is told about.
	Lost       *lostnotice.Notices
	LostWindow time.Duration

	// random is the randomness of a new role ID (crypto/rand).
	random func() [16]byte
	// clock is the time of runs of drift corrections and of checks
	// (time.Now).
	clock func() time.Time
	// checks is when each binding's next drift check is due (nil: every
	// reconcile compares with Vault, as unit tests expect).
	checks *checkSchedule
}

func (r *Reconciler) now() time.Time {
	if r.clock != nil {
		return r.clock()
	}
	return time.Now()
}

// bindingScope records what one reconcile saw and did; status and events
// are derived from it after the work.
type bindingScope struct {
	outcome outcome.Outcome
	result  *render.Result
	tpl     *v1alpha1.MinionTemplate
	conn    string
	vault   string // the Vault written to (ownership.VaultKey)
	hash    string
	// actions is the plan (plan.go), done what was executed
	// of it: events, status and metrics are derived from them.
	actions []vaultAction
	done    []vaultAction
	// notOwned are objects a removal left because Vault does not prove
	// them the binding's, with why.
	notOwned []string
	retained []string // places left by deletionPolicy Retain
	// unmarkedRetain are retained places whose entity could not be marked
	// retained (Vault not reached), with why.
	unmarkedRetain []string
	// unreachable are places in a Vault no connection reaches any more;
	// forgotten, in a Vault no connection reports any more (initialised
	// anew, replaced), with why.
	unreachable []string
	forgotten   []string
	// brokenRecord says why the deletion could not read the binding's
	// record of where it wrote (it then looks only where status says).
	brokenRecord string
	// driftRun says whether this reconcile's corrections made, or
	// continued, a run of drift that keeps coming back.
	driftRun driftRun
	created  bool // first successful write of this binding
	// specHandled: the binding's spec was handled before this reconcile,
	// so what it writes now comes from its template's side.
	specHandled bool
	entityID    string
	roleID      string
	// roleDigest is the roleFingerprint of the role as this reconcile
	// found or wrote it, "" when it may differ (status.appRole).
	roleDigest string
	// applied: the reconcile got as far as Vault's objects (apply), so a
	// failure may have left the role other than status says.
	applied bool
	// compared: the apply read every object of the binding from Vault (the
	// role, its role ID, the entity with its aliases), none taken as
	// known from an earlier check (handlesRequest).
	compared bool
	// handled: the binding's reconcile request may be reported handled.
	handled  bool
	metadata map[string]string // the entity metadata keys the operator owns, as written
	requeue  time.Duration
	// skipped are stale places a plan does not look at (another Vault).
	skipped []string
}

// +kubebuilder:rbac:groups=minionvault.dev,resources=minionbindings,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=minionbindings/status,verbs=patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=minionbindings/finalizers,verbs=update
// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=minionvault.dev,resources=vaultconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// TokenRequest (Vault kubernetes auth) for the operator's own ServiceAccount
// only: config/rbac/token_request_role.yaml, not a cluster-wide marker.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile is one pass: get, deletion, suspend, work; status is patched
// once at the end whatever happened, and not at all when nothing in it
// changed (a fleet in sync costs no Kubernetes writes). The finalizer is
// added together with the record of what will be written (see placement),
// so a new binding costs two writes: that one, and its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &v1alpha1.MinionBinding{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.checks.forget(req.NamespacedName)
			r.Metrics.ForgetBinding(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("minionID", obj.Spec.MinionID))
	statusBefore := obj.Status.DeepCopy()
	sc := &bindingScope{specHandled: obj.Status.ObservedGeneration == obj.Generation}
	before := outcome.ReadyOf(obj)

	defer func() {
		if retErr != nil && sc.outcome.Kind == outcome.OutcomeReady {
			sc.outcome = outcome.For(retErr)
		}
		sc.handled = handlesRequest(sc.outcome, sc.compared, retErr)
		r.finishStatus(obj, sc)
		// Counted before the status is written: whoever sees the status
		// finds the metric counted too.
		observeBinding(r.Metrics, sc)
		r.Metrics.Binding(req.NamespacedName, bindingState(obj))
		perr := patch.Status(ctx, r.Client, obj, statusBefore, bindingStatus)
		r.events(obj, sc, before)
		result, retErr = outcome.ResultFor(sc.outcome, retErr, sc.requeue)
		if perr != nil {
			// The status must be written: retry, even a stalled binding.
			result, retErr = ctrl.Result{}, perr
		}
	}()

	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, obj, sc)
	}
	if obj.Spec.Suspend {
		sc.outcome = outcome.Outcome{Kind: outcome.OutcomeSuspended}
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.reconcile(ctx, obj, sc)
}

func bindingStatus(b *v1alpha1.MinionBinding) *v1alpha1.MinionBindingStatus { return &b.Status }

// reconcile admits the binding, then brings Vault to what it renders to.
// Every refusal and failure is returned as an error; outcome.For sorts them.
func (r *Reconciler) reconcile(ctx context.Context, obj *v1alpha1.MinionBinding, sc *bindingScope) error {
	a, err := clusterfacts.Admit(ctx, r.Client, r.Templates, obj)
	sc.tpl, sc.result = a.Template, a.Result
	if err != nil {
		return err
	}
	tpl, res := a.Template, a.Result
	inv, err := r.inventory(ctx, obj)
	if err != nil {
		return &outcome.ErrInvalidInput{Err: err}
	}
	vc, conn, err := r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name)
	if err != nil {
		return err
	}
	sc.conn = tpl.Spec.ConnectionRef.Name
	sent := time.Now()
	if sc.vault, err = connection.VaultKey(ctx, vc, conn); err != nil {
		return r.Connections.Verify(ctx, sc.conn, sent, err)
	}

	cur := currentPlacement(a, sc.vault)
	sc.hash = desiredHash(sc.vault, res)
	sk := scheduleKey{key: client.ObjectKeyFromObject(obj), uid: obj.UID, identity: conn.Status.Identity,
		interval: outcome.TemplateInterval(tpl, r.DefaultInterval), roleFP: roleFingerprint(sc.vault, conn.Status.Identity, res)}
	if wait, ok := r.untilCheck(obj, sk, sc.hash, inv, cur); ok {
		// In sync when last looked at, and its check not due yet.
		sc.outcome = outcome.Outcome{Kind: outcome.OutcomeReady, Reason: v1alpha1.SucceededReason, Message: readyMessage(res)}
		sc.requeue = wait
		return nil
	}
	if log := ctrl.LoggerFrom(ctx).V(1); log.Enabled() {
		log.Info("Comparing with Vault", "why", r.whyCompare(obj, sk, sc.hash, inv, cur))
	}
	known := r.knownRoleID(obj, sk)
	sent = time.Now()
	sc.applied, sc.compared = true, known == ""
	if err := r.apply(ctx, vc, obj, a, inv, cur, known, sc); err != nil {
		r.checks.forget(sk.key)
		// A refusal or outage that is the connection's makes the binding
		// wait on it, and its siblings with it, without trying Vault.
		return r.Connections.Verify(ctx, sc.conn, sent, err)
	}
	sc.outcome = outcome.Outcome{Kind: outcome.OutcomeReady, Reason: v1alpha1.SucceededReason, Message: readyMessage(res)}
	sc.requeue = r.nextCheck(sk, known, sc)
	return nil
}

// handlesRequest reports whether a reconcile may report the binding's
// reconcile request handled (status.lastHandledReconcileAt): when it read
// every object of the binding from Vault as it is now (compared) and
// brought them to the rendering (Ready), or when its verdict is a refusal
// only a change clears: the objects in Vault are someone else's, or the
// binding is stalled (the condition says why). A failure that a retry may
// clear (Vault unavailable, a connection or template to wait for), a
// suspended binding, or a pass that took Vault as it last saw it leaves
// the request open: the next reconcile compares everything again.
func handlesRequest(o outcome.Outcome, compared bool, err error) bool {
	if err != nil {
		_, _, refused := Refusal(err)
		return refused
	}
	return o.Kind == outcome.OutcomeReady && compared
}

func readyMessage(res *render.Result) string {
	return fmt.Sprintf("AppRole %s/%s with %d policies, entity %s with %d metadata keys",
		res.AppRole.Mount, res.AppRole.RoleName, len(res.Policies), res.EntityName, len(res.EntityMetadata))
}

var _ reconcile.Reconciler = &Reconciler{}
