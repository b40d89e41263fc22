package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// MinionTemplateReconciler writes the ACL policies a template's bindings
// render (each concrete policy once, with an ownership header), deletes
// those no binding renders any more, and refuses to overwrite policies it
// does not own.
//
// Its queue holds two kinds of keys. A template's key (no namespace) is a
// full scan when one is due (after a start, a change of the template or
// its ConfigMaps, every interval): every binding rendered from the cache,
// every wanted policy compared with Vault. Otherwise it only refreshes the
// template's status from memory. A binding's key (namespaced) is a delta:
// that binding is rendered, the policy index updated, and Vault touched
// only for the names whose desired state changed. A burst of ten thousand
// new bindings is ten thousand deltas and one status update a second, not
// ten thousand scans.
type MinionTemplateReconciler struct {
	client.Client
	Recorder        events.EventRecorder
	Connections     *Connections
	Templates       *Templates
	Bindings        *MinionBindingReconciler // for the binding checks it shares
	DefaultInterval time.Duration

	index  *policyIndex
	owners policyOwners
	// refresh asks for a delayed status refresh of a template (see
	// SetupWithManager); nil in unit tests that call Reconcile directly.
	refresh func(template string)
}

// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates/status,verbs=patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates/finalizers,verbs=update

func (r *MinionTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.index == nil {
		r.index = newPolicyIndex()
	}
	if req.Namespace != "" {
		return ctrl.Result{}, r.reconcileBinding(ctx, req.NamespacedName)
	}
	return r.reconcileTemplate(ctx, req.Name)
}

func (r *MinionTemplateReconciler) reconcileTemplate(ctx context.Context, name string) (result ctrl.Result, retErr error) {
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, tpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	statusBefore := tpl.Status.DeepCopy()
	var o outcome
	before := readyCondition(tpl)
	defer func() {
		if retErr != nil && (o.kind == outcomeReady) {
			o = outcomeFor(retErr)
		}
		tpl.Status.ObservedGeneration = tpl.Generation
		if v := tpl.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]; v != "" {
			tpl.Status.LastHandledReconcileAt = v
		}
		setConditions(tpl, o)
		if !equality.Semantic.DeepEqual(*statusBefore, tpl.Status) {
			base := tpl.DeepCopy()
			base.Status = *statusBefore
			if err := r.Status().Patch(ctx, tpl, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
				retErr = kerrors.NewAggregate([]error{retErr, err})
			}
		}
		if after := readyCondition(tpl); after != nil && after.Status != metav1.ConditionTrue &&
			(before == nil || before.Reason != after.Reason || before.Message != after.Message) {
			emit(r.Recorder, tpl, "Warning", after.Reason, "Reconcile", "%s", after.Message)
		}
		if o.kind == outcomeStalled {
			// Input that cannot succeed: no backoff. A scan is still due at
			// the interval (the policies that can be managed are).
			retErr = nil
		} else if retErr == nil && o.kind == outcomeWaiting {
			result.RequeueAfter = 2 * time.Minute
		}
	}()

	if !tpl.DeletionTimestamp.IsZero() {
		r.Templates.Forget(tpl.UID)
		if err := r.finalize(ctx, tpl); err != nil {
			o = outcome{kind: outcomeFailed, reason: v1alpha1.DeletionBlockedReason, message: "deleting ACL policies: " + err.Error()}
			return ctrl.Result{}, err
		}
		o = outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason, message: "deleted"}
		return ctrl.Result{}, nil
	}
	if base := tpl.DeepCopy(); controllerutil.AddFinalizer(tpl, v1alpha1.Finalizer) {
		if err := r.Patch(ctx, tpl, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, err
		}
	}

	compiled, err := r.Templates.Compile(ctx, tpl)
	if err != nil {
		if isWaiting(err) {
			o = outcome{kind: outcomeWaiting, reason: v1alpha1.RenderFailedReason, message: err.Error()}
			return ctrl.Result{}, nil
		}
		if isAPIError(err) {
			return ctrl.Result{}, err
		}
		o = outcome{kind: outcomeStalled, reason: v1alpha1.RenderFailedReason, message: err.Error()}
		return ctrl.Result{}, nil
	}
	if ps := compiled.Problems(); len(ps) > 0 {
		// Every binding is refused with these; say so where they are.
		o = outcome{kind: outcomeStalled, reason: admission.ViolationReason(ps), message: admission.ViolationMessage(ps)}
		return ctrl.Result{}, nil
	}

	interval := templateInterval(tpl, r.DefaultInterval)
	identity, vaultKey := r.vaultIdentity(ctx, tpl.Spec.ConnectionRef.Name)
	ti := r.index.template(tpl.Name)
	r.index.mu.Lock()
	if ti.identity != identity {
		// Another Vault, or the same one re-initialised or restored: what
		// was found there is no longer known.
		r.owners.forget(ti.vaultKey)
		ti.discovered = false
	}
	// The key also changes when the connection's cluster becomes known:
	// the same Vault, nothing to discover again.
	ti.identity, ti.vaultKey = identity, vaultKey
	// A request is handled once: the status that records it may not be in
	// the cache yet when the next reconcile (a status refresh) reads it.
	asked := tpl.Annotations[v1alpha1.ReconcileRequestAnnotation]
	requested := asked != statusBefore.LastHandledReconcileAt && asked != ti.handledRequest
	why := []any{"vault", vaultKey, "built", ti.built, "discovered", ti.discovered, "compiledChanged", ti.compiled != compiled, "requested", requested}
	due := !ti.built || !ti.discovered || ti.compiled != compiled || time.Since(ti.lastScan) >= interval-interval/10 || requested
	r.index.mu.Unlock()
	if due {
		ctrl.LoggerFrom(ctx).V(1).Info("Full scan of the template's bindings and policies", why...)
		if o, err = r.fullScan(ctx, tpl, compiled, ti); err != nil || o.kind != outcomeReady {
			return ctrl.Result{}, err
		}
		r.index.mu.Lock()
		ti.handledRequest = asked
		r.index.mu.Unlock()
	}
	o = r.summarize(tpl)
	written, deleted := r.index.takeUnreported(tpl.Name)
	r.policyEvents(tpl, written, deleted)
	r.index.mu.Lock()
	next := interval - time.Since(ti.lastScan)
	r.index.mu.Unlock()
	if o.kind != outcomeStalled {
		result.RequeueAfter = jitter(max(next, time.Second))
	}
	return result, nil
}

