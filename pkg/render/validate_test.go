package render

import (
	"fmt"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

func TestValidate(t *testing.T) {
	roles := `{"roles":["web","db"],"evil":["*"],"dots":[".."],"slash":["a/b"],"vault":["{{identity.entity.id}}"],"big":"` + strings.Repeat("x", 600) + `"}`
	doc := func(name, path string) []PolicyDocument {
		return []PolicyDocument{{Name: name, Rules: []Rule{{Path: path, Capabilities: []string{"read"}}}}}
	}
	many := []template.KV{}
	for i := 0; i < 70; i++ {
		many = append(many, template.KV{Key: "k" + strings.Repeat("i", i), Value: "v"})
	}
	full, longKeys := []template.KV{}, []template.KV{}
	for i := 0; i < 63; i++ {
		full = append(full, template.KV{Key: fmt.Sprintf("k%d", i), Value: "v"})
	}
	for i := 0; i < 10; i++ {
		longKeys = append(longKeys, template.KV{Key: fmt.Sprintf("%060d", i), Value: "v"})
	}
	cases := []struct {
		name   string
		tpl    Template
		grains string
		want   []Reason
	}{
		{name: "clean", tpl: Template{Policies: []string{"salt_role_{pillar[roles]}"}, AllowedPolicies: []string{"salt_role_*"}}},
		{name: "root policy", tpl: Template{Policies: []string{"root"}}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "space in policy", tpl: Template{Policies: []string{"a b"}}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "glob in policy name", tpl: Template{Policies: []string{"salt_{pillar[evil]}"}}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "empty policy name", tpl: Template{Policies: []string{"{pillar[missing_is_swallowed]}", ""}}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "not allowed", tpl: Template{Policies: []string{"admin", "salt_role_{pillar[roles]}"}, AllowedPolicies: []string{"salt_role_*"}}, want: []Reason{ReasonPolicyNotAllowed}},
		{name: "allow nothing", tpl: Template{Policies: []string{"a"}, AllowedPolicies: []string{}}, want: []Reason{ReasonPolicyNotAllowed}},
		{name: "untrusted grain in policy", tpl: Template{Policies: []string{"salt_{grains[os]}"}}, grains: `{"id":"m","os":"debian"}`, want: []Reason{ReasonUntrustedGrain}},
		{name: "grains id is trusted", tpl: Template{Policies: []string{"salt_{grains[id]}"}}, grains: `{"id":"m"}`},
		{name: "trusted grains", tpl: Template{Policies: []string{"salt_{grains[os]}"}, TrustMinionGrains: true}, grains: `{"id":"m","os":"debian"}`},
		{name: "untrusted grain in entity name", tpl: Template{EntityName: "e_{grains[os]}"}, grains: `{"id":"m","os":"debian"}`, want: []Reason{ReasonUntrustedGrain}},
		{name: "untrusted grain in spec", tpl: Template{Policies: []string{"a{minion:{grains[w]}}"}}, grains: `{"id":"m","w":3}`, want: []Reason{ReasonUntrustedGrain, ReasonInvalidPolicyName}},
		{name: "glob injection", tpl: Template{PolicyDocuments: doc("p_{pillar[evil]}", "s/{pillar[evil]}")}, want: []Reason{ReasonInvalidPolicyName, ReasonACLPathWidened, ReasonACLPathWidened}},
		{name: "traversal", tpl: Template{PolicyDocuments: doc("p_{pillar[dots]}", "s/{pillar[dots]}")}, want: []Reason{ReasonInvalidPolicyName, ReasonACLPathWidened, ReasonACLPathWidened}},
		{name: "slash", tpl: Template{PolicyDocuments: doc("p/{pillar[slash]}", "s/{pillar[slash]}")}, want: []Reason{ReasonACLPathWidened, ReasonACLPathWidened}},
		{name: "vault template injection", tpl: Template{PolicyDocuments: doc("p{minion}", "s/{minion}/{pillar[vault]}")}, want: []Reason{ReasonInvalidTemplate, ReasonACLPathWidened}},
		{name: "rule field not in name", tpl: Template{PolicyDocuments: doc("p", "s/{minion}")}, want: []Reason{ReasonInvalidTemplate}},
		{name: "two bodies", tpl: Template{PolicyDocuments: append(doc("p", "s/a"), doc("p", "s/b")...)}, want: []Reason{ReasonConflictingPolicy}},
		{name: "same body twice is fine", tpl: Template{PolicyDocuments: append(doc("p", "s/a"), doc("p", "s/a")...)}},
		{name: "metadata value too long", tpl: Template{EntityMetadata: []template.KV{kv("big", "{pillar[big]}")}}, want: []Reason{ReasonMetadataLimit}},
		{name: "metadata too many pairs", tpl: Template{EntityMetadata: many}, want: []Reason{ReasonMetadataLimit}},
		{name: "metadata key too long", tpl: Template{SecretMetadata: []template.KV{kv(strings.Repeat("k", 129), "v")}}, want: []Reason{ReasonMetadataLimit}},
		{name: "metadata key Vault refuses", tpl: Template{EntityMetadata: []template.KV{kv("roles.0", "x")}}, want: []Reason{ReasonMetadataLimit}},
		{name: "reserved metadata key", tpl: Template{SecretMetadata: []template.KV{kv("vault-x", "x")}}, want: []Reason{ReasonMetadataLimit}},
		{name: "the operator's owner marker key", tpl: Template{EntityMetadata: []template.KV{kv("minionvault-owner", "cluster=x binding=a/b uid=u")}}, want: []Reason{ReasonMetadataLimit}},
		{name: "any key the operator reserves", tpl: Template{EntityMetadata: []template.KV{kv("minionvault-keys", "roles")}}, want: []Reason{ReasonMetadataLimit}},
		{name: "the reserved prefix on secret metadata is fine", tpl: Template{SecretMetadata: []template.KV{kv("minionvault-owner", "x")}}},
		{name: "no room left for the owner marker", tpl: Template{EntityMetadata: full}, want: []Reason{ReasonMetadataLimit}},
		{name: "the list of keys would not fit in one value", tpl: Template{EntityMetadata: longKeys}, want: []Reason{ReasonMetadataLimit}},
		{name: "bad ttl", tpl: Template{AppRole: AppRole{SecretIDTTL: "1w"}}, want: []Reason{ReasonInvalidTemplate}},
		{name: "entity name with slash", tpl: Template{EntityName: "a/{minion}"}, want: []Reason{ReasonInvalidEntityName}},
		{name: "policy document named default", tpl: Template{PolicyDocuments: doc("default", "s/a")}, want: []Reason{ReasonInvalidPolicyName}},
		// Built-in policies (docs/compatibility.md): never written,
		// adopted or deleted; those no login may carry are not assigned.
		{name: "policy document named default-ceiling", tpl: Template{PolicyDocuments: doc("default-ceiling", "s/a")}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "policy document named Response-Wrapping", tpl: Template{PolicyDocuments: doc("Response-Wrapping", "s/a")}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "policy document named control-group", tpl: Template{PolicyDocuments: doc("control-group", "s/a")}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "policy document named root", tpl: Template{PolicyDocuments: doc("root", "s/a")}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "policy document named like a built-in", tpl: Template{PolicyDocuments: doc("default-ceiling-web", "s/a")}},
		{name: "assigning response-wrapping", tpl: Template{Policies: []string{"response-wrapping"}}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "assigning control-group", tpl: Template{Policies: []string{"control-group"}}, want: []Reason{ReasonInvalidPolicyName}},
		{name: "assigning default-ceiling is Vault's business", tpl: Template{Policies: []string{"default", "default-ceiling"}}},
		// A rendered body Vault would refuse is refused before it is written.
		{name: "a path Vault refuses", tpl: Template{PolicyDocuments: doc("p", "s/a+*")}, want: []Reason{ReasonInvalidPolicyDocument}},
		{name: "policy document name not allowed", tpl: Template{PolicyDocuments: doc("admin", "s/a"), AllowedPolicies: []string{"salt_role_*"}}, want: []Reason{ReasonPolicyNotAllowed}},
		{name: "policy document name allowed", tpl: Template{PolicyDocuments: doc("salt_role_{pillar[roles]}", "s/{pillar[roles]}"), AllowedPolicies: []string{"salt_role_*"}}},
		{name: "glob into entity metadata", tpl: Template{EntityMetadata: []template.KV{kv("roles", "{pillar[evil]}")}}, want: []Reason{ReasonACLPathWidened, ReasonACLPathWidened}},
		{name: "slash into entity metadata", tpl: Template{EntityMetadata: []template.KV{kv("team", "t-{pillar[slash]}")}}, want: []Reason{ReasonACLPathWidened, ReasonACLPathWidened}},
		{name: "list into entity metadata is fine", tpl: Template{EntityMetadata: []template.KV{kv("roles", "{pillar[roles]}")}}},
		{name: "static slash in entity metadata is the author's", tpl: Template{EntityMetadata: []template.KV{kv("zone", "eu/west")}}},
		{name: "grains id is not the minion ID", tpl: Template{Policies: []string{"saltstack/{grains[id]}"}}, grains: `{"id":"other"}`, want: []Reason{ReasonUntrustedGrain}},
		{name: "untrusted grain in entity metadata", tpl: Template{EntityMetadata: []template.KV{kv("os", "{grains[os]}")}}, grains: `{"id":"m","os":"debian"}`, want: []Reason{ReasonUntrustedGrain}},
		{name: "mapdata in a policy", tpl: Template{Policies: []string{"salt_{mapdata[kv][mount]}"}, Parameters: &Parameters{Root: "fmla", Files: map[string]value.Value{"fmla/parameters/defaults.yaml": value.NewString("values: {kv: {mount: salt}}")}}}, want: []Reason{ReasonUntrustedGrain}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.tpl.Policies == nil {
				c.tpl.Policies = []string{}
			}
			grains := c.grains
			if grains == "" {
				grains = `{"id":"m"}`
			}
			comp := Compile(c.tpl)
			res, err := comp.Render(Binding{MinionID: "m", Grains: mustJSON(t, grains), Pillar: mustJSON(t, roles)}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			vs := comp.Validate(res)
			var got []Reason
			for _, v := range vs {
				got = append(got, v.Reason)
			}
			if len(got) != len(c.want) {
				t.Fatalf("violations %v, want reasons %v", vs, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("violations %v, want reasons %v", vs, c.want)
				}
			}
		})
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		glob, name string
		want       bool
	}{
		{"salt_role_*", "salt_role_web", true}, {"saltstack/*", "saltstack/minions/x", true}, {"a?c", "abc", true},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"*", "", true}, {"", "a", false}, {"web", "web", true}, {"web", "web2", false},
	}
	for _, c := range cases {
		if got := globMatch(c.glob, c.name); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.glob, c.name, got)
		}
	}
}

