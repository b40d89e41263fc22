package controllers

import (
	"context"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// MinionTemplateReconciler writes the ACL policies a template's bindings
// render (each concrete policy once, with an ownership header), deletes
// those no binding renders any more, and refuses to overwrite policies it
// does not own.
type MinionTemplateReconciler struct {
	client.Client
	Recorder        events.EventRecorder
	Connections     *Connections
	Templates       *Templates
	Bindings        *MinionBindingReconciler // for the binding checks it shares
	DefaultInterval time.Duration
}

// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates/status,verbs=patch
// +kubebuilder:rbac:groups=minionvault.dev,resources=miniontemplates/finalizers,verbs=update

func (r *MinionTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, req.NamespacedName, tpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := tpl.DeepCopy()
	var o outcome
	before := readyCondition(tpl)
	defer func() {
		if retErr != nil && (o.kind == outcomeReady) {
			o = outcome{kind: outcomeFailed, reason: unavailableReason(retErr), message: retErr.Error()}
		}
		tpl.Status.ObservedGeneration = tpl.Generation
		if v := tpl.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]; v != "" {
			tpl.Status.LastHandledReconcileAt = v
		}
		setConditions(tpl, o)
		if err := r.Status().Patch(ctx, tpl, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
		if after := readyCondition(tpl); after != nil && after.Status != metav1.ConditionTrue &&
			(before == nil || before.Reason != after.Reason || before.Message != after.Message) {
			emit(r.Recorder, tpl, "Warning", after.Reason, "Reconcile", "%s", after.Message)
		}
		if o.kind == outcomeStalled {
			result, retErr = ctrl.Result{}, nil
		} else if retErr == nil && o.kind == outcomeReady {
			result.RequeueAfter = jitter(templateInterval(tpl, r.DefaultInterval))
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
	if controllerutil.AddFinalizer(tpl, v1alpha1.Finalizer) {
		if err := r.Patch(ctx, tpl, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, err
		}
		base = tpl.DeepCopy()
	}
	if tpl.Status.ObservedGeneration != tpl.Generation {
		markProgressing(tpl)
		if err := r.Status().Patch(ctx, tpl, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, err
		}
		base = tpl.DeepCopy()
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
		o = outcome{kind: outcomeStalled, reason: ViolationReason(ps), message: ViolationMessage(ps)}
		return ctrl.Result{}, nil
	}
	desired, count, conflict, err := r.desiredPolicies(ctx, tpl, compiled)
	if err != nil {
		return ctrl.Result{}, err
	}
	tpl.Status.Bindings = int32(count)
	if conflict != "" {
		o = outcome{kind: outcomeStalled, reason: v1alpha1.ValidationFailedReason, message: conflict}
		return ctrl.Result{}, nil
	}
	if len(desired) == 0 && len(tpl.Status.ManagedPolicies) == 0 {
		o = outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason, message: fmt.Sprintf("%d bindings, no policy documents", count)}
		return ctrl.Result{}, nil
	}
	vc, _, err := r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name)
	if err != nil {
		if isWaiting(err) {
			o = outcome{kind: outcomeWaiting, reason: v1alpha1.ConnectionNotReadyReason, message: err.Error()}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	notOwned, err := r.applyPolicies(ctx, vc, tpl, desired)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(notOwned) > 0 {
		o = outcome{kind: outcomeStalled, reason: v1alpha1.PolicyNotOwnedReason,
			message: fmt.Sprintf("ACL policies exist in Vault and were not written by this template (set adoptPolicies to take them over): %s", strings.Join(notOwned, ", "))}
		return ctrl.Result{}, nil
	}
	o = outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason, message: fmt.Sprintf("%d bindings, %d ACL policies", count, len(desired))}
	return ctrl.Result{}, nil
}

// desiredPolicies renders every binding of the template and collects the
// policy documents. Bindings the binding reconciler refuses (namespace not
// selected, violations, duplicate minion ID) contribute nothing. Two
// bindings rendering different bodies for one name is a template error.
func (r *MinionTemplateReconciler) desiredPolicies(ctx context.Context, tpl *v1alpha1.MinionTemplate, compiled *render.Compiled) (map[string]string, int, string, error) {
	list := &v1alpha1.MinionBindingList{}
	if err := r.List(ctx, list, client.MatchingFields{templateRefIndex: tpl.Name}); err != nil {
		return nil, 0, "", err
	}
	var rendered []RenderedBinding
	for i := range list.Items {
		b := &list.Items[i]
		if !b.DeletionTimestamp.IsZero() {
			continue
		}
		if ok, _, err := r.Bindings.namespaceSelected(ctx, tpl, b.Namespace); err != nil {
			return nil, 0, "", err
		} else if !ok {
			continue
		}
		if owner, err := r.Bindings.minionIDOwner(ctx, b); err != nil {
			return nil, 0, "", err
		} else if owner != nil {
			continue
		}
		rb, err := convert.Binding(&b.Spec)
		if err != nil {
			continue
		}
		res, err := compiled.Render(rb, render.Options{})
		if err != nil || len(compiled.Validate(res)) > 0 {
			continue
		}
		rendered = append(rendered, RenderedBinding{Name: b.Namespace + "/" + b.Name, Result: res})
	}
	desired, conflict := CollectPolicies(rendered)
	return desired, len(list.Items), conflict, nil
}

// applyPolicies writes what differs, deletes what the operator owns and no
// binding renders, and returns the policies it refused to take over.
func (r *MinionTemplateReconciler) applyPolicies(ctx context.Context, vc vault.Client, tpl *v1alpha1.MinionTemplate, desired map[string]string) ([]string, error) {
	log := ctrl.LoggerFrom(ctx)
	header := ownershipHeader(tpl.Name)
	var notOwned, managed, written []string
	names := make([]string, 0, len(desired))
	for n := range desired {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := header + desired[name]
		actual, found, err := vc.ReadPolicy(ctx, name)
		if err != nil {
			return nil, err
		}
		if found {
			owner, ours := policyOwner(actual)
			if (!ours || owner != tpl.Name) && !tpl.Spec.AdoptPolicies {
				notOwned = append(notOwned, name)
				continue
			}
			if !policyDiffers(want, actual) {
				managed = append(managed, name)
				continue
			}
		}
		log.Info("Writing ACL policy", "policy", name)
		if err := vc.WritePolicy(ctx, name, want); err != nil {
			return nil, err
		}
		managed = append(managed, name)
		written = append(written, name)
	}
	var deleted []string
	for _, name := range tpl.Status.ManagedPolicies {
		if _, ok := desired[name]; ok {
			continue
		}
		actual, found, err := vc.ReadPolicy(ctx, name)
		if err != nil {
			return nil, err
		}
		if owner, ours := policyOwner(actual); found && ours && owner == tpl.Name {
			log.Info("Deleting ACL policy no binding renders", "policy", name)
			if err := vc.DeletePolicy(ctx, name); err != nil {
				return nil, err
			}
			deleted = append(deleted, name)
		}
	}
	slices.Sort(managed)
	tpl.Status.ManagedPolicies = managed
	if len(written) > 0 {
		emit(r.Recorder, tpl, "Normal", "PoliciesWritten", "Reconcile", "ACL policies written: %s", strings.Join(written, ", "))
	}
	if len(deleted) > 0 {
		emit(r.Recorder, tpl, "Normal", "PoliciesDeleted", "Reconcile", "ACL policies deleted: %s", strings.Join(deleted, ", "))
	}
	return notOwned, nil
}

func (r *MinionTemplateReconciler) finalize(ctx context.Context, tpl *v1alpha1.MinionTemplate) error {
	if len(tpl.Status.ManagedPolicies) > 0 && tpl.Spec.EffectiveDeletionPolicy() == v1alpha1.DeletionPolicyDelete {
		vc, _, err := r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name)
		switch {
		case err != nil && isWaiting(err):
			emit(r.Recorder, tpl, "Warning", v1alpha1.DeletionBlockedReason, "Delete", "ACL policies left in Vault: %v", err)
		case err != nil:
			return err
		default:
			for _, name := range tpl.Status.ManagedPolicies {
				actual, found, err := vc.ReadPolicy(ctx, name)
				if err != nil {
					return err
				}
				if owner, ours := policyOwner(actual); found && ours && owner == tpl.Name {
					if err := vc.DeletePolicy(ctx, name); err != nil {
						return err
					}
				}
			}
		}
	}
	base := tpl.DeepCopy()
	if controllerutil.RemoveFinalizer(tpl, v1alpha1.Finalizer) {
		return client.IgnoreNotFound(r.Patch(ctx, tpl, client.MergeFrom(base)))
	}
	return nil
}

// SetupWithManager watches templates and their bindings.
func (r *MinionTemplateReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.MinionTemplate{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&v1alpha1.MinionBinding{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*v1alpha1.MinionBinding).Spec.TemplateRef.Name}}}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var out []reconcile.Request
			for _, name := range templatesUsingConfigMap(ctx, r.Client, o) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
			}
			return out
		})).
		WithOptions(opts).
		Named("miniontemplate").
		Complete(r)
}