// fullScan renders every binding of the template from the cache, rebuilds
// its part of the index, lists Vault's policies once after a start to find
// the template's own, and brings every wanted policy to its body.
func (r *MinionTemplateReconciler) fullScan(ctx context.Context, tpl *v1alpha1.MinionTemplate, compiled *render.Compiled, ti *templateIndex) (outcome, error) {
	ti.scan.Lock()
	defer ti.scan.Unlock()
	list := &v1alpha1.MinionBindingList{}
	if err := r.List(ctx, list, client.MatchingFields{templateRefIndex: tpl.Name}); err != nil {
		return outcome{}, err
	}
	scanned := make(map[types.NamespacedName]bindingDocs, len(list.Items))
	for i := range list.Items {
		b := &list.Items[i]
		docs, err := r.bindingDocs(ctx, tpl, compiled, b)
		if err != nil {
			return outcome{}, err
		}
		scanned[client.ObjectKeyFromObject(b)] = bindingDocs{template: tpl.Name, member: b.DeletionTimestamp.IsZero(), docs: docs}
	}
	r.index.rebuild(tpl.Name, compiled, scanned)
	desired, owned := r.index.snapshot(tpl.Name)
	r.index.mu.Lock()
	discovered := ti.discovered
	r.index.mu.Unlock()
	if len(desired) == 0 && len(owned) == 0 && discovered {
		return outcome{kind: outcomeReady}, nil
	}
	vc, _, err := r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name)
	if err != nil {
		if isWaiting(err) {
			return outcome{kind: outcomeWaiting, reason: v1alpha1.ConnectionNotReadyReason, message: err.Error()}, nil
		}
		return outcome{}, err
	}
	rd := r.reader(ti)
	if !discovered {
		found, err := discoverOwned(ctx, vc, tpl.Name, rd, desired)
		if err != nil {
			return outcome{}, err
		}
		owned = append(owned, found...)
		r.index.resetOwned(tpl.Name, owned)
		r.index.mu.Lock()
		ti.discovered = true
		r.index.mu.Unlock()
	}
	pass, err := syncPolicies(ctx, vc, tpl.Name, tpl.Spec.AdoptPolicies, desired, owned, rd)
	for _, n := range pass.written {
		// Other templates' first scans need not read these.
		rd.set(n, tpl.Name)
	}
	rd.prune()
	r.index.observe(tpl.Name, pass)
	r.policyEvents(tpl, appendCounted(nil, pass.written), appendCounted(nil, pass.deleted))
	if err != nil {
		return outcome{}, err
	}
	return outcome{kind: outcomeReady}, nil
}

