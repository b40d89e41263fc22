package cli

import (
	"context"
	"strings"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// manifestFacts is the admission gate's source in a plan: the manifests
// instead of the cluster, so that plan admits exactly the bindings the
// operator would.
type manifestFacts struct {
	in       *planInput
	compiled map[string]*render.Compiled // by template name
	claims   map[string][]*v1alpha1.MinionBinding
}

func newManifestFacts(in *planInput) *manifestFacts {
	f := &manifestFacts{in: in, compiled: map[string]*render.Compiled{}, claims: map[string][]*v1alpha1.MinionBinding{}}
	for _, b := range in.bindings {
		k := strings.ToLower(b.Spec.MinionID)
		f.claims[k] = append(f.claims[k], b)
	}
	return f
}

func (f *manifestFacts) Template(_ context.Context, name string) (*v1alpha1.MinionTemplate, error) {
	for _, t := range f.in.templates {
		if t.obj.Name == name {
			return t.obj, nil
		}
	}
	return nil, nil
}

// NamespaceLabels are those of the namespace's manifest among the files,
// otherwise the one label every namespace has.
func (f *manifestFacts) NamespaceLabels(_ context.Context, ns string) (map[string]string, error) {
	if lbls, ok := f.in.namespaces[ns]; ok {
		return lbls, nil
	}
	return map[string]string{"kubernetes.io/metadata.name": ns}, nil
}

// Claimants: files have no creation time, so admission.Owner falls back
// to namespace/name order, as the operator does for a tie.
func (f *manifestFacts) Claimants(_ context.Context, minionID string) ([]*v1alpha1.MinionBinding, error) {
	return f.claims[strings.ToLower(minionID)], nil
}

// Compile returns what buildPlan compiled from the files (a template that
// does not compile refuses its bindings before they reach the gate).
func (f *manifestFacts) Compile(_ context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error) {
	if c, ok := f.compiled[tpl.Name]; ok {
		return c, nil
	}
	return nil, &admission.Verdict{Kind: admission.Stalled, Reason: v1alpha1.RenderFailedReason, Message: "template " + tpl.Name + " was not compiled"}
}

// minionIDClaims picks, per minion ID (lower case), the binding that keeps
// it among the manifests (admission.Owner's rule).
func minionIDClaims(bindings []*v1alpha1.MinionBinding) map[string]*v1alpha1.MinionBinding {
	f := newManifestFacts(&planInput{bindings: bindings})
	claims := make(map[string]*v1alpha1.MinionBinding, len(f.claims))
	for k, bs := range f.claims {
		claims[k] = admission.Owner(bs)
	}
	return claims
}

// namespaceSelected applies the template's namespaceSelector to the
// namespace's labels among the manifests (admission.NamespaceAllowed).
func namespaceSelected(tpl *v1alpha1.MinionTemplate, ns string, namespaces map[string]map[string]string) (bool, string) {
	lbls, _ := (&manifestFacts{in: &planInput{namespaces: namespaces}}).NamespaceLabels(context.Background(), ns)
	if v := admission.NamespaceAllowed(tpl, ns, lbls); v != nil {
		return false, v.Message
	}
	return true, ""
}
