package manifest

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Facts is the admission gate's source over manifests instead of the
// cluster, so that `minionvault plan` and `minionvault audit` admit exactly
// the bindings the operator would, and refuse only through the gate: a
// template not among the manifests, or one that does not compile, is the
// gate's verdict. Not safe for concurrent use.
type Facts struct {
	m        *Set
	cache    *Cache
	compiled map[string]compiled // by template name, once compiled
	// claims keeps of each binding only what the claim order reads, not
	// the binding: audit lets a binding go once admitted (10,000 bindings
	// are megabytes), while the claims must last until the last one.
	claims map[string][]claim // by lower-case minion ID
	// verdicts remembers the namespaceSelector's verdicts by template and
	// namespace: a fleet is thousands of bindings in a few namespaces
	// (admission.NamespaceJudge).
	verdicts map[verdictKey]*admission.Verdict
}

// claim is what admission.Owner and the gate's messages read of a
// claimant.
type claim struct {
	namespace, name, minionID string
	uid                       types.UID
	created                   metav1.Time
	deleting                  *metav1.Time
	appRole                   *v1alpha1.AppRoleStatus
}

type verdictKey struct{ template, namespace string }

// compiled is a template compiled, or why it does not compile.
type compiled struct {
	c   *render.Compiled
	err error
}

// TemplateError is why a template among the manifests does not compile:
// the gate's verdict (Stalled, RenderFailed, in the operator's words), and
// Err, the template's own error, which the commands also say of the
// template itself.
type TemplateError struct {
	Verdict *admission.Verdict
	Err     error
}

func (e *TemplateError) Error() string { return e.Verdict.Message }

// Unwrap is the verdict: admission.AsVerdict finds it.
func (e *TemplateError) Unwrap() error { return e.Verdict }

// NewFacts is the gate's source over m. Bindings are converted through
// cache (nil: each one anew), which audit diff shares between its sides.
func NewFacts(m *Set, cache *Cache) *Facts {
	f := &Facts{m: m, cache: cache, compiled: map[string]compiled{}, claims: map[string][]claim{},
		verdicts: map[verdictKey]*admission.Verdict{}}
	for _, b := range m.Bindings {
		k := strings.ToLower(b.Spec.MinionID)
		f.claims[k] = append(f.claims[k], claim{namespace: b.Namespace, name: b.Name, minionID: b.Spec.MinionID, uid: b.UID,
			created: b.CreationTimestamp, deleting: b.DeletionTimestamp, appRole: b.Status.AppRole})
	}
	return f
}

// Template is the MinionTemplate of that name among the manifests; when
// there is none, the gate's TemplateNotFound (the operator would wait for
// it), saying where it was looked for.
func (f *Facts) Template(_ context.Context, name string) (*v1alpha1.MinionTemplate, error) {
	if t := f.template(name); t != nil {
		return t.Obj, nil
	}
	return nil, &admission.Verdict{Kind: admission.Waiting, Reason: v1alpha1.TemplateNotFoundReason,
		Message: fmt.Sprintf("MinionTemplate %q is not among the manifests", name)}
}

func (f *Facts) template(name string) *Template { return f.m.Template(name) }

// NamespaceLabels are those of the namespace's manifest among the files,
// otherwise the one label every namespace has.
func (f *Facts) NamespaceLabels(_ context.Context, ns string) (map[string]string, error) {
	if lbls, ok := f.m.Namespaces[ns]; ok {
		return lbls, nil
	}
	return map[string]string{"kubernetes.io/metadata.name": ns}, nil
}

// NamespaceVerdict is admission.NamespaceAllowed, applied once per
// template and namespace.
func (f *Facts) NamespaceVerdict(ctx context.Context, tpl *v1alpha1.MinionTemplate, ns string) (*admission.Verdict, error) {
	k := verdictKey{tpl.Name, ns}
	if v, ok := f.verdicts[k]; ok {
		return v, nil
	}
	lbls, err := f.NamespaceLabels(ctx, ns)
	if err != nil {
		return nil, err
	}
	v := admission.NamespaceAllowed(tpl, ns, lbls)
	f.verdicts[k] = v
	return v, nil
}

// Claimants: files have no creation time, so admission.Owner falls back
// to namespace/name order, as the operator does for a tie. Each is a copy
// holding what the claim order reads.
func (f *Facts) Claimants(_ context.Context, minionID string) ([]*v1alpha1.MinionBinding, error) {
	cs := f.claims[strings.ToLower(minionID)]
	out := make([]*v1alpha1.MinionBinding, len(cs))
	for i, c := range cs {
		b := &v1alpha1.MinionBinding{}
		b.Namespace, b.Name, b.UID = c.namespace, c.name, c.uid
		b.CreationTimestamp, b.DeletionTimestamp = c.created, c.deleting
		b.Spec.MinionID = c.minionID
		b.Status.AppRole = c.appRole
		out[i] = b
	}
	return out, nil
}

// Compile compiles the template with the ConfigMaps among the manifests,
// once per template. A template that does not compile is a
// *TemplateError: Stalled, RenderFailed, with the operator's message
// (a ConfigMap missing among the files included: the files are all
// there is).
func (f *Facts) Compile(_ context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error) {
	if c, ok := f.compiled[tpl.Name]; ok {
		return c.c, c.err
	}
	var order map[string][]string
	if t := f.template(tpl.Name); t != nil {
		order = t.Doc.MetadataOrder()
	}
	var c compiled
	if rt, err := convert.Template(tpl.Name, &tpl.Spec, f.m.ConfigMaps, order); err != nil {
		c.err = &TemplateError{Err: err, Verdict: &admission.Verdict{Kind: admission.Stalled, Reason: v1alpha1.RenderFailedReason,
			Message: fmt.Sprintf("template %q: %v", tpl.Name, err)}}
	} else {
		c.c = render.Compile(rt)
	}
	f.compiled[tpl.Name] = c
	return c.c, c.err
}

// Render is admission.Render with the binding converted through the
// cache (admission.Renderer).
func (f *Facts) Render(compiled *render.Compiled, b *v1alpha1.MinionBinding) (*render.Result, []render.Violation, error) {
	rb, err := f.cache.Binding(b)
	if err != nil {
		return nil, nil, err
	}
	res, err := compiled.Render(rb, render.Options{})
	if err != nil {
		return nil, nil, err
	}
	return res, compiled.Validate(res), nil
}
