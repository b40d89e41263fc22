package v1alpha1

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const (
	crdDir     = "../../config/crd/bases"
	samplesDir = "../../config/samples"
)

func TestPoliciesEmptyListIsNotOmitted(t *testing.T) {
	tests := []struct {
		name         string
		in           string
		wantPolicies bool
		wantJSON     string // substring of the re-encoded spec, or "" for absent
		wantAssign   []string
	}{
		{
			name:         "omitted policies take saltext's default",
			in:           `{"spec":{"connectionRef":{"name":"vault"}}}`,
			wantPolicies: false,
			wantAssign:   []string{"saltstack/minions", "saltstack/{minion}"},
		},
		{
			name:         "explicitly empty assign assigns nothing",
			in:           `{"spec":{"connectionRef":{"name":"vault"},"policies":{"assign":[]}}}`,
			wantPolicies: true,
			wantJSON:     `"policies":{"assign":[]}`,
			wantAssign:   []string{},
		},
		{
			name:         "explicit list is used as written",
			in:           `{"spec":{"connectionRef":{"name":"vault"},"policies":{"assign":["a","{minion}","a"]}}}`,
			wantPolicies: true,
			wantJSON:     `"policies":{"assign":["a","{minion}","a"]}`,
			wantAssign:   []string{"a", "{minion}", "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mt MinionTemplate
			if err := json.Unmarshal([]byte(tt.in), &mt); err != nil {
				t.Fatal(err)
			}
			// A deep copy (what a controller works on) must keep the
			// distinction too.
			for _, obj := range []*MinionTemplate{&mt, mt.DeepCopy()} {
				if got := obj.Spec.Policies != nil; got != tt.wantPolicies {
					t.Fatalf("policies present = %v, want %v", got, tt.wantPolicies)
				}
				out, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				if tt.wantJSON == "" {
					if bytes.Contains(out, []byte(`"policies"`)) {
						t.Errorf("re-encoded object has policies: %s", out)
					}
				} else if !bytes.Contains(out, []byte(tt.wantJSON)) {
					t.Errorf("re-encoded object %s does not contain %s", out, tt.wantJSON)
				}
				if tt.wantPolicies && !slices.Equal(obj.Spec.Policies.Assign, tt.wantAssign) {
					t.Errorf("assign = %#v, want %#v", obj.Spec.Policies.Assign, tt.wantAssign)
				}
			}
		})
	}
}

