package controllers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// MinionBindingReconciler brings Vault to what a MinionBinding renders to:
// the minion's AppRole role, identity entity (metadata) and entity alias.
type MinionBindingReconciler struct {
	client.Client
	Recorder    events.EventRecorder
	Connections *Connections
	Templates   *Templates
	Metrics     *Metrics
	// DefaultInterval applies when a template sets no interval.
	DefaultInterval time.Duration

	// ClusterID identifies this Kubernetes cluster in the owner markers the
	// operator writes into Vault (pkg/ownership).
	ClusterID string
	// APIReader reads past the cache: whether the binding a marker names
	// still exists (another shard's bindings are not in the cache).
	APIReader client.Reader

	// matchByName: a plan of manifests, whose bindings have no UID, takes
	// a marker naming the binding's namespace and name as its own.
	matchByName bool
	// newRoleID chooses the role ID of a new role (a random UUID).
	newRoleID func() string
}

// bindingScope records what one reconcile saw and did; status and events
// are derived from it after the work.
type bindingScope struct {
	outcome outcome
	result  *render.Result
	tpl     *v1alpha1.MinionTemplate
	conn    string
	vault   string // the Vault written to (ownership.VaultKey)
	hash    string
	// actions is the plan (binding_plan.go), done what was executed
	// of it: events, status and metrics are derived from them.
	actions []vaultAction
	done    []vaultAction
	// notOwned are objects a removal left because Vault does not prove
	// them the binding's, with why.
	notOwned []string
	created  bool // first successful write of this binding
	entityID string
	roleID   string
	metadata map[string]string // the entity metadata keys the operator owns, as written
	requeue  time.Duration
	// beforeWrite records where apply is about to write (nil: nothing to
	// record, as in a plan).
	beforeWrite func() error
}

// +kubebuilder:rbac:groups=minionvault.dev,resources=minionbindings,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=minionbindings/status,verbs=patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=minionbindings/finalizers,verbs=update
// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=minionvault.dev,resources=vaultconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;watch
// TokenRequest (Vault kubernetes auth) for the operator's own ServiceAccount
// only: config/rbac/token_request_role.yaml, not a cluster-wide marker.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile is one pass: get, deletion, suspend, work; status is patched
// once at the end whatever happened, and not at all when nothing in it
// changed (a fleet in sync costs no Kubernetes writes). The finalizer is
// added together with the record of what will be written (see placement),
// so a new binding costs two writes: that one, and its status.
func (r *MinionBindingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &v1alpha1.MinionBinding{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("minionID", obj.Spec.MinionID))
	statusBefore := obj.Status.DeepCopy()
	sc := &bindingScope{}
	before := readyCondition(obj)

	defer func() {
		r.finishStatus(obj, sc, retErr)
		if !equality.Semantic.DeepEqual(*statusBefore, obj.Status) {
			base := obj.DeepCopy()
			base.Status = *statusBefore
			if err := r.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
				retErr = kerrors.NewAggregate([]error{retErr, fmt.Errorf("patching status: %w", err)})
			}
		}
		r.events(obj, sc, before)
		r.Metrics.observeBinding(obj, sc)
		if sc.outcome.kind == outcomeStalled {
			// Invalid configuration: a retry cannot help; a change of the
			// binding, its template or namespace triggers a new reconcile.
			result, retErr = ctrl.Result{}, nil
		} else if retErr == nil && sc.requeue > 0 {
			result.RequeueAfter = sc.requeue
		}
	}()

	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, obj, sc)
	}
	if obj.Spec.Suspend {
		sc.outcome = outcome{kind: outcomeSuspended}
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.reconcile(ctx, obj, sc)
}

