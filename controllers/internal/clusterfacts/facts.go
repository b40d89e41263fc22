// Package clusterfacts is the admission gate's source of facts in the
// operator: templates, namespaces and claimants from the informer cache
// (Facts, facts.go), and the caches of compiled templates and rendered
// bindings that the binding and template controllers read through it
// (templates.go, render_cache.go). Admit runs the gate with it.
package clusterfacts

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Facts is the admission gate's source in the operator: the
// informer cache, and the shared cache of compiled templates.
type Facts struct {
	reader    client.Reader
	templates *Templates
}

// New is the gate's source of facts against the cluster.
func New(reader client.Reader, templates *Templates) Facts {
	return Facts{reader: reader, templates: templates}
}

var _ admission.Source = Facts{}

func (f Facts) Template(ctx context.Context, name string) (*v1alpha1.MinionTemplate, error) {
	tpl := &v1alpha1.MinionTemplate{}
	if err := f.reader.Get(ctx, types.NamespacedName{Name: name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return tpl, nil
}

func (f Facts) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	n := &corev1.Namespace{}
	if err := f.reader.Get(ctx, types.NamespacedName{Name: namespace}, n); err != nil {
		return nil, err
	}
	return n.Labels, nil
}

func (f Facts) Claimants(ctx context.Context, minionID string) ([]*v1alpha1.MinionBinding, error) {
	list := &v1alpha1.MinionBindingList{}
	if err := f.reader.List(ctx, list, client.MatchingFields{watch.MinionIDIndex: watch.MinionIDKey(minionID)}); err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.MinionBinding, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Compile sorts Templates.Compile's errors for the gate: a missing
// ConfigMap is waited for, an API error retried, anything else is the
// template's own problem.
func (f Facts) Compile(ctx context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error) {
	c, err := f.templates.Compile(ctx, tpl)
	var missing *errMissingConfigMap
	switch {
	case err == nil:
		return c, nil
	case errors.As(err, &missing):
		return nil, &admission.Verdict{Kind: admission.Waiting, Reason: v1alpha1.RenderFailedReason, Message: err.Error()}
	case outcome.IsAPIError(err):
		return nil, err
	}
	return nil, &admission.Verdict{Kind: admission.Stalled, Reason: v1alpha1.RenderFailedReason, Message: fmt.Sprintf("template %q: %v", tpl.Name, err)}
}

// Render renders through the process's shared renders (admission.Renderer).
func (f Facts) Render(compiled *render.Compiled, b *v1alpha1.MinionBinding) (*render.Result, []render.Violation, error) {
	var renders *Renders
	if f.templates != nil {
		renders = f.templates.Renders
	}
	return renders.Render(compiled, b)
}

// Admit runs the admission gate for a binding against the cluster.
func Admit(ctx context.Context, reader client.Reader, templates *Templates, b *v1alpha1.MinionBinding) (*admission.Admitted, error) {
	return admission.Admit(ctx, Facts{reader: reader, templates: templates}, b)
}
