package binding

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

func TestRoleDiffers(t *testing.T) {
	desired := []render.Param{
		{Name: "bind_secret_id", Value: true}, {Name: "secret_id_ttl", Value: int64(60)},
		{Name: "token_policies", Value: []string{"b", "a", "a"}}, {Name: "token_type", Value: "default"},
		{Name: "token_bound_cidrs", Value: []string{}},
	}
	// What Vault answers for the role, decoded as the API client does.
	var vaultAnswer map[string]any
	dec := json.NewDecoder(strings.NewReader(`{"bind_secret_id":true,"secret_id_ttl":60,"token_policies":["b","a","a"],
		"token_type":"default","token_bound_cidrs":[],"token_ttl":0,"local_secret_ids":false}`))
	dec.UseNumber()
	if err := dec.Decode(&vaultAnswer); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mutate func(m map[string]any)
		want   bool
	}{
		{"in sync", func(map[string]any) {}, false},
		{"absent", nil, true},
		{"ttl changed", func(m map[string]any) { m["secret_id_ttl"] = json.Number("3600") }, true},
		{"policies reordered", func(m map[string]any) { m["token_policies"] = []any{"a", "b", "a"} }, true},
		{"policy added", func(m map[string]any) { m["token_policies"] = []any{"b", "a", "a", "c"} }, true},
		{"bool flipped", func(m map[string]any) { m["bind_secret_id"] = false }, true},
		{"param missing", func(m map[string]any) { delete(m, "token_type") }, true},
		{"null cidrs equal empty", func(m map[string]any) { m["token_bound_cidrs"] = nil }, false},
		{"unrelated param ignored", func(m map[string]any) { m["token_ttl"] = json.Number("99") }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var actual map[string]any
			if c.mutate != nil {
				actual = map[string]any{}
				for k, v := range vaultAnswer {
					actual[k] = v
				}
				c.mutate(actual)
			}
			got, why := roleDiffers(desired, actual)
			if got != c.want {
				t.Fatalf("roleDiffers = %v (%s), want %v", got, why, c.want)
			}
			if got && why == "" {
				t.Fatal("a difference without a reason")
			}
		})
	}
}

func TestMetadataDiffers(t *testing.T) {
	a := map[string]string{"k": "v", "x": "y"}
	for name, c := range map[string]struct {
		b    map[string]string
		want bool
	}{
		"same":    {map[string]string{"x": "y", "k": "v"}, false},
		"value":   {map[string]string{"k": "w", "x": "y"}, true},
		"missing": {map[string]string{"k": "v"}, true},
		"extra":   {map[string]string{"k": "v", "x": "y", "z": ""}, true},
		"nil":     {nil, true},
	} {
		if got, _ := metadataDiffers(a, c.b); got != c.want {
			t.Errorf("%s: %v", name, got)
		}
	}
}

// ownershipHeader is the header of a test template's policies in the
// test cluster.
func ownershipHeader(template string) string {
	return testPolicyOwner(template).Header()
}

func testPolicyOwner(template string) ownership.PolicyOwner {
	return ownership.PolicyOwner{Cluster: testCluster, Template: template}
}

// Vault answers CIDR blocks in go-sockaddr's notation: a single address
// without its prefix length, IPv6 compressed. Desired and actual compare
// equal when Vault merely rewrote the notation (a /32 rewritten on
// every resync).
func TestRoleDiffersCIDRs(t *testing.T) {
	cases := []struct {
		name          string
		want, answer  []string
		param         string
		wantDiffering bool
	}{
		{"/32 answered bare", []string{"127.0.0.1/32"}, []string{"127.0.0.1"}, "token_bound_cidrs", false},
		{"/128 answered bare", []string{"::1/128"}, []string{"::1"}, "token_bound_cidrs", false},
		{"IPv6 compressed, lower case", []string{"2001:DB8:0:0::/32"}, []string{"2001:db8::/32"}, "token_bound_cidrs", false},
		{"network kept", []string{"10.0.0.0/8", "192.168.1.7/32"}, []string{"10.0.0.0/8", "192.168.1.7"}, "token_bound_cidrs", false},
		{"host bits kept as written", []string{"10.1.2.3/8"}, []string{"10.1.2.3/8"}, "token_bound_cidrs", false},
		{"secret ID CIDRs kept as written", []string{"127.0.0.1/32"}, []string{"127.0.0.1/32"}, "secret_id_bound_cidrs", false},
		{"spaces", []string{" 10.0.0.0/8"}, []string{"10.0.0.0/8"}, "token_bound_cidrs", false},
		{"another block", []string{"10.0.0.0/8"}, []string{"10.0.0.0/16"}, "token_bound_cidrs", true},
		{"another address", []string{"127.0.0.1/32"}, []string{"127.0.0.2"}, "token_bound_cidrs", true},
		{"one more", []string{"127.0.0.1/32"}, []string{"127.0.0.1", "10.0.0.1"}, "token_bound_cidrs", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answer := make([]any, len(c.answer))
			for i, s := range c.answer {
				answer[i] = s
			}
			got, why := roleDiffers([]render.Param{{Name: c.param, Value: c.want}}, map[string]any{c.param: answer})
			if got != c.wantDiffering {
				t.Errorf("roleDiffers = %v (%s), want %v", got, why, c.wantDiffering)
			}
		})
	}
}

