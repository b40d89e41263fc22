package render

import (
	"reflect"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/testing/vectors"
	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

func mustJSON(t testing.TB, s string) value.Value {
	t.Helper()
	if s == "" {
		return value.NewMap(nil)
	}
	v, err := value.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTemplatingVectors runs every templating vector through Render, the
// way the controller renders: defaults merged, one Compiled per template.
func TestTemplatingVectors(t *testing.T) {
	cases, err := vectors.Templating("../template/testdata/templating.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.ID, func(t *testing.T) {
			tpl := Template{Policies: []string{}}
			b := Binding{MinionID: c.Minion, Grains: mustJSON(t, string(c.Grains)), Pillar: mustJSON(t, string(c.Pillar))}
			var opts Options
			switch c.Kind {
			case "policies":
				tpl.Policies = c.Patterns
			case "pillar_paths":
				tpl.PillarPaths = []string{*c.Pattern}
			case "metadata":
				for _, p := range c.Metadata {
					tpl.EntityMetadata = append(tpl.EntityMetadata, kv(p[0], p[1]))
				}
				if c.JID != nil {
					opts.JID = *c.JID
				}
				if c.User != nil {
					opts.User = *c.User
				}
			}
			res, err := Render(tpl, b, opts)
			if c.WantsError() {
				if err == nil {
					t.Fatalf("want an error, got %+v", res)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch c.Kind {
			case "policies", "pillar_paths":
				got := res.Policies
				if c.Kind == "pillar_paths" {
					got = res.PillarPaths
				}
				if want := c.WantList(); !reflect.DeepEqual(got, want) {
					t.Fatalf("got %q, want %q", got, want)
				}
			default:
				want := []template.KV{}
				if !c.HasKey("minion-id") {
					want = append(want, kv("minion-id", c.Minion))
				}
				for _, p := range c.WantPairs() {
					want = append(want, kv(p[0], p[1]))
				}
				if !reflect.DeepEqual(res.EntityMetadata, want) {
					t.Fatalf("got %q\nwant %q", res.EntityMetadata, want)
				}
			}
		})
	}
}

// TestParametersVectors runs every parameter-stack vector through Render.
func TestParametersVectors(t *testing.T) {
	cases, err := vectors.Parameters("../parameters/testdata/parameters.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			files := map[string]value.Value{}
			for _, p := range mustJSON(t, string(c.Files)).Pairs() {
				files[p.Key.Str()] = p.Val
			}
			tpl := Template{Parameters: &Parameters{Root: c.TplRoot, Files: files}}
			b := Binding{MinionID: "minion", Grains: mustJSON(t, string(c.Grains)), Pillar: mustJSON(t, string(c.Pillar)), Config: mustJSON(t, string(c.Opts))}
			res, err := Render(tpl, b, Options{})
			if c.ExpectedError {
				if err == nil {
					t.Fatalf("want an error, got %s", res.Mapdata.PyRepr())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := mustJSON(t, string(c.Expected)); !value.Equal(res.Mapdata, want) {
				t.Fatalf("mapdata\ngot  %s\nwant %s", res.Mapdata.PyRepr(), want.PyRepr())
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	res, err := Render(Template{}, Binding{MinionID: "web01"}, Options{JID: "123"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"saltstack/minions", "saltstack/web01"}; !reflect.DeepEqual(res.Policies, want) {
		t.Errorf("policies = %q", res.Policies)
	}
	if want := []template.KV{{Key: "minion-id", Value: "web01"}}; !reflect.DeepEqual(res.EntityMetadata, want) {
		t.Errorf("entity = %q", res.EntityMetadata)
	}
	wantSecret := []template.KV{kv("saltstack-jid", "123"), kv("saltstack-minion", "web01"), kv("saltstack-user", "<no user set>")}
	if !reflect.DeepEqual(res.SecretMetadata, wantSecret) {
		t.Errorf("secret = %q", res.SecretMetadata)
	}
	if res.EntityName != "salt_minion_web01" || res.AppRole.Mount != "salt-minions" || res.AppRole.RoleName != "web01" {
		t.Errorf("entity %q approle %+v", res.EntityName, res.AppRole)
	}
	wantParams := []Param{{"bind_secret_id", true}, {"secret_id_num_uses", int64(1)}, {"secret_id_ttl", int64(60)},
		{"token_explicit_max_ttl", int64(60)}, {"token_num_uses", int64(10)}, {"token_policies", []string{"saltstack/minions", "saltstack/web01"}}}
	if !reflect.DeepEqual(res.AppRole.Params, wantParams) {
		t.Errorf("params = %+v", res.AppRole.Params)
	}
	// An explicitly empty list means empty; user metadata merges into defaults.
	res, err = Render(Template{Policies: []string{}, EntityMetadata: []template.KV{kv("minion-id", "id-{minion}"), kv("env", "x")}}, Binding{MinionID: "a"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Policies) != 0 || !reflect.DeepEqual(res.EntityMetadata, []template.KV{kv("minion-id", "id-a"), kv("env", "x")}) {
		t.Errorf("policies %q entity %q", res.Policies, res.EntityMetadata)
	}
}

func TestPolicyDocuments(t *testing.T) {
	tpl := Template{
		Policies: []string{"salt_role_{pillar[roles]}"},
		PolicyDocuments: []PolicyDocument{
			{Name: "salt_role_{pillar[roles]}", Rules: []Rule{
				{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []string{"read", "list", "read"}},
				{Path: "salt/data/{{identity.entity.metadata.roles__0}}/x", Capabilities: []string{"read"},
					AllowedParameters: []ParameterValues{{Name: "ttl", Values: []string{"1h"}}}, MinWrappingTTL: "1m"},
			}},
		},
	}
	res, err := Render(tpl, Binding{MinionID: "m", Pillar: mustJSON(t, `{"roles":["Web","db"]}`)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PolicyDocuments) != 2 {
		t.Fatalf("documents %+v", res.PolicyDocuments)
	}
	want := `path "salt/data/roles/Web" {
  capabilities = ["list", "read"]
}

path "salt/data/{{identity.entity.metadata.roles__0}}/x" {
  capabilities = ["read"]
  allowed_parameters = {
    "ttl" = ["1h"]
  }
  min_wrapping_ttl = "1m"
}
`
	if d := res.PolicyDocuments[0]; d.Name != "salt_role_web" || d.HCL != want {
		t.Errorf("document %q:\n%s", d.Name, d.HCL)
	}
	if d := res.PolicyDocuments[1]; d.Name != "salt_role_db" || !strings.Contains(d.HCL, `"salt/data/roles/db"`) {
		t.Errorf("document %q:\n%s", d.Name, d.HCL)
	}
	if vs := Compile(tpl).Validate(res); len(vs) != 0 {
		t.Errorf("violations: %v", vs)
	}
}

func TestParseTTL(t *testing.T) {
	cases := map[string]int64{"60": 60, "90s": 90, "1h": 3600, "1.5m": 90, "2d": 172800, "0": 0, "60.9": 60}
	for in, want := range cases {
		got, err := ParseTTL(in)
		if err != nil || got != want {
			t.Errorf("ParseTTL(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1h30m", "-5", "1w", "inf", "NaN", "1e400"} {
		if _, err := ParseTTL(bad); err == nil {
			t.Errorf("ParseTTL(%q) accepted", bad)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	cases := map[string]Template{
		"malformed policy":     {Policies: []string{"{pillar[roles]"}},
		"entity name is list":  {EntityName: "n_{pillar[roles]}"},
		"entity name missing":  {EntityName: "n_{pillar[nope]}"},
		"malformed doc path":   {PolicyDocuments: []PolicyDocument{{Name: "p_{minion}", Rules: []Rule{{Path: "x/{minion", Capabilities: []string{"read"}}}}}},
		"bad parameter source": {Parameters: &Parameters{Root: "f", Files: map[string]value.Value{"parameters/map_jinja.yaml": mustJSON(t, `{"values":{"sources":["Y:SUB@x"]}}`)}}},
	}
	for name, tpl := range cases {
		t.Run(name, func(t *testing.T) {
			if res, err := Render(tpl, Binding{MinionID: "m", Pillar: mustJSON(t, `{"roles":["a","b"]}`)}, Options{}); err == nil {
				t.Fatalf("rendered: %+v", res)
			}
		})
	}
}

func kv(k, v string) template.KV { return template.KV{Key: k, Value: v} }
