// Package admission is the one gate a MinionBinding passes before anything
// of it reaches Vault: its template exists, the template lets its
// namespace bind, it holds its minion ID, and it renders and validates.
// The binding reconciler, the template reconciler (which renders the
// policy documents of admitted bindings only), `minionvault plan` and
// `minionvault audit` all call Admit, so they cannot disagree about who is
// admitted.
//
// The checks run in a fixed order, each a small function returning a
// verdict (cert-manager's policy chains): the first verdict wins. Where the
// facts come from is a Source: the informer cache in the operator, the
// manifests in the CLI (internal/manifest.Facts).
package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Kind is what a refused binding does next.
type Kind int

const (
	// Stalled: the input can never succeed; nothing is retried until the
	// binding, its template or its namespace changes.
	Stalled Kind = iota + 1
	// Waiting: something has to appear or go away first; look again later.
	Waiting
)

// Verdict is a refusal: the binding is not admitted, for Reason (a
// condition reason of the API) and Message (for people).
type Verdict struct {
	Kind    Kind
	Reason  string
	Message string
}

func (v *Verdict) Error() string { return v.Message }

func stall(reason, format string, args ...any) *Verdict {
	return &Verdict{Kind: Stalled, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func wait(reason, format string, args ...any) *Verdict {
	return &Verdict{Kind: Waiting, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// AsVerdict returns the verdict in err's chain, if any.
func AsVerdict(err error) (*Verdict, bool) {
	var v *Verdict
	ok := errors.As(err, &v)
	return v, ok
}

// Source supplies the facts. An error that is not a *Verdict is the
// source's own failure (the API server unreachable): the caller retries.
type Source interface {
	// Template returns the named MinionTemplate, or nil when none exists
	// (or the TemplateNotFound *Verdict, saying where it looked).
	Template(ctx context.Context, name string) (*v1alpha1.MinionTemplate, error)
	// NamespaceLabels returns the labels of a namespace.
	NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error)
	// Claimants returns every binding whose minion ID equals id, ignoring
	// case (the binding itself included).
	Claimants(ctx context.Context, minionID string) ([]*v1alpha1.MinionBinding, error)
	// Compile compiles a template. A problem of the template or of its
	// parameter files is returned as a *Verdict (Stalled, or Waiting for
	// a ConfigMap to appear).
	Compile(ctx context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error)
}

// Admitted is a binding that passed: its template, the compiled template
// and what the binding renders to, and the other bindings that claim its
// minion ID.
type Admitted struct {
	Template *v1alpha1.MinionTemplate
	Compiled *render.Compiled
	Result   *render.Result
	// Ahead is the claimant that comes first in the claim order when it is
	// not this binding and has not written the minion's objects yet. The
	// cluster cannot tell then whose the minion is; Vault can: this
	// binding may only keep or take back objects Vault proves its own (the
	// binding they were written for, created again by a restore, comes
	// back before any claimant that waited). Callers that do not read
	// Vault treat the binding as refused.
	Ahead *v1alpha1.MinionBinding
	// Rivals are the other bindings that claim the minion ID.
	Rivals []*v1alpha1.MinionBinding
}

func duplicate(owner *v1alpha1.MinionBinding) *Verdict {
	return stall(v1alpha1.DuplicateMinionIDReason, "minion ID %q is already bound by MinionBinding %s/%s", owner.Spec.MinionID, owner.Namespace, owner.Name)
}

// check is one step of the chain. It reads and fills in a; a non-nil
// error ends the chain (a *Verdict, or the source's failure).
type check func(ctx context.Context, src Source, b *v1alpha1.MinionBinding, a *Admitted) error

// chain is the order of the checks: cheap lookups before the render, and
// the minion-ID claim before anything that could write.
var chain = []check{templateExists, namespaceSelected, holdsMinionID, compiles, renders}

// Admit runs the chain for b.
func Admit(ctx context.Context, src Source, b *v1alpha1.MinionBinding) (*Admitted, error) {
	a := &Admitted{}
	for _, c := range chain {
		if err := c(ctx, src, b, a); err != nil {
			return a, err
		}
	}
	return a, nil
}

func templateExists(ctx context.Context, src Source, b *v1alpha1.MinionBinding, a *Admitted) error {
	tpl, err := src.Template(ctx, b.Spec.TemplateRef.Name)
	if err != nil {
		return err
	}
	if tpl == nil {
		return wait(v1alpha1.TemplateNotFoundReason, "MinionTemplate %q does not exist", b.Spec.TemplateRef.Name)
	}
	a.Template = tpl
	return nil
}

// NamespaceJudge is a Source that applies the namespaceSelector itself,
// to remember its verdicts: the manifests of a fleet are thousands of
// bindings in a few namespaces (the CLI's audit), while the operator's
// bindings come one at a time.
type NamespaceJudge interface {
	// NamespaceVerdict is NamespaceAllowed for namespace ns.
	NamespaceVerdict(ctx context.Context, tpl *v1alpha1.MinionTemplate, ns string) (*Verdict, error)
}

func namespaceSelected(ctx context.Context, src Source, b *v1alpha1.MinionBinding, a *Admitted) error {
	if a.Template.Spec.NamespaceSelector == nil {
		return nil
	}
	if j, ok := src.(NamespaceJudge); ok {
		v, err := j.NamespaceVerdict(ctx, a.Template, b.Namespace)
		if err != nil {
			return err
		}
		if v != nil {
			return v
		}
		return nil
	}
	lbls, err := src.NamespaceLabels(ctx, b.Namespace)
	if err != nil {
		return err
	}
	if v := NamespaceAllowed(a.Template, b.Namespace, lbls); v != nil {
		return v
	}
	return nil
}

// NamespaceAllowed applies the template's namespaceSelector to the labels
// of namespace ns: nil when the template lets it bind.
func NamespaceAllowed(tpl *v1alpha1.MinionTemplate, ns string, lbls map[string]string) *Verdict {
	if tpl.Spec.NamespaceSelector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(tpl.Spec.NamespaceSelector)
	if err != nil {
		return stall(v1alpha1.NamespaceNotAllowedReason, "template %q has an invalid namespaceSelector: %v", tpl.Name, err)
	}
	if !sel.Matches(labels.Set(lbls)) {
		return stall(v1alpha1.NamespaceNotAllowedReason, "namespace %q is not selected by MinionTemplate %q (namespaceSelector %s)", ns, tpl.Name, sel)
	}
	return nil
}

func holdsMinionID(ctx context.Context, src Source, b *v1alpha1.MinionBinding, a *Admitted) error {
	claimants, err := src.Claimants(ctx, b.Spec.MinionID)
	if err != nil {
		return err
	}
	for _, c := range claimants {
		if !sameBinding(c, b) {
			a.Rivals = append(a.Rivals, c)
		}
	}
	owner := Owner(claimants)
	switch {
	case owner == nil || sameBinding(owner, b):
		return nil
	case !owner.DeletionTimestamp.IsZero():
		// Its finalizer is removing the minion's objects: starting now
		// would interleave two bindings' writes to one role. Its deletion
		// wakes this binding.
		return wait(v1alpha1.MinionIDReleasingReason, "minion ID %q is being released by MinionBinding %s/%s, which is being deleted",
			b.Spec.MinionID, owner.Namespace, owner.Name)
	case Holds(owner):
		return duplicate(owner)
	}
	a.Ahead = owner
	return nil
}

func compiles(ctx context.Context, src Source, _ *v1alpha1.MinionBinding, a *Admitted) error {
	c, err := src.Compile(ctx, a.Template)
	if err != nil {
		return err
	}
	a.Compiled = c
	return nil
}

// Renderer is a Source that renders bindings itself: the operator's
// controllers share one render of each binding generation between them.
type Renderer interface {
	// Render renders b with compiled and validates the result; err is a
	// binding that cannot be converted or rendered.
	Render(compiled *render.Compiled, b *v1alpha1.MinionBinding) (*render.Result, []render.Violation, error)
}

func renders(_ context.Context, src Source, b *v1alpha1.MinionBinding, a *Admitted) error {
	do := Render
	if r, ok := src.(Renderer); ok {
		do = r.Render
	}
	res, vs, err := do(a.Compiled, b)
	if err != nil {
		return stall(v1alpha1.RenderFailedReason, "%v", err)
	}
	a.Result = res
	if len(vs) > 0 {
		return stall(ViolationReason(vs), "%s", ViolationMessage(vs))
	}
	return nil
}

// Render renders b with compiled and validates the result.
func Render(compiled *render.Compiled, b *v1alpha1.MinionBinding) (*render.Result, []render.Violation, error) {
	rb, err := convert.Binding(&b.Spec)
	if err != nil {
		return nil, nil, err
	}
	res, err := compiled.Render(rb, render.Options{})
	if err != nil {
		return nil, nil, err
	}
	return res, compiled.Validate(res), nil
}

// Owner returns the binding that keeps a minion ID among its claimants: a
// binding that holds it (the operator recorded its role in status) keeps
// it; otherwise the oldest claim wins (creation time, then
// namespace/name), so the answer is the same whichever binding asks. A
// binding being deleted keeps its claim until it is gone: its finalizer is
// still removing the minion's objects.
func Owner(claimants []*v1alpha1.MinionBinding) *v1alpha1.MinionBinding {
	var owner *v1alpha1.MinionBinding
	for _, b := range claimants {
		if owner == nil || claimsBefore(b, owner) {
			owner = b
		}
	}
	return owner
}

func claimsBefore(a, b *v1alpha1.MinionBinding) bool {
	// Creation times have a resolution of one second: without this, a
	// binding created in the same second with a name sorting first would
	// take over from one that has written Vault already.
	if ha, hb := Holds(a), Holds(b); ha != hb {
		return ha
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// Holds reports whether the operator recorded, in status (which a tenant
// cannot write), that the binding wrote its minion's role. A finalizer
// says nothing: a tenant can set it by hand.
func Holds(b *v1alpha1.MinionBinding) bool {
	return b.Status.AppRole != nil && b.Status.AppRole.RoleID != ""
}

func sameBinding(a, b *v1alpha1.MinionBinding) bool {
	return a.UID == b.UID && a.Namespace == b.Namespace && a.Name == b.Name
}

// ViolationReason is the condition reason for a binding refused with vs:
// the first violation's, mapped onto the API's reasons.
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
