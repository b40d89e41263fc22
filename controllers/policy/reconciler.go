package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/clusterfacts"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/patch"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Reconciler writes the ACL policies a template's bindings
// render (each concrete policy once, with an ownership header), deletes
// those no binding renders any more, and refuses to overwrite policies it
// does not own.
//
// It runs as two controllers over one policy index (see SetupWithManager).
// Reconcile, keyed by template, is the scan and status controller: a full
// scan when one is due (after a start, a change of the template or its
// ConfigMaps, every interval: every binding rendered, every wanted policy
// compared with Vault), otherwise a retry of what is still dirty, then the
// template's status from the index. The policy delta controller
// (policyDeltaReconciler), keyed by binding, counts one binding's policy
// documents in or out and touches Vault only for the names whose desired
// state changed. A burst of ten thousand new bindings is ten thousand deltas
// and one status update a second, not ten thousand scans.
type Reconciler struct {
	client.Client
	Recorder        events.EventRecorder
	Connections     *connection.Connections
	Templates       *clusterfacts.Templates
	DefaultInterval time.Duration
	// ClusterID identifies this Kubernetes cluster in the ownership header
	// of the ACL policies the operator writes (ownership.PolicyOwner).
	ClusterID string
	// Rollouts are the template's bindings updated by a change on the
	// template's side, reported as one event (nil: none).
	Rollouts *outcome.Rollouts
	// Metrics get each reconcile's verdict on the template (nil: none).
	Metrics *metrics.Metrics

	once   sync.Once
	index  *policyIndex
	owners policyOwners
	// refresh asks for a delayed status refresh of a template (see
	// SetupWithManager); nil in unit tests that call Reconcile directly.
	refresh func(template string)
	// announceGrace: how long a sync runs before the status says it is
	// under way (zero: defaultAnnounceGrace).
	announceGrace time.Duration
}

// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates/status,verbs=patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates/finalizers,verbs=update

// init makes the index once, whichever comes first: SetupWithManager, or
// a unit test's direct Reconcile.
func (r *Reconciler) init() {
	r.once.Do(func() { r.index = newPolicyIndex() })
}

// templateScope records what one reconcile of a template saw; its status
// and requeue are derived from it in finishStatus.
type templateScope struct {
	readyBefore *metav1.Condition
	outcome     outcome.Outcome
	requeue     time.Duration // the next resync when Ready
	// pending: names still to compare, write or delete, some perhaps
	// held by another sync (a delta under way); the status is looked at
	// again soon, whatever the outcome.
	pending bool
	// compared is the reconcile request whose full compare began
	// (handledRequest).
	compared string
	// What this pass did in Vault, for the events (finishStatus emits
	// them all): policies written and deleted, and why the template's
	// policies were left in Vault at its deletion.
	written, deleted []string
	left             string
}

// Reconcile is the scan and status controller's pass: get, deletion,
// finalizer, compile, converge; status is patched once at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	r.init()
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, req.NamespacedName, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.ForgetTemplate(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	statusBefore := tpl.Status.DeepCopy()
	sc := &templateScope{readyBefore: outcome.ReadyOf(tpl)}
	defer func() { result, retErr = r.finishStatus(ctx, tpl, statusBefore, sc, retErr) }()

	if !tpl.DeletionTimestamp.IsZero() {
		r.Templates.Forget(tpl.UID)
		if err := r.finalize(ctx, tpl, sc); err != nil {
			sc.outcome = outcome.DeletionBlocked("deleting ACL policies", err)
			return ctrl.Result{}, err
		}
		sc.outcome = outcome.Outcome{Kind: outcome.OutcomeReady, Reason: v1alpha1.SucceededReason, Message: "deleted"}
		return ctrl.Result{}, nil
	}
	if err := patch.AddFinalizer(ctx, r.Client, tpl, func() bool { return false }); err != nil {
		return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
	}
	compiled, err := r.compile(ctx, tpl)
	if err != nil {
		return ctrl.Result{}, err
	}
	handled := statusBefore.LastHandledReconcileAt
	announced := r.announceProgress(ctx, tpl, statusBefore)
	err = r.converge(ctx, tpl, compiled, handled, sc)
	announced()
	return ctrl.Result{}, err
}

// defaultAnnounceGrace is how long a sync may run before the status says
// it is under way. Most passes end well within it (a burst of new bindings
// syncs about a second's worth of policies per pass), and they patch the
// status once, at the end, not twice.
const defaultAnnounceGrace = 2 * time.Second