func (r *MinionBindingReconciler) reconcile(ctx context.Context, obj *v1alpha1.MinionBinding, sc *bindingScope) error {
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, types.NamespacedName{Name: obj.Spec.TemplateRef.Name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			sc.wait(v1alpha1.TemplateNotFoundReason, fmt.Sprintf("MinionTemplate %q does not exist", obj.Spec.TemplateRef.Name))
			return nil
		}
		return err
	}
	sc.tpl = tpl
	if ok, msg, err := r.namespaceSelected(ctx, tpl, obj.Namespace); err != nil {
		return err
	} else if !ok {
		sc.stall(v1alpha1.NamespaceNotAllowedReason, msg)
		return nil
	}
	if owner, err := r.minionIDOwner(ctx, obj); err != nil {
		return err
	} else if owner != nil && !owner.DeletionTimestamp.IsZero() {
		// Its finalizer is removing the minion's objects: starting now
		// would interleave two bindings' writes to one role. Its deletion
		// wakes this binding.
		sc.wait(v1alpha1.MinionIDReleasingReason, fmt.Sprintf("minion ID %q is being released by MinionBinding %s/%s, which is being deleted", obj.Spec.MinionID, owner.Namespace, owner.Name))
		return nil
	} else if owner != nil {
		sc.stall(v1alpha1.DuplicateMinionIDReason, fmt.Sprintf("minion ID %q is already bound by MinionBinding %s/%s", obj.Spec.MinionID, owner.Namespace, owner.Name))
		return nil
	}

	compiled, err := r.Templates.Compile(ctx, tpl)
	if err != nil {
		if isWaiting(err) {
			sc.wait(v1alpha1.RenderFailedReason, err.Error())
			return nil
		}
		if apierrors.IsNotFound(err) || isAPIError(err) {
			return err
		}
		sc.stall(v1alpha1.RenderFailedReason, fmt.Sprintf("template %q: %v", tpl.Name, err))
		return nil
	}
	b, err := convert.Binding(&obj.Spec)
	if err != nil {
		sc.stall(v1alpha1.RenderFailedReason, err.Error())
		return nil
	}
	res, err := compiled.Render(b, render.Options{})
	if err != nil {
		sc.stall(v1alpha1.RenderFailedReason, err.Error())
		return nil
	}
	sc.result = res
	if vs := compiled.Validate(res); len(vs) > 0 {
		sc.stall(ViolationReason(vs), ViolationMessage(vs))
		return nil
	}
	inv, err := r.inventory(ctx, obj)
	if err != nil {
		sc.stall(v1alpha1.ValidationFailedReason, err.Error())
		return nil
	}

	vc, conn, err := r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name)
	if err != nil {
		if isWaiting(err) {
			sc.wait(v1alpha1.ConnectionNotReadyReason, err.Error())
			return nil
		}
		sc.fail(unavailableReason(err), err.Error())
		return err
	}
	sc.conn = tpl.Spec.ConnectionRef.Name
	if sc.vault, err = vaultKey(ctx, vc, conn); err != nil {
		return r.vaultFailed(sc, err)
	}

	// Where we are about to write is recorded, with the finalizer, after
	// Vault was read and the objects found the binding's to write, and
	// before the first write: a refused binding gets neither.
	cur := ownership.Placement{Vault: sc.vault, Connection: sc.conn, Mount: res.AppRole.Mount, Entity: res.EntityName,
		DeletionPolicy: string(tpl.Spec.EffectiveDeletionPolicy())}
	sc.beforeWrite = func() error { return r.recordBeforeWriting(ctx, obj, inv, cur) }
	if err := r.apply(ctx, vc, obj, tpl, res, inv, cur, sc); err != nil {
		return r.vaultFailed(sc, err)
	}
	sc.outcome = outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason, message: readyMessage(res)}
	sc.requeue = jitter(templateInterval(tpl, r.DefaultInterval))
	return nil
}

// vaultFailed sorts a Vault error into the three classes: refused input
// stalls; credentials, Vault's state and its availability are retried with
// backoff.
func (r *MinionBindingReconciler) vaultFailed(sc *bindingScope, err error) error {
	var refused *errRefused
	if errors.As(err, &refused) {
		// Someone else's objects: nothing was written; look again later
		// (a holder's deletion wakes the binding sooner).
		sc.wait(refused.reason, refused.msg)
		return nil
	}
	var bad *errInvalidInput
	if errors.As(err, &bad) {
		sc.stall(v1alpha1.ValidationFailedReason, err.Error())
		return nil
	}
	switch classify(err) {
	case vault.ClassInvalid:
		// Vault refused what we sent: retrying the same write cannot
		// help until the binding or template changes.
		sc.stall(v1alpha1.ValidationFailedReason, "Vault refused the write: "+err.Error())
		return nil
	case vault.ClassConflict:
		sc.fail(v1alpha1.VaultConflictReason, err.Error())
	case vault.ClassDenied:
		sc.fail(v1alpha1.AccessDeniedReason, err.Error())
	default:
		sc.fail(v1alpha1.VaultUnavailableReason, err.Error())
	}
	return err
}

// classify is vault.Classify, plus the operator's own view of Vault's
// state and of a cancelled reconcile.
func classify(err error) vault.Class {
	var st *errVaultState
	switch {
	case errors.As(err, &st):
		return vault.ClassConflict
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return vault.ClassTransient
	}
	return vault.Classify(err)
}

// unavailableReason tells a refused credential from an unreachable Vault.
func unavailableReason(err error) string {
	if vault.Denied(err) {
		return v1alpha1.AccessDeniedReason
	}
	return v1alpha1.VaultUnavailableReason
}

