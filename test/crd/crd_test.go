// Package crd checks what the project writes for users to apply against the
// CRDs as the API server validates them: schema, CEL rules, defaults, names,
// pruning. It is its own package so that the API server's validation code is
// linked into these tests only, not into the importer's (whose fuzzing
// compiles every dependency with coverage instrumentation).
package crd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/minionvault/minion-vault-operator/internal/importer"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
)

// importerData is the importer's testdata: its round-trip fleet and the two
// configurations its own tests use.
var importerData = filepath.Join("..", "..", "internal", "importer", "testdata")

// importYAML is what `minionvault import` prints for in.
func importYAML(t *testing.T, in importer.Input, opts importer.Options) (*importer.Output, []byte) {
	t.Helper()
	out, err := importer.Import(in, opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := out.WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	return out, buf.Bytes()
}

func readInput(t *testing.T, path string) importer.File {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(importerData, path))
	if err != nil {
		t.Fatal(err)
	}
	return importer.File{Name: path, Data: data}
}

// crdSchema is one CRD's v1alpha1 schema, ready to validate objects the
// way the API server does on create: prune, default, OpenAPI and CEL.
type crdSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
	namespaced bool
}

func loadCRDs(t *testing.T) map[string]*crdSchema {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	out := map[string]*crdSchema{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := sigsyaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != "v1alpha1" {
				continue
			}
			var internal apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				t.Fatal(err)
			}
			ss, err := structuralschema.NewStructural(&internal)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			validator, _, err := apiservervalidation.NewSchemaValidator(&internal)
			if err != nil {
				t.Fatal(err)
			}
			out[crd.Spec.Names.Kind] = &crdSchema{
				structural: ss,
				validator:  validator,
				cel:        cel.NewValidator(ss, true, celconfig.PerCallLimit),
				namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			}
		}
	}
	return out
}

