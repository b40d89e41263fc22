package offline

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Facts is the admission gate's source over manifests instead of the
// cluster, so that `minionvault plan` and `minionvault audit` admit exactly
// the bindings the operator would. The caller compiles the templates
// (SetCompiled): a template that does not compile refuses its bindings
// before they reach the gate. Not safe for concurrent use.
type Facts struct {
	m        *Manifests
	cache    *ManifestCache
	compiled map[string]*render.Compiled // by template name
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

// NewFacts is the gate's source over m. Bindings are converted through
// cache (nil: each one anew), which audit diff shares between its sides.
func NewFacts(m *Manifests, cache *ManifestCache) *Facts {
	f := &Facts{m: m, cache: cache, compiled: map[string]*render.Compiled{}, claims: map[string][]claim{},
		verdicts: map[verdictKey]*admission.Verdict{}}
	for _, b := range m.Bindings {
		k := strings.ToLower(b.Spec.MinionID)
		f.claims[k] = append(f.claims[k], claim{namespace: b.Namespace, name: b.Name, minionID: b.Spec.MinionID, uid: b.UID,
			created: b.CreationTimestamp, deleting: b.DeletionTimestamp, appRole: b.Status.AppRole})
	}
	return f
}

// SetCompiled records the compiled template of that name.
func (f *Facts) SetCompiled(template string, c *render.Compiled) { f.compiled[template] = c }

// Template is the MinionTemplate of that name among the manifests.
func (f *Facts) Template(_ context.Context, name string) (*v1alpha1.MinionTemplate, error) {
	for _, t := range f.m.Templates {
		if t.Obj.Name == name {
			return t.Obj, nil
		}
	}
	return nil, nil
}

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

// Compile returns what the caller compiled (SetCompiled).
func (f *Facts) Compile(_ context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error) {
	if c, ok := f.compiled[tpl.Name]; ok {
		return c, nil
	}
	return nil, &admission.Verdict{Kind: admission.Stalled, Reason: v1alpha1.RenderFailedReason, Message: "template " + tpl.Name + " was not compiled"}
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