func readyMessage(res *render.Result) string {
	return fmt.Sprintf("AppRole %s/%s with %d policies, entity %s with %d metadata keys",
		res.AppRole.Mount, res.AppRole.RoleName, len(res.Policies), res.EntityName, len(res.EntityMetadata))
}

func (sc *bindingScope) stall(reason, msg string) {
	sc.outcome = outcome{kind: outcomeStalled, reason: reason, message: msg}
}

func (sc *bindingScope) wait(reason, msg string) {
	sc.outcome = outcome{kind: outcomeWaiting, reason: reason, message: msg}
	sc.requeue = 2 * time.Minute
}

func (sc *bindingScope) fail(reason, msg string) {
	sc.outcome = outcome{kind: outcomeFailed, reason: reason, message: msg}
}

func isAPIError(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st)
}

// violationReason picks the condition reason for guard-rail violations:
// the first violation's, mapped onto the API's reasons.
// ViolationReason is the condition reason for a binding refused with vs.
func ViolationReason(vs []render.Violation) string {
	switch vs[0].Reason {
	case render.ReasonPolicyNotAllowed:
		return v1alpha1.PolicyNotAllowedReason
	case render.ReasonInvalidTemplate:
		return v1alpha1.RenderFailedReason
	}
	return v1alpha1.ValidationFailedReason
}

// ViolationMessage joins the violations for a condition message.
func ViolationMessage(vs []render.Violation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// namespaceSelected applies the template's namespaceSelector.
func (r *MinionBindingReconciler) namespaceSelected(ctx context.Context, tpl *v1alpha1.MinionTemplate, ns string) (bool, string, error) {
	if tpl.Spec.NamespaceSelector == nil {
		return true, "", nil
	}
	sel, err := metav1.LabelSelectorAsSelector(tpl.Spec.NamespaceSelector)
	if err != nil {
		return false, fmt.Sprintf("template %q has an invalid namespaceSelector: %v", tpl.Name, err), nil
	}
	n := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: ns}, n); err != nil {
		return false, "", err
	}
	if !sel.Matches(labels.Set(n.Labels)) {
		return false, fmt.Sprintf("namespace %q is not selected by MinionTemplate %q (namespaceSelector %s)", ns, tpl.Name, sel), nil
	}
	return true, "", nil
}

// minionIDOwner returns the binding that owns the minion ID when it is not
// obj: a binding that holds it (status records its role) keeps it; otherwise the oldest claim wins (creation
// time, then namespace/name), so the answer is the same whichever binding
// is reconciled. A binding being deleted keeps its claim until it is gone:
// its finalizer is still removing the minion's objects.
func (r *MinionBindingReconciler) minionIDOwner(ctx context.Context, obj *v1alpha1.MinionBinding) (*v1alpha1.MinionBinding, error) {
	list := &v1alpha1.MinionBindingList{}
	if err := r.List(ctx, list, client.MatchingFields{minionIDIndex: minionIDKey(obj.Spec.MinionID)}); err != nil {
		return nil, err
	}
	var owner *v1alpha1.MinionBinding
	for i := range list.Items {
		b := &list.Items[i]
		if owner == nil || claimsBefore(b, owner) {
			owner = b
		}
	}
	if owner == nil || (owner.UID == obj.UID && owner.Namespace == obj.Namespace && owner.Name == obj.Name) {
		return nil, nil
	}
	return owner, nil
}

func claimsBefore(a, b *v1alpha1.MinionBinding) bool {
	// Creation times have a resolution of one second: without this, a
	// binding created in the same second with a name sorting first would
	// take over from one that has written Vault already.
	if ha, hb := holds(a), holds(b); ha != hb {
		return ha
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// holds: the operator recorded, in status (which a tenant cannot write),
// that the binding wrote its minion's role. A finalizer says nothing: a
// tenant can set it by hand.
func holds(b *v1alpha1.MinionBinding) bool {
	return b.Status.AppRole != nil && b.Status.AppRole.RoleID != ""
}

func minionIDKey(id string) string { return strings.ToLower(id) }

func templateInterval(tpl *v1alpha1.MinionTemplate, def time.Duration) time.Duration {
	if tpl != nil && tpl.Spec.Interval != nil && tpl.Spec.Interval.Duration > 0 {
		return tpl.Spec.Interval.Duration
	}
	if def > 0 {
		return def
	}
	return time.Hour
}

// jitter spreads resyncs of many bindings over ±10% of the interval.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

var _ reconcile.Reconciler = &MinionBindingReconciler{}