// The canonical writer never gives an attribute twice, whatever the rules
// repeat (Vault 2.1 refuses a duplicate attribute always, 1.21 and 2.0
// unless told otherwise); and were a body to carry one, validation would
// refuse it naming the policy, the path and the attribute.
func TestRenderedBodiesHaveNoDuplicateAttributes(t *testing.T) {
	c := Compile(Template{Policies: []string{}, PolicyDocuments: []PolicyDocument{{Name: "salt_role_{pillar[roles]}", Rules: []Rule{
		{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []string{"read", "read", "list", "deny"}},
		{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []string{"list"}, RequiredParameters: []string{"a", "a"},
			AllowedParameters: []ParameterValues{{Name: "env", Values: []string{"dev"}}, {Name: "Env", Values: []string{"prod"}}},
			DeniedParameters:  []ParameterValues{{Name: "x"}}, MinWrappingTTL: "1m", MaxWrappingTTL: "1h"},
	}}}})
	res, err := c.Render(Binding{MinionID: "m", Grains: mustJSON(t, `{"id":"m"}`), Pillar: mustJSON(t, `{"roles":["web","db"]}`)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if vs := c.Validate(res); len(vs) != 0 {
		t.Fatalf("violations %v", vs)
	}
	if len(res.PolicyDocuments) != 2 {
		t.Fatalf("documents %+v", res.PolicyDocuments)
	}
	for _, d := range res.PolicyDocuments {
		if msg := bodyRefusal(d.HCL); msg != "" {
			t.Errorf("%s: %s\n%s", d.Name, msg, d.HCL)
		}
	}

	tests := []struct {
		name, hcl string
		want      []string // "" when Vault takes it
	}{
		{"capabilities twice", "path \"salt/data/roles/web\" {\n  capabilities = [\"list\"]\n  capabilities = [\"read\"]\n}\n",
			[]string{`path "salt/data/roles/web"`, `attribute "capabilities"`, "set twice"}},
		{"a parameter twice", "path \"a\" {\n  capabilities = [\"update\"]\n  denied_parameters = {\n    \"x\" = []\n    \"x\" = []\n  }\n}\n",
			[]string{`path "a"`, `attribute "denied_parameters.x"`}},
		{"two blocks for one path", "path \"a\" {\n  capabilities = [\"read\"]\n}\npath \"a\" {\n  capabilities = [\"list\"]\n}\n", nil},
	}
	for _, tt := range tests {
		got := bodyRefusal(tt.hcl)
		if (got == "") != (tt.want == nil) {
			t.Errorf("%s: refusal %q", tt.name, got)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: refusal %q lacks %q", tt.name, got, w)
			}
		}
	}
}