// summarize derives the template's status from the index.
func (r *MinionTemplateReconciler) summarize(tpl *v1alpha1.MinionTemplate) outcome {
	s := r.index.summary(tpl.Name)
	tpl.Status.Bindings = int32(s.members)
	tpl.Status.Policies = &v1alpha1.PolicySummary{Count: int64(s.owned), Digest: s.digest}
	switch {
	case len(s.conflicts) > 0:
		return outcome{kind: outcomeStalled, reason: v1alpha1.ValidationFailedReason, message: strings.Join(firstN(s.conflicts, 10), "; ")}
	case len(s.notOwned) > 0:
		return outcome{kind: outcomeStalled, reason: v1alpha1.PolicyNotOwnedReason,
			message: fmt.Sprintf("%d ACL policies exist in Vault and were not written by this template (set adoptPolicies to take them over): %s",
				len(s.notOwned), strings.Join(firstN(s.notOwned, 20), ", "))}
	}
	return outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason, message: fmt.Sprintf("%d bindings, %d ACL policies", s.members, s.owned)}
}

// vaultIdentity is the identity the template's VaultConnection reports
// (status.identity, "" when unknown), and the key under which what is
// known of its Vault's policies is kept: the Vault cluster and namespace,
// so that two connections to one Vault read each policy once between them
// (the connection's name until its cluster is known).
func (r *MinionTemplateReconciler) vaultIdentity(ctx context.Context, conn string) (identity, key string) {
	vc := &v1alpha1.VaultConnection{}
	if err := r.Get(ctx, types.NamespacedName{Name: conn}, vc); err != nil {
		return "", "connection/" + conn
	}
	if vc.Status.ClusterID == "" {
		return vc.Status.Identity, "connection/" + conn
	}
	return vc.Status.Identity, "cluster/" + vc.Status.ClusterID + "/namespace/" + vc.Spec.Namespace
}

// reader reads the policies of the template's Vault (see policyOwners).
func (r *MinionTemplateReconciler) reader(ti *templateIndex) *policyReader {
	return r.owners.reader(r.vaultKeyOf(ti))
}

// vaultKeyOf is the template's key of policy owners (see vaultIdentity).
func (r *MinionTemplateReconciler) vaultKeyOf(ti *templateIndex) string {
	r.index.mu.Lock()
	defer r.index.mu.Unlock()
	return ti.vaultKey
}

func firstN(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(ss[:n:n], fmt.Sprintf("and %d more", len(ss)-n))
}

// reconcileBinding is a delta: one binding's policy documents, rendered
// and counted in or out, and Vault touched for the names whose desired
// state changed.
func (r *MinionTemplateReconciler) reconcileBinding(ctx context.Context, key types.NamespacedName) error {
	b := &v1alpha1.MinionBinding{}
	next := bindingDocs{}
	if err := r.Get(ctx, key, b); err != nil && !apierrors.IsNotFound(err) {
		return err
	} else if err == nil {
		next.template = b.Spec.TemplateRef.Name
		next.member = b.DeletionTimestamp.IsZero()
	}
	var ti *templateIndex
	if next.template != "" {
		ti = r.index.template(next.template)
		ti.scan.RLock()
		defer ti.scan.RUnlock()
		r.index.mu.Lock()
		built := ti.built
		r.index.mu.Unlock()
		if built {
			tpl := &v1alpha1.MinionTemplate{}
			if err := r.Get(ctx, types.NamespacedName{Name: next.template}, tpl); err != nil && !apierrors.IsNotFound(err) {
				return err
			} else if err == nil {
				compiled, err := r.Templates.Compile(ctx, tpl)
				if err == nil {
					if next.docs, err = r.bindingDocs(ctx, tpl, compiled, b); err != nil {
						return err
					}
				}
			}
		}
	}
	touched := r.index.set(key, next)
	for template, names := range touched {
		if err := r.syncNames(ctx, template, names); err != nil {
			return err
		}
	}
	for template := range touched {
		r.requestRefresh(template)
	}
	if next.template != "" {
		r.requestRefresh(next.template) // the binding count
	}
	return nil
}