// admit returns why the API server would refuse obj ("" when it accepts
// it), or which fields it would silently drop.
func (s *crdSchema) admit(obj map[string]any) []string {
	var problems []string
	if pruned := structuralpruning.PruneWithOptions(obj, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(pruned) > 0 {
		problems = append(problems, "unknown fields dropped: "+strings.Join(pruned, ", "))
	}
	structuraldefaulting.Default(obj, s.structural)
	for _, e := range apiservervalidation.ValidateCustomResource(nil, obj, s.validator) {
		problems = append(problems, e.Error())
	}
	errs, _ := s.cel.Validate(context.Background(), nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	for _, e := range errs {
		problems = append(problems, e.Error())
	}
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	for _, e := range validation.IsDNS1123Subdomain(name) {
		problems = append(problems, "metadata.name: "+e)
	}
	ns, _ := md["namespace"].(string)
	if s.namespaced {
		for _, e := range validation.IsDNS1123Label(ns) {
			problems = append(problems, "metadata.namespace: "+e)
		}
	} else if ns != "" {
		problems = append(problems, "metadata.namespace set on a cluster-scoped object")
	}
	return problems
}

// admitStream checks every document of a YAML stream against the CRDs, as
// `kubectl apply` would send them (YAML to JSON to the API server).
func admitStream(t *testing.T, crds map[string]*crdSchema, stream []byte) (kinds []string) {
	t.Helper()
	docs, err := manifestDocs(stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range docs {
		js, err := sigsyaml.YAMLToJSON(text)
		if err != nil {
			t.Fatalf("kubectl could not read a document: %v\n%s", err, text)
		}
		var obj map[string]any
		if err := utiljson.Unmarshal(js, &obj); err != nil {
			t.Fatal(err)
		}
		kind, _ := obj["kind"].(string)
		kinds = append(kinds, kind)
		s, ok := crds[kind]
		if !ok {
			t.Errorf("unknown kind %q", kind)
			continue
		}
		for _, p := range s.admit(obj) {
			t.Errorf("%s %v: %s", kind, obj["metadata"], p)
		}
	}
	return kinds
}

// TestImportedManifestsPassCRDValidation: what `minionvault import` writes is accepted by the
// API server as is: schema, CEL rules, defaults, names, nothing pruned.
func TestImportedManifestsPassCRDValidation(t *testing.T) {
	crds := loadCRDs(t)
	grains, pillar := readInput(t, "roundtrip/grains.json"), readInput(t, "roundtrip/pillar.json")
	for name, in := range map[string]importer.Input{
		"roundtrip": {Config: []importer.File{readInput(t, "roundtrip/master.yaml")}, Grains: &grains, Pillar: &pillar},
		"legacy":    {Config: []importer.File{readInput(t, "legacy.yaml")}},
		"modern":    {Config: []importer.File{readInput(t, "modern.yaml")}},
		"odd minion IDs": {
			Config: []importer.File{{Name: "c.yaml", Data: []byte("vault: {server: {url: 'http://127.0.0.1:8200'}, policies: {assign: []}}")}},
			Grains: &importer.File{Name: "g.json", Data: []byte(`{"Web_01": {"id": "Web_01"}, "web01": {}, "a..b": {}, "-x-": {}, "ÄÖ": {}, "x.y-": {}, "` + strings.Repeat("Long", 80) + `": {}}`)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, stream := importYAML(t, in, importer.Options{})
			kinds := admitStream(t, crds, stream)
			if len(kinds) != len(out.Documents) {
				t.Errorf("%d documents read back, %d written", len(kinds), len(out.Documents))
			}
		})
	}
}

// TestCRDCheckerRefuses makes sure the checker above is not vacuous: it
// refuses what the API server refuses.
func TestCRDCheckerRefuses(t *testing.T) {
	crds := loadCRDs(t)
	for name, doc := range map[string]string{
		"CEL: two auth methods": `{"apiVersion": "minionvault.dev/v1alpha1", "kind": "VaultConnection", "metadata": {"name": "v"},
			"spec": {"address": "https://v", "auth": {"token": {"secretRef": {"name": "s", "namespace": "n"}}, "kubernetes": {"role": "r"}}}}`,
		"CEL: bad mount": `{"apiVersion": "minionvault.dev/v1alpha1", "kind": "MinionTemplate", "metadata": {"name": "t"},
			"spec": {"connectionRef": {"name": "v"}, "appRole": {"mount": "a b"}}}`,
		"schema: unknown field": `{"apiVersion": "minionvault.dev/v1alpha1", "kind": "MinionTemplate", "metadata": {"name": "t"},
			"spec": {"connectionRef": {"name": "v"}, "policiez": []}}`,
		"name": `{"apiVersion": "minionvault.dev/v1alpha1", "kind": "MinionBinding", "metadata": {"name": "Web_01", "namespace": "default"},
			"spec": {"minionID": "Web_01", "templateRef": {"name": "t"}}}`,
		"schema: minionID pattern": `{"apiVersion": "minionvault.dev/v1alpha1", "kind": "MinionBinding", "metadata": {"name": "w", "namespace": "default"},
			"spec": {"minionID": "a b", "templateRef": {"name": "t"}}}`,
	} {
		var obj map[string]any
		if err := utiljson.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if problems := crds[obj["kind"].(string)].admit(obj); len(problems) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestKubectlReadsTheSameValues: grain and pillar values reach the cluster
// (kubectl's YAML reader) as the same JSON the project's reader sees, even
// strings that look like booleans, numbers or dates to one of them.
func TestKubectlReadsTheSameValues(t *testing.T) {
	pillar := `{"m": {"y": "y", "n": ["n", "N", "no", "off", "On", "NULL", "~", ""], "numbers": ["1e5", "0o17", "0x1F", "1_000", "12:30", "+1", "-.5", ".5", "1.0"],
		"date": "2001-12-14", "big": 123456789012345678901234, "real": [1, 1.5, 2.5e-05, -0, true, null], "text": "plain {minion}"}}`
	_, stream := importYAML(t, importer.Input{Config: []importer.File{{Name: "c", Data: []byte("vault: {}")}}, Pillar: &importer.File{Name: "p", Data: []byte(pillar)}}, importer.Options{AllPillar: true})
	docs, err := manifestDocs(stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range docs {
		js, err := sigsyaml.YAMLToJSON(text)
		if err != nil {
			t.Fatal(err)
		}
		var kubectl, ours any
		if err := utiljson.Unmarshal(js, &kubectl); err != nil {
			t.Fatal(err)
		}
		v, err := manifestValue(text)
		if err != nil {
			t.Fatal(err)
		}
		if err := utiljson.Unmarshal(v, &ours); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(kubectl, ours) {
			t.Errorf("kubectl reads\n%s\nthe project reads\n%s\nfrom\n%s", js, v, text)
		}
	}
}

func manifestDocs(stream []byte) ([][]byte, error) {
	var out [][]byte
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			return out, nil
		}
		text, err := yaml.Marshal(&n)
		if err != nil {
			return nil, err
		}
		out = append(out, text)
	}
}

func manifestValue(text []byte) ([]byte, error) {
	docs, err := manifest.Parse(text)
	if err != nil {
		return nil, err
	}
	return docs[0].Value.AppendJSON(nil), nil
}