// announceProgress patches the status when the sync that follows is still
// running after the grace, the status says Ready and the index knows of
// policies still to write, delete or compare: the sync may hang in Vault
// for as long as Vault lets it, and a Ready that no longer holds must not
// stand meanwhile. The patch is made on a copy taken now (converge
// changes tpl's status meanwhile). The returned func stops the timer or
// waits for the patch; when it was made, before becomes the patched
// status, the base of the final patch.
func (r *Reconciler) announceProgress(ctx context.Context, tpl *v1alpha1.MinionTemplate, before *v1alpha1.MinionTemplateStatus) (wait func()) {
	if !apimeta.IsStatusConditionTrue(tpl.Status.Conditions, v1alpha1.ReadyCondition) {
		return func() {} // the common case while bindings converge: no summary to take
	}
	grace := r.announceGrace
	if grace <= 0 {
		grace = defaultAnnounceGrace
	}
	announced := tpl.DeepCopy()
	base := before.DeepCopy()
	patched := false
	done := make(chan struct{})
	timer := time.AfterFunc(grace, func() {
		defer close(done)
		s := r.index.summary(announced.Name)
		if !s.built || !s.pending() {
			return
		}
		s.writeTo(announced)
		outcome.SetConditions(announced, s.outcome())
		if err := patch.Status(ctx, r.Client, announced, base, templateStatus); err != nil {
			// The final patch follows the sync; it says the same and more.
			ctrl.LoggerFrom(ctx).V(1).Info("Announcing the sync in status failed", "error", err.Error())
			return
		}
		patched = true
	})
	return func() {
		if timer.Stop() {
			return // the sync ended within the grace: one patch, at the end
		}
		<-done
		if patched {
			*before = *announced.Status.DeepCopy()
		}
	}
}

func templateStatus(t *v1alpha1.MinionTemplate) *v1alpha1.MinionTemplateStatus { return &t.Status }

// finishStatus derives the status from the scope, patches it when it
// changed, reports a new problem as an event, and tells controller-runtime
// what next (resultFor).
func (r *Reconciler) finishStatus(ctx context.Context, tpl *v1alpha1.MinionTemplate, statusBefore *v1alpha1.MinionTemplateStatus,
	sc *templateScope, retErr error) (ctrl.Result, error) {
	if retErr != nil && sc.outcome.Kind == outcome.OutcomeReady {
		sc.outcome = outcome.For(retErr)
	}
	tpl.Status.ObservedGeneration = tpl.Generation
	if v := handledRequest(tpl.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation], sc.compared, sc.pending, sc.outcome.Kind, retErr); v != "" {
		tpl.Status.LastHandledReconcileAt = v
	}
	outcome.SetConditions(tpl, sc.outcome)
	r.countVerdict(tpl.Name, sc.outcome)
	perr := patch.Status(ctx, r.Client, tpl, statusBefore, templateStatus)
	r.events(tpl, sc)
	switch {
	case perr != nil:
		// The status must be written: retry, even a stalled template.
		return ctrl.Result{}, perr
	case sc.pending && retErr == nil:
		return ctrl.Result{RequeueAfter: statusRefreshDelay}, nil
	case sc.outcome.Kind == outcome.OutcomeStalled:
		// Not a terminal error, unlike a binding's: every delta of the
		// template's bindings asks for a status refresh, and each would log
		// the same error again. The condition says it once.
		return ctrl.Result{}, nil
	}
	return outcome.ResultFor(sc.outcome, retErr, sc.requeue)
}

// countVerdict counts the template's verdict. A failure is one the template's
// own policies met: refused, not owned, or Vault failing them. Policies in
// progress are no failure yet, and a connection that fails its checks is
// the connection's alert, not one per template of it.
func (r *Reconciler) countVerdict(name string, o outcome.Outcome) {
	reason := o.Reason
	if o.Kind == outcome.OutcomeSuspended {
		reason = v1alpha1.SuspendedReason
	}
	failed := o.Kind != outcome.OutcomeReady && o.Kind != outcome.OutcomeSuspended &&
		reason != v1alpha1.ProgressingReason && reason != v1alpha1.ConnectionNotReadyReason
	r.Metrics.Template(name, o.Kind == outcome.OutcomeReady, reason, failed)
}

// compile returns the compiled template; a problem of the template is a
// refusal (admission.Verdict) that outcome.For turns into Stalled or
// Waiting, as for its bindings.
func (r *Reconciler) compile(ctx context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error) {
	compiled, err := clusterfacts.New(r.Client, r.Templates).Compile(ctx, tpl)
	if err != nil {
		return nil, err
	}
	if ps := compiled.Problems(); len(ps) > 0 {
		// Every binding is refused with these; say so where they are.
		return nil, &admission.Verdict{Kind: admission.Stalled, Reason: admission.ViolationReason(ps), Message: admission.ViolationMessage(ps)}
	}
	return compiled, nil
}