func TestDocumentRoundTripIsByteExact(t *testing.T) {
	// Key order, number spelling (1.0 vs 1, big integers) and, for the
	// document itself, whitespace must survive.
	raw := []byte(`{ "z": 1.0, "a": [3, 2, 1e3], "m": {"y": null, "x": "{pillar[roles]}"}, "big": 12345678901234567890 }`)

	var d Document
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json compacts what a Marshaler returns, so compare the
	// method's own output for whitespace and the compact form via Marshal.
	direct, _ := d.MarshalJSON()
	if !bytes.Equal(direct, raw) {
		t.Errorf("MarshalJSON() = %s, want %s", direct, raw)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, compact.Bytes()) {
		t.Errorf("json.Marshal = %s, want %s", out, compact.Bytes())
	}

	// Inside a binding, through a deep copy.
	in := []byte(`{"spec":{"minionID":"web01","templateRef":{"name":"t"},"pillar":{"roles":["web","db"],"a":1.0,"env":"prod"},"grains":{"id":"web01"}}}`)
	var mb MinionBinding
	if err := json.Unmarshal(in, &mb); err != nil {
		t.Fatal(err)
	}
	cp := mb.DeepCopy()
	mb.Spec.Pillar.Raw[0] = 'X' // the copy must not share bytes
	if got := string(cp.Spec.Pillar.Raw); got != `{"roles":["web","db"],"a":1.0,"env":"prod"}` {
		t.Errorf("pillar = %s", got)
	}
	out, err = json.Marshal(cp.Spec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"minionID":"web01","templateRef":{"name":"t"},"grains":{"id":"web01"},"pillar":{"roles":["web","db"],"a":1.0,"env":"prod"}}`
	if string(out) != want {
		t.Errorf("spec = %s\nwant   %s", out, want)
	}

	// Absent and null documents stay absent.
	var empty MinionBinding
	if err := json.Unmarshal([]byte(`{"spec":{"minionID":"a","templateRef":{"name":"t"},"config":null}}`), &empty); err != nil {
		t.Fatal(err)
	}
	if empty.Spec.Config != nil && !empty.Spec.Config.IsZero() {
		t.Errorf("config = %q, want empty", empty.Spec.Config.Raw)
	}
	if empty.Spec.Grains != nil {
		t.Errorf("grains = %q, want nil", empty.Spec.Grains.Raw)
	}
}

func TestMetadataIsAMapOfPatterns(t *testing.T) {
	var mt MinionTemplate
	in := `{"spec":{"connectionRef":{"name":"v"},"metadata":{"entity":{"roles":"{pillar[roles]}"},"secret":{}}}}`
	if err := json.Unmarshal([]byte(in), &mt); err != nil {
		t.Fatal(err)
	}
	if got := mt.Spec.Metadata.Entity["roles"]; got != "{pillar[roles]}" {
		t.Errorf("entity[roles] = %q", got)
	}
	if mt.Spec.Metadata.Secret == nil || len(mt.Spec.Metadata.Secret) != 0 {
		t.Errorf("secret = %#v, want an empty map", mt.Spec.Metadata.Secret)
	}
}

func TestSchemeRegistersAllKinds(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{VaultConnectionKind, MinionTemplateKind, MinionBindingKind} {
		for _, k := range []string{kind, kind + "List"} {
			if !s.Recognizes(GroupVersion.WithKind(k)) {
				t.Errorf("scheme does not recognise %s", k)
			}
		}
	}
}

// crd is the part of a CustomResourceDefinition the tests look at.
type crd struct {
	Kind string `json:"kind"`
	Spec struct {
		Group string `json:"group"`
		Scope string `json:"scope"`
		Names struct {
			Kind       string   `json:"kind"`
			ShortNames []string `json:"shortNames"`
			Categories []string `json:"categories"`
		} `json:"names"`
		Versions []struct {
			Name    string `json:"name"`
			Storage bool   `json:"storage"`
			Schema  struct {
				OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
			} `json:"schema"`
			Subresources map[string]any `json:"subresources"`
			Columns      []struct {
				Name     string `json:"name"`
				JSONPath string `json:"jsonPath"`
				Priority int    `json:"priority"`
			} `json:"additionalPrinterColumns"`
		} `json:"versions"`
	} `json:"spec"`
}

func readYAML(t *testing.T, path string, into any, strict bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := utilyaml.ToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// validations collects every x-kubernetes-validations rule of a schema, keyed
// by the dotted path of the property that carries it.
func validations(s map[string]any, path string, out map[string][]string) {
	if rules, ok := s["x-kubernetes-validations"].([]any); ok {
		for _, r := range rules {
			out[path] = append(out[path], r.(map[string]any)["rule"].(string))
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for name, p := range props {
			validations(p.(map[string]any), strings.TrimPrefix(path+"."+name, "."), out)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		validations(items, path+"[]", out)
	}
}

// schemaAt walks properties (and list items, written "[]") to a sub-schema.
func schemaAt(t *testing.T, s map[string]any, path string) map[string]any {
	t.Helper()
	for _, part := range strings.Split(path, ".") {
		items := strings.HasSuffix(part, "[]")
		props, _ := s["properties"].(map[string]any)
		next, ok := props[strings.TrimSuffix(part, "[]")].(map[string]any)
		if !ok {
			t.Fatalf("no property %q in %s", part, path)
		}
		s = next
		if items {
			s = s["items"].(map[string]any)
		}
	}
	return s
}

func TestCRDs(t *testing.T) {
	type want struct {
		scope       string
		shortName   string
		columns     map[string]string // name -> jsonPath
		priority1   []string
		validations map[string][]string // property path -> rule substrings
		defaults    map[string]any      // property path -> default
	}
	ready := `.status.conditions[?(@.type=="Ready")].status`
	tests := map[string]want{
		"minionvault.dev_vaultconnections.yaml": {
			scope:     "Cluster",
			shortName: "vc",
			columns: map[string]string{
				"Address": ".spec.address", "Version": ".status.vaultVersion",
				"Ready": ready, "Age": ".metadata.creationTimestamp",
			},
			validations: map[string][]string{
				"spec.auth":                     {"has(self.kubernetes)", "== 1"},
				"spec.address":                  {"isURL(self)"},
				"spec.tls":                      {"self.caSecretRef.name"},
				"spec.auth.appRole.mount":       {"self.matches("},
				"spec.auth.kubernetes.mount":    {"self.matches("},
				"spec.rateLimit":                {"self.burst >= self.qps"},
				"spec.auth.token.secretRef":     nil,
				"spec.tls.caSecretRef":          nil,
				"spec.auth.appRole":             nil,
				"spec.auth.kubernetes":          nil,
				"spec.auth.appRole.roleID":      nil,
				"spec.auth.kubernetes.role":     nil,
				"spec.auth.token.secretRef.key": nil,
			},
			defaults: map[string]any{
				"spec.timeout":                            "30s",
				"spec.auth.kubernetes.mount":              DefaultKubernetesAuthMount,
				"spec.auth.appRole.mount":                 DefaultAppRoleAuthMount,
				"spec.auth.appRole.secretIDSecretRef.key": DefaultSecretIDSecretKey,
				"spec.auth.token.secretRef.key":           DefaultTokenSecretKey,
				"spec.tls.caSecretRef.key":                DefaultCASecretKey,
			},
		},
		"minionvault.dev_miniontemplates.yaml": {
			scope:     "Cluster",
			shortName: "mt",
			columns: map[string]string{
				"Connection": ".spec.connectionRef.name", "Bindings": ".status.bindings", "Policies": ".status.policies.count",
				"Ready": ready, "Age": ".metadata.creationTimestamp",
			},
			validations: map[string][]string{
				"spec.appRole.mount":          {"self.matches("},
				"spec.policyDocuments[].name": {"self.trim() == self", "self != 'root'"},
			},
			defaults: map[string]any{
				"spec.appRole":                     map[string]any{},
				"spec.appRole.mount":               DefaultMinionAppRoleMount,
				"spec.appRole.bindSecretID":        DefaultBindSecretID,
				"spec.appRole.secretIDNumUses":     float64(DefaultSecretIDNumUses),
				"spec.appRole.secretIDTTL":         float64(DefaultSecretIDTTLSeconds),
				"spec.appRole.tokenExplicitMaxTTL": float64(DefaultTokenExplicitMaxTTLSeconds),
				"spec.appRole.tokenNumUses":        float64(DefaultTokenNumUses),
				"spec.entityName":                  DefaultEntityNamePattern,
				"spec.interval":                    "1h",
				"spec.deletionPolicy":              string(DeletionPolicyDelete),
				"spec.driftDetection":              string(DriftDetectionCorrect),
				"spec.trustMinionGrains":           false,
				"spec.adoptPolicies":               false,
			},
		},
		"minionvault.dev_minionbindings.yaml": {
			scope:     "Namespaced",
			shortName: "mb",
			columns: map[string]string{
				"Minion": ".spec.minionID", "Template": ".spec.templateRef.name",
				"Ready": ready, "Status": `.status.conditions[?(@.type=="Ready")].message`,
				"Policies": ".status.policies", "Age": ".metadata.creationTimestamp",
			},
			priority1: []string{"Status", "Policies"},
			validations: map[string][]string{
				"spec.minionID": {"self == oldSelf", "'..'"},
			},
		},
	}

	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("found %d CRD files in %s, want %d", len(files), crdDir, len(tests))
	}

	for file, w := range tests {
		t.Run(file, func(t *testing.T) {
			var c crd
			readYAML(t, filepath.Join(crdDir, file), &c, false)
			if c.Kind != "CustomResourceDefinition" || c.Spec.Group != GroupName || c.Spec.Scope != w.scope {
				t.Errorf("kind/group/scope = %s/%s/%s", c.Kind, c.Spec.Group, c.Spec.Scope)
			}
			if !slices.Equal(c.Spec.Names.ShortNames, []string{w.shortName}) {
				t.Errorf("shortNames = %v, want [%s]", c.Spec.Names.ShortNames, w.shortName)
			}
			if !slices.Equal(c.Spec.Names.Categories, []string{"minionvault"}) {
				t.Errorf("categories = %v, want [minionvault]", c.Spec.Names.Categories)
			}
			if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Name != "v1alpha1" || !c.Spec.Versions[0].Storage {
				t.Fatalf("versions = %+v", c.Spec.Versions)
			}
			v := c.Spec.Versions[0]
			if _, ok := v.Subresources["status"]; !ok {
				t.Errorf("no status subresource")
			}

			got := map[string]string{}
			var order []string
			for _, col := range v.Columns {
				got[col.Name] = col.JSONPath
				order = append(order, col.Name)
				if wantP1 := slices.Contains(w.priority1, col.Name); wantP1 != (col.Priority == 1) {
					t.Errorf("column %s priority = %d", col.Name, col.Priority)
				}
			}
			if !reflect.DeepEqual(got, w.columns) {
				t.Errorf("printer columns = %v, want %v", got, w.columns)
			}
			if order[len(order)-1] != "Age" {
				t.Errorf("last column = %s, want Age", order[len(order)-1])
			}

			rules := map[string][]string{}
			validations(v.Schema.OpenAPIV3Schema, "", rules)
			for path, subs := range w.validations {
				if subs == nil {
					continue // only checks that the path exists, below
				}
				joined := strings.Join(rules[path], "\n")
				for _, sub := range subs {
					if !strings.Contains(joined, sub) {
						t.Errorf("%s: no x-kubernetes-validations rule containing %q (have %q)", path, sub, rules[path])
					}
				}
			}
			for path := range w.validations {
				schemaAt(t, v.Schema.OpenAPIV3Schema, path)
			}
			for path, def := range w.defaults {
				s := schemaAt(t, v.Schema.OpenAPIV3Schema, path)
				if !reflect.DeepEqual(s["default"], def) {
					t.Errorf("%s: default = %#v, want %#v (Go constant)", path, s["default"], def)
				}
			}
			// Every Document field is an object whose content is kept as is.
			for path, sch := range map[string]string{
				"minionvault.dev_minionbindings.yaml":  "spec.grains spec.pillar spec.config",
				"minionvault.dev_miniontemplates.yaml": "spec.parameters.files",
			} {
				if path != file {
					continue
				}
				for _, p := range strings.Fields(sch) {
					s := schemaAt(t, v.Schema.OpenAPIV3Schema, p)
					if s["type"] != "object" || s["x-kubernetes-preserve-unknown-fields"] != true {
						t.Errorf("%s: schema %v, want a preserve-unknown-fields object", p, s)
					}
				}
			}
		})
	}
}

// TestSamplesDecode checks that every sample decodes into the Go types with
// no unknown field, so samples and types cannot drift apart.
func TestSamplesDecode(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(samplesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		readYAML(t, f, &meta, false)
		kinds[meta.Kind]++
		switch meta.Kind {
		case VaultConnectionKind:
			var o VaultConnection
			readYAML(t, f, &o, true)
			if o.Spec.Auth.Token == nil || o.Spec.Auth.Token.SecretRef.Resolve().Key != DefaultTokenSecretKey {
				t.Errorf("%s: want token auth", f)
			}
		case MinionTemplateKind:
			var o MinionTemplate
			readYAML(t, f, &o, true)
			if o.Name != "salt-minions" || len(o.Spec.PolicyDocuments) != 3 || o.Spec.Parameters == nil {
				t.Errorf("%s: unexpected template %+v", f, o.Spec)
			}
			for _, doc := range o.Spec.Parameters.Files {
				var v map[string]any
				if err := json.Unmarshal(doc.Raw, &v); err != nil || v["values"] == nil {
					t.Errorf("%s: parameter file without values: %s", f, doc.Raw)
				}
			}
		case MinionBindingKind:
			var o MinionBinding
			readYAML(t, f, &o, true)
			if o.Namespace != "default" || o.Spec.Grains == nil || o.Spec.Pillar == nil {
				t.Errorf("%s: unexpected binding %+v", f, o.Spec)
			}
		default:
			t.Errorf("%s: unexpected kind %q", f, meta.Kind)
		}
	}
	if kinds[VaultConnectionKind] != 1 || kinds[MinionTemplateKind] != 1 || kinds[MinionBindingKind] != 3 {
		t.Errorf("sample kinds = %v", kinds)
	}
}
