// Package convert turns the API types into the pure core's inputs. The
// controller and the CLI share it, so both render the same thing.
package convert

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// ConfigMapData returns the data of a ConfigMap, for parameter files kept
// in ConfigMaps.
type ConfigMapData func(namespace, name string) (map[string]string, error)

// Template converts a MinionTemplate spec. metadataOrder, when given, is the
// key order of metadata.entity and metadata.secret as written (API objects
// carry them as maps); otherwise keys are sorted.
func Template(name string, spec *v1alpha1.MinionTemplateSpec, configMaps ConfigMapData, metadataOrder map[string][]string) (render.Template, error) {
	t := render.Template{
		Name:              name,
		PillarPaths:       slices.Clone(spec.PillarPaths),
		EntityName:        spec.EntityName,
		TrustMinionGrains: spec.TrustMinionGrains,
	}
	if t.PillarPaths == nil {
		t.PillarPaths = []string{}
	}
	if spec.Policies != nil {
		t.Policies = slices.Clone(spec.Policies.Assign)
		if t.Policies == nil {
			t.Policies = []string{}
		}
	}
	if spec.AllowedPolicies != nil {
		t.AllowedPolicies = slices.Clone(spec.AllowedPolicies)
	}
	if m := spec.Metadata; m != nil {
		t.EntityMetadata = orderedKV(m.Entity, metadataOrder["entity"])
		t.SecretMetadata = orderedKV(m.Secret, metadataOrder["secret"])
	}
	if a := spec.AppRole; a != nil {
		t.AppRole = render.AppRole{
			Mount:               a.Mount,
			BindSecretID:        a.BindSecretID,
			SecretIDNumUses:     a.SecretIDNumUses,
			SecretIDTTL:         duration(a.SecretIDTTL),
			SecretIDBoundCIDRs:  a.SecretIDBoundCIDRs,
			TokenTTL:            duration(a.TokenTTL),
			TokenMaxTTL:         duration(a.TokenMaxTTL),
			TokenExplicitMaxTTL: duration(a.TokenExplicitMaxTTL),
			TokenPeriod:         duration(a.TokenPeriod),
			TokenNumUses:        a.TokenNumUses,
			TokenBoundCIDRs:     a.TokenBoundCIDRs,
			TokenType:           string(a.TokenType),
		}
	}
	for _, d := range spec.PolicyDocuments {
		pd := render.PolicyDocument{Name: d.Name}
		for _, r := range d.Rules {
			rule := render.Rule{
				Path:               r.Path,
				RequiredParameters: r.RequiredParameters,
				AllowedParameters:  parameterValues(r.AllowedParameters),
				DeniedParameters:   parameterValues(r.DeniedParameters),
				MinWrappingTTL:     r.MinWrappingTTL,
				MaxWrappingTTL:     r.MaxWrappingTTL,
			}
			for _, c := range r.Capabilities {
				rule.Capabilities = append(rule.Capabilities, string(c))
			}
			pd.Rules = append(pd.Rules, rule)
		}
		t.PolicyDocuments = append(t.PolicyDocuments, pd)
	}
	if p := spec.Parameters; p != nil {
		files, err := ParameterFiles(p, configMaps)
		if err != nil {
			return render.Template{}, err
		}
		t.Parameters = &render.Parameters{Root: p.Root, Files: files}
	}
	return t, nil
}

// duration is a TTL as the renderer parses it: seconds or "1h"-style.
func duration(v *intstr.IntOrString) string {
	if v == nil {
		return ""
	}
	return v.String()
}

func orderedKV(m map[string]string, order []string) []template.KV {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for _, k := range order {
		if _, ok := m[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains(keys, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	keys = append(keys, rest...)
	out := make([]template.KV, 0, len(keys))
	for _, k := range keys {
		out = append(out, template.KV{Key: k, Value: m[k]})
	}
	return out
}

func parameterValues(m map[string]v1alpha1.ParameterValues) []render.ParameterValues {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]render.ParameterValues, 0, len(keys))
	for _, k := range keys {
		out = append(out, render.ParameterValues{Name: k, Values: m[k]})
	}
	return out
}

// ParameterFiles collects the parameter files of a template: ConfigMaps,
// whose data keys are file names under their directory, then inline files
// (a YAML document, or a string holding YAML text, which the renderer
// parses). Inline files win.
func ParameterFiles(p *v1alpha1.ParametersSpec, configMaps ConfigMapData) (map[string]value.Value, error) {
	files := make(map[string]value.Value, len(p.Files))
	for _, ref := range p.ConfigMapRefs {
		if configMaps == nil {
			return nil, fmt.Errorf("parameters.configMapRefs: ConfigMap %s/%s is not available here", ref.Namespace, ref.Name)
		}
		data, err := configMaps(ref.Namespace, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("parameters.configMapRefs: ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		for key, text := range data {
			// ConfigMap keys cannot hold '/': a directory prefix places them.
			name := path.Join(p.EffectiveDirectory(ref), key)
			v, err := value.DecodeYAML([]byte(text))
			if err != nil {
				return nil, fmt.Errorf("parameters: ConfigMap %s/%s key %q: %w", ref.Namespace, ref.Name, key, err)
			}
			files[name] = v
		}
	}
	for name, doc := range p.Files {
		if err := checkFilePath(name); err != nil {
			return nil, fmt.Errorf("parameters.files[%q]: %w", name, err)
		}
		v, err := DecodeDocument(doc.Raw)
		if err != nil {
			return nil, fmt.Errorf("parameters.files[%q]: %w", name, err)
		}
		files[name] = v
	}
	return files, nil
}

// checkFilePath enforces what the CRD documents for parameter file paths:
// relative, normalised, ending in .yaml.
func checkFilePath(name string) error {
	switch {
	case len(name) > 512:
		return fmt.Errorf("path longer than 512 characters")
	case !strings.HasSuffix(name, ".yaml"):
		return fmt.Errorf("path must end in .yaml")
	case path.IsAbs(name) || path.Clean(name) != name || strings.HasPrefix(name, "../"):
		return fmt.Errorf("path must be relative and normalised")
	}
	return nil
}

// DecodeDocument decodes raw JSON keeping key order; empty is null.
func DecodeDocument(raw []byte) (value.Value, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return value.Value{}, nil
	}
	return value.DecodeJSON(raw)
}

// Binding converts a MinionBinding spec.
func Binding(spec *v1alpha1.MinionBindingSpec) (render.Binding, error) {
	b := render.Binding{MinionID: spec.MinionID}
	var err error
	for _, f := range []struct {
		name string
		doc  *v1alpha1.Document
		dst  *value.Value
	}{{"grains", spec.Grains, &b.Grains}, {"pillar", spec.Pillar, &b.Pillar}, {"config", spec.Config, &b.Config}} {
		if f.doc == nil {
			*f.dst = value.NewMap(nil)
			if f.name == "grains" {
				// What Salt has for a minion without cached grains.
				*f.dst = value.NewStringMap("id", spec.MinionID)
			}
			continue
		}
		if *f.dst, err = DecodeDocument(f.doc.Raw); err != nil {
			return render.Binding{}, fmt.Errorf("spec.%s: %w", f.name, err)
		}
		if f.dst.IsNull() {
			*f.dst = value.NewMap(nil)
		}
		if !f.dst.IsMap() {
			return render.Binding{}, fmt.Errorf("spec.%s must be a mapping, not a %s", f.name, f.dst.Kind().PyType())
		}
	}
	return b, nil
}