// finalize deletes every policy whose header names the template (unless
// its deletionPolicy is Retain), then the finalizer. After a start the
// template's policies are found by listing Vault's; none is missed however
// many there are, because none is recorded in status.
func (r *Reconciler) finalize(ctx context.Context, tpl *v1alpha1.MinionTemplate, sc *templateScope) error {
	if tpl.Spec.EffectiveDeletionPolicy() == v1alpha1.DeletionPolicyDelete {
		if err := r.deletePolicies(ctx, tpl, sc); err != nil {
			return err
		}
	}
	if err := patch.RemoveFinalizer(ctx, r.Client, tpl); err != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	r.index.forget(tpl.Name)
	return nil
}

// deletePolicies deletes the policies the template owns in Vault; a
// connection that cannot be used leaves them there, with a warning.
func (r *Reconciler) deletePolicies(ctx context.Context, tpl *v1alpha1.MinionTemplate, sc *templateScope) error {
	vc, _, err := r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name)
	switch {
	case err != nil && outcome.IsWaiting(err) && !outcome.WaitingOn(err, outcome.WaitingForHealth):
		// No connection to delete through: the policies stay. One that
		// fails its check is waited for, as any Vault failure.
		sc.left = err.Error()
		return nil
	case err != nil:
		return err
	}
	defer r.index.holdForScan(tpl.Name)()
	owned := r.index.ownedNames(tpl.Name)
	reader := r.reader(tpl.Name)
	if !r.index.discovered(tpl.Name) {
		found, err := discoverOwned(ctx, vc, r.policyOwner(tpl), reader, nil)
		if err != nil {
			return err
		}
		owned = append(owned, found...)
	}
	slices.Sort(owned)
	owned = slices.Compact(owned)
	pass, err := syncPolicies(ctx, vc, r.policyOwner(tpl), false, nil, owned, reader)
	r.index.settle(tpl.Name, policyWork{stale: owned}, pass)
	sc.deleted = appendCounted(nil, pass.deleted)
	return err
}

// templateVault is the identity the template's VaultConnection reports
// (status.identity, "" when unknown), and the key under which what is
// known of its Vault's policies is kept: the Vault cluster and namespace,
// so that two connections to one Vault read each policy once between them
// (the connection's name until its cluster is known).
func (r *Reconciler) templateVault(ctx context.Context, conn string) (identity, key string) {
	vc := &v1alpha1.VaultConnection{}
	if err := r.Get(ctx, types.NamespacedName{Name: conn}, vc); err != nil {
		return "", "connection/" + conn
	}
	if vc.Status.ClusterID == "" {
		return vc.Status.Identity, "connection/" + conn
	}
	return vc.Status.Identity, "cluster/" + vc.Status.ClusterID + "/namespace/" + vc.Spec.Namespace
}

// policyOwner is the owner the template's policies' header names.
func (r *Reconciler) policyOwner(tpl *v1alpha1.MinionTemplate) ownership.PolicyOwner {
	return ownership.PolicyOwner{Cluster: r.ClusterID, Template: tpl.Name}
}

// reader reads the policies of the template's Vault (see policyOwners).
func (r *Reconciler) reader(template string) *policyReader {
	return r.owners.reader(r.index.vaultKey(template))
}

func (r *Reconciler) requestRefresh(template string) {
	if r.refresh != nil {
		r.refresh(template)
	}
}

// events reports what the pass did and a new problem; every event of a
// template is emitted here. Progress (policies still being written) is no
// problem to warn of.
func (r *Reconciler) events(tpl *v1alpha1.MinionTemplate, sc *templateScope) {
	action := "Reconcile"
	if !tpl.DeletionTimestamp.IsZero() {
		action = "Delete"
	}
	if len(sc.written) > 0 {
		outcome.Emit(r.Recorder, tpl, "Normal", "PoliciesWritten", action, "ACL policies written: %s", strings.Join(sc.written, ", "))
	}
	if len(sc.deleted) > 0 {
		outcome.Emit(r.Recorder, tpl, "Normal", "PoliciesDeleted", action, "ACL policies deleted: %s", strings.Join(sc.deleted, ", "))
	}
	if sc.left != "" {
		outcome.Emit(r.Recorder, tpl, "Warning", v1alpha1.DeletionBlockedReason, action, "ACL policies left in Vault: %s", sc.left)
	}
	if n := r.Rollouts.Take(tpl.Name); n > 0 {
		outcome.Emit(r.Recorder, tpl, "Normal", "BindingsUpdated", action,
			"%d bindings updated in Vault (role, entity or alias) for what they render now from this template, its parameters or their namespace", n)
	}
	before := sc.readyBefore
	if after := outcome.ReadyOf(tpl); after != nil && after.Status != metav1.ConditionTrue && after.Reason != v1alpha1.ProgressingReason &&
		(before == nil || before.Reason != after.Reason || before.Message != after.Message) {
		outcome.Emit(r.Recorder, tpl, "Warning", after.Reason, action, "%s", after.Message)
	}
}
