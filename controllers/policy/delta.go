package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/clusterfacts"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/internal/admission"
)

// bindingKey is a MinionBinding's key in the policy delta controller's
// queue: its own type, so that no reader wonders which kind a key is.
type bindingKey types.NamespacedName

// policyDeltaReconciler is the policy delta controller: one binding's
// policy documents counted in or out of the index, and Vault touched for
// the names whose desired state changed (and any a failed sync left).
type policyDeltaReconciler struct {
	*Reconciler
}

// Reconcile leaves a failed sync's names dirty and wakes the template's
// own reconcile, which retries them with one backoff for the template:
// were the error returned here, every binding of the template would retry
// the same shared policies on a backoff of its own, and a fault would cost
// Vault one retry per binding instead of one per template.
func (d policyDeltaReconciler) Reconcile(ctx context.Context, key bindingKey) (ctrl.Result, error) {
	d.init()
	return ctrl.Result{}, d.reconcileDelta(ctx, types.NamespacedName(key))
}

func (r *Reconciler) reconcileDelta(ctx context.Context, key types.NamespacedName) error {
	b := &v1alpha1.MinionBinding{}
	if err := r.Get(ctx, key, b); apierrors.IsNotFound(err) {
		b = nil
	} else if err != nil {
		return fmt.Errorf("reading MinionBinding %s: %w", key, err)
	}
	template, touched, err := r.countIn(ctx, key, b)
	if err != nil {
		return err
	}
	// The binding's template is synced even when nothing changed: this may
	// be the retry of a failed sync, whose names are still dirty.
	templates := slices.Collect(maps.Keys(touched))
	if template != "" && touched[template] == nil {
		templates = append(templates, template)
	}
	for template, names := range touched {
		if len(names) > 0 {
			// The template's status is looked at before Vault is: a sync
			// that hangs must not leave a Ready that no longer holds.
			r.requestRefresh(template)
		}
	}
	for _, template := range templates {
		if err := r.syncTemplate(ctx, template); err != nil {
			ctrl.LoggerFrom(ctx).Info("Policy sync failed; the template's reconcile retries it",
				"template", template, "error", err.Error())
		}
		r.requestRefresh(template) // the retry, the status, and the binding count
	}
	if b == nil {
		// The dirty names are the template's: the binding's record of its
		// template is no longer needed.
		r.index.set(key, bindingPolicies{})
	}
	return nil
}

// countIn replaces the binding's contribution in the index, rendered if
// its template was scanned already, with the template's full scan held off
// meanwhile; it returns the binding's template and the names that changed
// per template. A binding that is gone (b nil) is counted out, and its
// template kept until a sync succeeded, so that the retry of a failed one
// knows which template to sync.
func (r *Reconciler) countIn(ctx context.Context, key types.NamespacedName, b *v1alpha1.MinionBinding) (string, map[string][]string, error) {
	if b == nil {
		template := r.index.templateOf(key)
		return template, r.index.set(key, bindingPolicies{template: template}), nil
	}
	next := bindingPolicies{template: b.Spec.TemplateRef.Name, member: b.DeletionTimestamp.IsZero()}
	defer r.index.holdForDelta(next.template)()
	if r.index.built(next.template) {
		if broken, err := r.templateBroken(ctx, next.template); err != nil {
			return "", nil, err
		} else if broken {
			// The template's own reconcile reports it; its next scan, once
			// it compiles, renders every binding again. Until then what
			// the binding rendered before stays wanted.
			return next.template, nil, nil
		}
		var err error
		if next.docs, err = r.policiesOfBinding(ctx, b); err != nil {
			return "", nil, err
		}
	}
	return next.template, r.index.set(key, next), nil
}

// templateBroken reports whether the template exists and does not
// compile (a problem of its own, or a ConfigMap it waits for).
func (r *Reconciler) templateBroken(ctx context.Context, name string) (bool, error) {
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading MinionTemplate %q: %w", name, err)
	}
	_, err := r.compile(ctx, tpl)
	if _, refused := admission.AsVerdict(err); refused {
		return true, nil
	}
	return false, err
}

// syncTemplate syncs the dirty names of a template a delta touched. A
// connection that is not ready leaves them dirty for the template's own
// reconcile, which waits for it.
func (r *Reconciler) syncTemplate(ctx context.Context, template string) error {
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, types.NamespacedName{Name: template}, tpl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !tpl.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.retryDirty(ctx, tpl); err != nil && !outcome.IsWaiting(err) {
		return err
	}
	return nil
}

// policiesOfBinding renders the policy documents of one binding. Only a
// binding that holds its minion in Vault contributes (holdsInVault):
// bindings the admission gate refuses (namespace not selected, minion ID
// held by another, render errors, guard rails), bindings Vault refused
// (the minion is another binding's, or another cluster's) or that have not
// written their minion yet, and bindings being deleted contribute none.
func (r *Reconciler) policiesOfBinding(ctx context.Context, b *v1alpha1.MinionBinding) (map[string]string, error) {
	if !b.DeletionTimestamp.IsZero() || !holdsInVault(b) {
		return nil, nil
	}
	a, err := clusterfacts.Admit(ctx, r.Client, r.Templates, b)
	if _, refused := admission.AsVerdict(err); refused || a.Ahead != nil {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("admitting MinionBinding %s/%s: %w", b.Namespace, b.Name, err)
	}
	return docsOf(a.Result), nil
}

// holdsInVault reports whether the binding's own reconcile wrote its
// minion's objects (status, which only the operator writes, names its
// role) and Vault has not refused it since. A template writes the ACL
// policies of such bindings only: one whose minion is another binding's
// (of this cluster or another on the same Vault) must neither write a
// policy for that minion nor, when it goes, delete one the holder uses.
func holdsInVault(b *v1alpha1.MinionBinding) bool {
	if !admission.Holds(b) {
		return false
	}
	switch c := outcome.ReadyOf(b); {
	case c == nil:
		return true
	case c.Reason == v1alpha1.MinionIDConflictReason, c.Reason == v1alpha1.NotOwnedReason,
		c.Reason == v1alpha1.DuplicateMinionIDReason, c.Reason == v1alpha1.MinionIDReleasingReason, c.Reason == v1alpha1.MinionIDRetainedReason,
		c.Reason == v1alpha1.MinionIDLostReason:
		return false
	}
	return true
}