// syncNames brings the named policies of a template to the index's wanted
// state (written, or deleted when no binding renders them).
func (r *MinionTemplateReconciler) syncNames(ctx context.Context, template string, names []string) error {
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, types.NamespacedName{Name: template}, tpl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !tpl.DeletionTimestamp.IsZero() {
		return nil
	}
	vc, _, err := r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name)
	if err != nil {
		if isWaiting(err) {
			return nil // the template's own reconcile waits for it and scans
		}
		return err
	}
	desired := map[string]string{}
	var stale []string
	for _, n := range names {
		if body, ok := r.index.desiredOf(template, n); ok {
			desired[n] = body
		} else {
			stale = append(stale, n)
		}
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Syncing the policies a binding changed", "template", template, "wanted", len(desired), "stale", len(stale))
	pass, err := syncPolicies(ctx, vc, template, tpl.Spec.AdoptPolicies, desired, stale, r.reader(r.index.template(template)))
	r.index.observe(template, pass)
	r.index.noteDelta(template, pass)
	return err
}

func (r *MinionTemplateReconciler) requestRefresh(template string) {
	if r.refresh != nil {
		r.refresh(template)
	}
}

// bindingDocs renders the policy documents of one binding; bindings the
// binding reconciler refuses (being deleted, namespace not selected, minion
// ID held by another, render errors, guard rails) contribute none.
func (r *MinionTemplateReconciler) bindingDocs(ctx context.Context, tpl *v1alpha1.MinionTemplate, compiled *render.Compiled, b *v1alpha1.MinionBinding) (map[string]string, error) {
	if !b.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	a, err := admit(ctx, r.Client, r.Templates, b)
	if err != nil {
		if _, refused := admission.AsVerdict(err); refused {
			return nil, nil
		}
		return nil, err
	}
	res := a.Result
	return docsOf(res), nil
}

// policyEvents reports what a full scan, or the binding deltas since the
// last reconcile, wrote and deleted (lists made by appendCounted).
func (r *MinionTemplateReconciler) policyEvents(tpl *v1alpha1.MinionTemplate, written, deleted []string) {
	if len(written) > 0 {
		emit(r.Recorder, tpl, "Normal", "PoliciesWritten", "Reconcile", "ACL policies written: %s", strings.Join(written, ", "))
	}
	if len(deleted) > 0 {
		emit(r.Recorder, tpl, "Normal", "PoliciesDeleted", "Reconcile", "ACL policies deleted: %s", strings.Join(deleted, ", "))
	}
}

// finalize deletes every policy whose header names the template (unless
// its deletionPolicy is Retain), then the finalizer. After a start the
// template's policies are found by listing Vault's; none is missed however
// many there are, because none is recorded in status.
func (r *MinionTemplateReconciler) finalize(ctx context.Context, tpl *v1alpha1.MinionTemplate) error {
	if tpl.Spec.EffectiveDeletionPolicy() == v1alpha1.DeletionPolicyDelete {
		vc, _, err := r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name)
		switch {
		case err != nil && isWaiting(err):
			emit(r.Recorder, tpl, "Warning", v1alpha1.DeletionBlockedReason, "Delete", "ACL policies left in Vault: %v", err)
		case err != nil:
			return err
		default:
			ti := r.index.template(tpl.Name)
			ti.scan.Lock()
			_, owned := r.index.snapshot(tpl.Name)
			r.index.mu.Lock()
			discovered := ti.discovered
			r.index.mu.Unlock()
			if !discovered {
				found, err := discoverOwned(ctx, vc, tpl.Name, r.reader(ti), nil)
				if err != nil {
					ti.scan.Unlock()
					return err
				}
				owned = append(owned, found...)
			}
			pass, err := syncPolicies(ctx, vc, tpl.Name, false, nil, owned, r.reader(ti))
			r.index.observe(tpl.Name, pass)
			ti.scan.Unlock()
			if err != nil {
				return err
			}
			if len(pass.deleted) > 0 {
				emit(r.Recorder, tpl, "Normal", "PoliciesDeleted", "Delete", "%d ACL policies deleted", len(pass.deleted))
			}
		}
	}
	base := tpl.DeepCopy()
	if controllerutil.RemoveFinalizer(tpl, v1alpha1.Finalizer) {
		if err := client.IgnoreNotFound(r.Patch(ctx, tpl, client.MergeFrom(base))); err != nil {
			return err
		}
	}
	r.index.forget(tpl.Name)
	return nil
}