// A rewrite by someone else (a Salt master's role write, an entity
// metadata map replaced) is named whole, in a stable order: every
// parameter and policy that differs, every metadata key.
func TestDriftIsSaidWhole(t *testing.T) {
	desired := []render.Param{
		{Name: "token_num_uses", Value: int64(10)},
		{Name: "token_policies", Value: []string{"saltstack/minions", "salt_role_web"}},
		{Name: "token_ttl", Value: int64(3600)},
	}
	tests := []struct {
		name   string
		actual map[string]any
		want   string
	}{
		{"a Salt master's rewrite", map[string]any{"token_num_uses": json.Number("5"), "token_policies": []any{"saltstack/minions", "salt_role_web", "salt_role_build"}, "token_ttl": json.Number("3600")},
			"token_num_uses is 5, want 10; token_policies has salt_role_build extra"},
		{"a policy swapped, a field gone", map[string]any{"token_num_uses": json.Number("10"), "token_policies": []any{"saltstack/minions", "salt_role_db"}},
			"token_policies has salt_role_db extra and lacks salt_role_web; token_ttl is missing"},
		{"only the order", map[string]any{"token_num_uses": json.Number("10"), "token_policies": []any{"salt_role_web", "saltstack/minions"}, "token_ttl": json.Number("3600")},
			`token_policies is ["salt_role_web","saltstack/minions"], want ["saltstack/minions","salt_role_web"] (order or repeats)`},
	}
	for _, tt := range tests {
		if differs, why := roleDiffers(desired, tt.actual); !differs || why != tt.want {
			t.Errorf("%s: roleDiffers = %v %q, want %q", tt.name, differs, why, tt.want)
		}
	}

	rendered := map[string]string{"minion-id": "web01", "roles": "web", "roles__0": "web", ownership.MarkerKey: "cluster=c binding=a/b uid=u", ownership.KeysKey: "minion-id,roles"}
	replaced := map[string]string{"minion-id": "web01", "roles": "db", "saltstack": "x"}
	want := `metadata "roles" is "db", want "web"; "minionvault-keys", "minionvault-owner", "roles__0" missing; "saltstack" not rendered any more`
	for range 20 { // maps iterate in a new order each time
		if differs, why := metadataDiffers(rendered, replaced); !differs || why != want {
			t.Fatalf("metadataDiffers = %q, want %q", why, want)
		}
	}
	many := map[string]string{}
	for i := range 12 {
		many[fmt.Sprintf("k%02d", i)] = "v"
	}
	if _, why := metadataDiffers(many, map[string]string{}); !strings.HasSuffix(why, `"k07", and 4 more missing`) {
		t.Errorf("12 missing keys: %q", why)
	}
	changedMany := map[string]string{}
	for k := range many {
		changedMany[k] = "w"
	}
	if _, why := metadataDiffers(many, changedMany); !strings.HasSuffix(why, `"k07" is "w", want "v"; and 4 more`) {
		t.Errorf("12 changed keys: %q", why)
	}
}

// A role read carries fields the operator never writes: Vault's own
// (local_secret_ids, token_no_default_policy, the deprecated policies,
// period and bound_cidr_list), OpenBao's token_strictly_bind_ip (since
// OpenBao 2.0, sdk/helper/tokenutil PopulateTokenData), Vault
// Enterprise's alias_metadata (sdk v0.21.0 tokenutil: the field is
// Enterprise-only), and whatever a later server adds. None of them is
// drift, whatever its value or shape; a field the operator writes still
// is.
func TestRoleFieldsNotWrittenAreNotDrift(t *testing.T) {
	desired := []render.Param{
		{Name: "bind_secret_id", Value: true}, {Name: "secret_id_num_uses", Value: int64(1)},
		{Name: "token_num_uses", Value: int64(10)}, {Name: "token_policies", Value: []string{"salt_role_web"}},
	}
	base := func() map[string]any {
		return map[string]any{"bind_secret_id": true, "secret_id_num_uses": json.Number("1"),
			"token_num_uses": json.Number("10"), "token_policies": []any{"salt_role_web"}}
	}
	tests := []struct {
		name  string
		extra map[string]any
		drift string // "" for none
	}{
		{"OpenBao's token_strictly_bind_ip, off", map[string]any{"token_strictly_bind_ip": false}, ""},
		{"OpenBao's token_strictly_bind_ip, on", map[string]any{"token_strictly_bind_ip": true}, ""},
		{"Vault Enterprise's alias_metadata", map[string]any{"alias_metadata": map[string]any{"team": "salt"}}, ""},
		{"alias_metadata null", map[string]any{"alias_metadata": nil}, ""},
		{"Vault's fields the operator leaves", map[string]any{"local_secret_ids": false, "token_no_default_policy": false,
			"policies": []any{"salt_role_web"}, "period": json.Number("0"), "bound_cidr_list": nil, "secret_id_bound_cidrs": nil, "token_type": "default"}, ""},
		{"a field a later server adds, of any shape", map[string]any{"token_future_knob": map[string]any{"nested": []any{1, "x"}}}, ""},
		{"an unknown field beside a real difference", map[string]any{"token_strictly_bind_ip": true, "token_num_uses": json.Number("5")}, "token_num_uses is 5, want 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actual := base()
			for k, v := range tt.extra {
				actual[k] = v
			}
			differs, why := roleDiffers(desired, actual)
			if differs != (tt.drift != "") || why != tt.drift {
				t.Errorf("roleDiffers = %v %q, want %q", differs, why, tt.drift)
			}
		})
	}
}
