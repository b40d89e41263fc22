package acl

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// rule writes one path stanza.
func rule(path string, caps ...string) string {
	q := make([]string, len(caps))
	for i, c := range caps {
		q[i] = fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf("path %q {\n  capabilities = [%s]\n}\n", path, strings.Join(q, ", "))
}

var (
	v1214 = Mode{}
	v1216 = Mode{RejectTemplatedGlobs: true}
)

// minion is an entity as the operator writes it.
func minion(name string, md map[string]string) *Entity {
	return &Entity{ID: "ent-" + name, Name: name, Metadata: md}
}

// specApprole is the AppRole mount accessor the spec cases use (the
// integration test puts the live one in its place).
const specApprole = "auth_approle_1234"

// specCase is one row of section 2 of the ACL specification.
type specCase struct {
	row      string
	docs     map[string]string
	mode     Mode
	subject  Subject // TokenPolicies default to every document's name
	entity   *Entity
	path     string
	want     []string
	wantErr  error
	wantStep Step
}

// tokenPolicies are the case's token policies: every document's name
// unless the case says otherwise.
func (c specCase) tokenPolicies() []string {
	if c.subject.TokenPolicies != nil || strings.HasPrefix(c.row, "39") {
		return c.subject.TokenPolicies
	}
	var out []string
	for n := range c.docs {
		out = append(out, n)
	}
	return out
}

// specCases are section 2 of the ACL specification: each row with Vault
// v1.21.4's answer (and the fixed releases' where they differ).
func specCases() []specCase {
	const approle = specApprole
	return []specCase{
		{row: "01 exact-trimmed list fallback gives all caps", docs: map[string]string{"p": rule("secret/foo", "read")},
			path: "secret/foo/", want: []string{"read"}, wantStep: StepExactTrimmed},
		{row: "02 exact is exact", docs: map[string]string{"p": rule("secret/foo", "read")},
			path: "secret/food", want: []string{"deny"}, wantStep: StepNone},
		{row: "03 prefix is byte-wise", docs: map[string]string{"p": rule("secret/foo*", "read")},
			path: "secret/food/x", want: []string{"read"}, wantStep: StepNonExact},
		{row: "04 exact deny beats glob", docs: map[string]string{"a": rule("secret/*", "read"), "b": rule("secret/foo", "deny")},
			path: "secret/foo", want: []string{"deny"}, wantStep: StepExact},
		{row: "05 glob deny does not override exact allow", docs: map[string]string{"a": rule("secret/*", "deny"), "b": rule("secret/foo", "read")},
			path: "secret/foo", want: []string{"read"}, wantStep: StepExact},
		{row: "06 rule 2 non-prefix wins, loser's deny ignored", docs: map[string]string{"a": rule("secret/*", "deny"), "b": rule("secret/+/x", "read")},
			path: "secret/a/x", want: []string{"read"}},
		{row: "07 same key union", docs: map[string]string{"a": rule("secret/foo", "read"), "b": rule("secret/foo", "list", "update")},
			path: "secret/foo", want: []string{"list", "read", "update"}},
		{row: "08 same key deny sticks", docs: map[string]string{"a": rule("secret/foo", "read"), "b": rule("secret/foo", "deny")},
			path: "secret/foo", want: []string{"deny"}},
		{row: "08b same key deny sticks, other order", docs: map[string]string{"a": rule("secret/foo", "deny"), "b": rule("secret/foo", "read")},
			path: "secret/foo", want: []string{"deny"}},
		{row: "08c same key deny sticks within one policy", docs: map[string]string{"a": rule("secret/foo", "deny") + rule("secret/foo", "read")},
			path: "secret/foo", want: []string{"deny"}},
		{row: "09 deny anywhere in the list", docs: map[string]string{"p": rule("secret/foo", "read", "deny")},
			path: "secret/foo", want: []string{"deny"}},
		{row: "10 empty capabilities claim the exact path", docs: map[string]string{"p": rule("secret/foo"), "q": rule("secret/*", "read")},
			path: "secret/foo", want: []string{"deny"}, wantStep: StepExact},
		{row: "11 rule 2", docs: map[string]string{"a": rule("secret/+", "read"), "b": rule("secret/*", "list")},
			path: "secret/a", want: []string{"read"}},
		{row: "12 rule 1 later first wildcard", docs: map[string]string{"a": rule("secret/+/b", "read"), "b": rule("secret/a/+", "list")},
			path: "secret/a/b", want: []string{"list"}},
		{row: "13 rule 5 byte order", docs: map[string]string{"a": rule("secret/+/+/c", "read"), "b": rule("secret/+/b/+", "list")},
			path: "secret/a/b/c", want: []string{"list"}},
		{row: "14 rule 3 (vault #10096)", docs: map[string]string{"a": rule("secret/*", "list"), "b": rule("secret/+/prefix-*", "create", "update")},
			path: "secret/alice/prefix-test", want: []string{"list"}},
		{row: "15 rule 2 segment", docs: map[string]string{"a": rule("secret/+/ba*", "read"), "b": rule("secret/+/bar", "list")},
			path: "secret/x/bar", want: []string{"list"}},
		{row: "16 rule 4 longer", docs: map[string]string{"a": rule("secret/+/b*", "read"), "b": rule("secret/+/ba*", "list")},
			path: "secret/x/bar", want: []string{"list"}},
		{row: "17 trailing slash tries trimmed first", docs: map[string]string{"a": rule("secret/fo*", "read"), "b": rule("secret/foo/*", "list")},
			path: "secret/foo/", want: []string{"read"}, wantStep: StepNonExactTrimmed},
		{row: "18 trimmed segment match", docs: map[string]string{"p": rule("secret/+", "list")},
			path: "secret/a/", want: []string{"list"}, wantStep: StepNonExactTrimmed},
		{row: "19 segment counts differ", docs: map[string]string{"p": rule("secret/+/", "list")},
			path: "secret/a", want: []string{"deny"}},
		{row: "20a +/* needs the extra segment", docs: map[string]string{"p": rule("secret/+/*", "read")},
			path: "secret/x", want: []string{"deny"}},
		{row: "20b +/* with the empty segment", docs: map[string]string{"p": rule("secret/+/*", "read")},
			path: "secret/x/", want: []string{"read"}},
		{row: "21 + matches an empty segment", docs: map[string]string{"p": rule("secret/+/x", "read")},
			path: "secret//x", want: []string{"read"}},
		{row: "22a mid-path * is literal", docs: map[string]string{"p": rule("secret/foo/*/bar", "read")},
			path: "secret/foo/x/bar", want: []string{"deny"}},
		{row: "22b mid-path * matches itself", docs: map[string]string{"p": rule("secret/foo/*/bar", "read")},
			path: "secret/foo/*/bar", want: []string{"read"}},
		{row: "23 both first wildcard at 0, rule 2", docs: map[string]string{"p": rule("*", "read"), "q": rule("+/x", "list")},
			path: "a/x", want: []string{"list"}},
		{row: "24a /+ab matches literally", docs: map[string]string{"p": rule("secret/+ab", "read"), "q": rule("secret/*", "list")},
			path: "secret/+ab", want: []string{"read"}},
		{row: "24b /+ab does not match other text", docs: map[string]string{"p": rule("secret/+ab", "read"), "q": rule("secret/*", "list")},
			path: "secret/xab", want: []string{"list"}},
		{row: "25a one leading slash stripped in the policy", docs: map[string]string{"p": rule("/secret/foo", "read")},
			path: "secret/foo", want: []string{"read"}},
		{row: "25b all leading slashes stripped in the query", docs: map[string]string{"p": rule("secret/foo", "read")},
			path: "//secret/foo", want: []string{"read"}},
		{row: "25c only one slash stripped in the policy", docs: map[string]string{"p": rule("//secret/foo", "read")},
			path: "secret/foo", want: []string{"deny"}},
		{row: "26 old-style write", docs: map[string]string{"p": "path \"secret/foo\" {\n  policy = \"write\"\n}\n"},
			path: "secret/foo", want: []string{"create", "delete", "list", "read", "update"}},
		{row: "26b old-style read appended to capabilities", docs: map[string]string{"p": "path \"secret/foo\" {\n  capabilities = [\"patch\"]\n  policy = \"read\"\n}\n"},
			path: "secret/foo", want: []string{"list", "patch", "read"}},
		{row: "26c old-style deny replaces", docs: map[string]string{"p": "path \"secret/foo\" {\n  capabilities = [\"read\"]\n  policy = \"deny\"\n}\n"},
			path: "secret/foo", want: []string{"deny"}},
		{row: "26d old-style sudo", docs: map[string]string{"p": "path \"secret/foo\" {\n  policy = \"sudo\"\n}\n"},
			path: "secret/foo", want: []string{"create", "delete", "list", "read", "sudo", "update"}},
		{row: "27 templating", docs: map[string]string{"p": rule("secret/data/{{identity.entity.metadata.roles__0}}/*", "read")},
			entity: minion("web01", map[string]string{"roles__0": "db"}), path: "secret/data/db/k", want: []string{"read"}},
		{row: "28 missing key drops the rule", docs: map[string]string{"p": rule("secret/data/{{identity.entity.metadata.roles__2}}/*", "read")},
			entity: minion("web01", map[string]string{"roles__0": "db"}), path: "secret/data/db/k", want: []string{"deny"}},
		{row: "29 only the one rule is dropped", docs: map[string]string{"p": rule("secret/data/{{identity.entity.metadata.roles__2}}/*", "read") + rule("secret/data/db/*", "list")},
			entity: minion("web01", map[string]string{"roles__0": "db"}), path: "secret/data/db/k", want: []string{"list"}},
		{row: "30 no entity drops the rule", docs: map[string]string{"p": rule("secret/{{identity.entity.name}}", "read")},
			path: "secret/", want: []string{"deny"}},
		{row: "31 whitespace in braces trimmed", docs: map[string]string{"p": rule("secret/{{ identity.entity.name }}", "read")},
			entity: minion("salt_minion_web01", nil), path: "secret/salt_minion_web01", want: []string{"read"}},
		{row: "32 v1.21.4 glob value becomes a prefix", docs: map[string]string{"p": rule("secret/{{identity.entity.metadata.glob}}", "read")},
			entity: minion("web01", map[string]string{"glob": "a*"}), path: "secret/abc", want: []string{"read"}},
		{row: "32 v1.21.6 glob value dropped", docs: map[string]string{"p": rule("secret/{{identity.entity.metadata.glob}}", "read")}, mode: v1216,
			entity: minion("web01", map[string]string{"glob": "a*"}), path: "secret/abc", want: []string{"deny"}},
		{row: "33 v1.21.4 + value becomes a segment wildcard", docs: map[string]string{"p": rule("secret/{{identity.entity.metadata.seg}}/k", "read")},
			entity: minion("web01", map[string]string{"seg": "+"}), path: "secret/zzz/k", want: []string{"read"}},
		{row: "33 v1.21.6 + value dropped", docs: map[string]string{"p": rule("secret/{{identity.entity.metadata.seg}}/k", "read")}, mode: v1216,
			entity: minion("web01", map[string]string{"seg": "+"}), path: "secret/zzz/k", want: []string{"deny"}},
		{row: "34 v1.21.4 rendered +* fails every request", docs: map[string]string{"p": rule("secret/{{identity.entity.metadata.bad}}*", "read"), "q": rule("other/*", "read")},
			entity: minion("web01", map[string]string{"bad": "ab+"}), path: "other/x", wantErr: ErrTemplatedPolicy},
		{row: "34 v1.21.6 rendered +* dropped", docs: map[string]string{"p": rule("secret/{{identity.entity.metadata.bad}}*", "read"), "q": rule("other/*", "read")}, mode: v1216,
			entity: minion("web01", map[string]string{"bad": "ab+"}), path: "secret/ab+c", want: []string{"deny"}},
		{row: "35 slash injection", docs: map[string]string{"p": rule("secret/{{identity.entity.metadata.slash}}", "read")},
			entity: minion("web01", map[string]string{"slash": "x/y"}), path: "secret/x/y", want: []string{"read"}},
		{row: "35 deny_slash_in_templated_paths", docs: map[string]string{"p": rule("secret/{{identity.entity.metadata.slash}}", "read")}, mode: Mode{RejectTemplatedGlobs: true, DenySlash: true},
			entity: minion("web01", map[string]string{"slash": "x/y"}), path: "secret/x/y", want: []string{"deny"}},
		{row: "36 AppRole alias role_name", docs: map[string]string{"p": rule("salt/minions/{{identity.entity.aliases."+approle+".metadata.role_name}}", "read")},
			entity: &Entity{ID: "e1", Name: "web01", Aliases: []Alias{{ID: "a1", Name: "role-id-1", MountAccessor: approle, Metadata: map[string]string{"role_name": "web01"}}}},
			path:   "salt/minions/web01", want: []string{"read"}},
		{row: "37 alias not found drops the rule", docs: map[string]string{"p": rule("salt/{{identity.entity.aliases.auth_nope.name}}", "read") + rule("salt/*", "list")},
			entity: &Entity{ID: "e1", Name: "web01", Aliases: []Alias{{ID: "a1", Name: "role-id-1", MountAccessor: approle}}},
			path:   "salt/role-id-1", want: []string{"list"}},
		{row: "38 disabled entity", docs: map[string]string{"p": rule("secret/*", "read")},
			entity: &Entity{ID: "e1", Name: "web01", Disabled: true}, path: "secret/x", wantErr: ErrInvalidToken},
		{row: "39 no policy names", docs: map[string]string{"p": rule("*", "read")},
			subject: Subject{TokenPolicies: LoginPolicies(nil, false)}, path: "secret/x", want: []string{"deny"}},
		{row: "40 unknown policy skipped", docs: map[string]string{"p": rule("secret/*", "read")},
			subject: Subject{TokenPolicies: []string{"nope", "p"}}, path: "secret/x", want: []string{"read"}},
		{row: "40b only an unknown policy", docs: map[string]string{"p": rule("secret/*", "read")},
			subject: Subject{TokenPolicies: []string{"nope"}}, path: "secret/x", want: []string{"deny"}},
		{row: "41 names lower-cased and trimmed", docs: map[string]string{"Salt_Role_Web": rule("secret/*", "read")},
			subject: Subject{TokenPolicies: []string{" Salt_Role_Web "}}, path: "secret/x", want: []string{"read"}},
		{row: "42 identity policies are live", docs: map[string]string{"p": rule("secret/p", "read"), "r": rule("secret/r", "read")},
			subject: Subject{TokenPolicies: []string{"r"}}, entity: &Entity{ID: "e1", Name: "web01", Policies: []string{"p"}},
			path: "secret/p", want: []string{"read"}},
		{row: "42b no_identity_policies", docs: map[string]string{"p": rule("secret/p", "read"), "r": rule("secret/r", "read")},
			subject: Subject{TokenPolicies: []string{"r"}, NoIdentityPolicies: true}, entity: &Entity{ID: "e1", Name: "web01", Policies: []string{"p"}},
			path: "secret/p", want: []string{"deny"}},
		{row: "42c group policies", docs: map[string]string{"g": rule("secret/g", "read")},
			subject: Subject{TokenPolicies: []string{"default"}, Groups: []Group{{ID: "g1", Name: "db", Policies: []string{"g"}}}},
			entity:  minion("web01", nil), path: "secret/g", want: []string{"read"}},
		{row: "43 root token", docs: map[string]string{"p": rule("secret/*", "deny")},
			subject: Subject{TokenPolicies: []string{"root"}}, path: "anything", want: []string{"root"}},
		{row: "43b root beside another policy", docs: map[string]string{"p": rule("secret/*", "deny")},
			subject: Subject{TokenPolicies: []string{"root"}, Entity: &Entity{ID: "e", Name: "n", Policies: []string{"p"}}},
			path:    "anything", wantErr: ErrRootWithOthers},
		{row: "47 time.now renders", docs: map[string]string{"p": rule("tmp/{{time.now}}", "read")},
			path: "tmp/1700000000", want: []string{"read"}},
		{row: "default policy templated rule", docs: map[string]string{"default": DefaultPolicy},
			subject: Subject{TokenPolicies: []string{"default"}}, entity: &Entity{ID: "e-1", Name: "web01"},
			path: "identity/entity/name/web01", want: []string{"read"}},
		{row: "default policy segment rule", docs: map[string]string{"default": DefaultPolicy},
			subject: Subject{TokenPolicies: []string{"default"}}, entity: &Entity{ID: "e-1", Name: "web01"},
			path: "identity/oidc/provider/x/authorize", want: []string{"read", "update"}},
		{row: "metadata present and empty is substituted", docs: map[string]string{"p": rule("salt/{{identity.entity.metadata.env}}/x", "read")},
			entity: minion("web01", map[string]string{"env": ""}), path: "salt//x", want: []string{"read"}},
		{row: "empty path", docs: map[string]string{"p": rule("*", "read")}, path: "", wantErr: ErrMissingPath},
	}
}

// TestSpecEdgeCases runs the rows of section 2 through the evaluator.
func TestSpecEdgeCases(t *testing.T) {
	for _, c := range specCases() {
		t.Run(c.row, func(t *testing.T) {
			ev, err := New(c.docs, Options{Mode: c.mode, Now: func() time.Time { return time.Unix(1700000000, 0) }})
			if err != nil {
				t.Fatal(err)
			}
			s := c.subject
			s.TokenPolicies = c.tokenPolicies()
			if c.entity != nil {
				s.Entity = c.entity
			}
			d := ev.Prepare(s).Check(c.path)
			if c.wantErr != nil {
				if !errors.Is(d.Err, c.wantErr) {
					t.Fatalf("error %v, want %v", d.Err, c.wantErr)
				}
				return
			}
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			if got := d.Capabilities(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("capabilities %v, want %v (pattern %q, %s)", got, c.want, d.Pattern(), d.Step)
			}
			if c.wantStep != 0 && d.Step != c.wantStep {
				t.Fatalf("step %q, want %q", d.Step, c.wantStep)
			}
		})
	}
}

// TestSpecWriteTime covers the rows about what Vault refuses when a policy
// is written (44, 45).
func TestSpecWriteTime(t *testing.T) {
	cases := []struct {
		name, doc string
		wantErr   bool
	}{
		{"44 deny then bogus accepted", `path "a" { capabilities = ["deny", "bogus"] }`, false},
		{"44 bogus then deny refused", `path "a" { capabilities = ["bogus", "deny"] }`, true},
		{"45 +* refused", `path "a+*" { capabilities = ["read"] }`, true},
		{"45 unbalanced braces refused", `path "x/{{identity.entity.name}}}}" { capabilities = ["read"] }`, true},
		{"45 closing braces first refused", `path "x/}}{{identity.entity.name}}" { capabilities = ["read"] }`, true},
		{"unknown selector accepted", `path "x/{{identity.entity.foo}}" { capabilities = ["read"] }`, false},
		{"unknown key refused", `path "a" { capabilities = ["read"] nope = 1 }`, true},
		{"unknown top-level key refused", `paths "a" { capabilities = ["read"] }`, true},
		{"invalid old-style policy refused", `path "a" { policy = "all" }`, true},
		{"capabilities must be a list", `path "a" { capabilities = "read" }`, true},
		{"all new capabilities accepted", `path "a" { capabilities = ["patch", "subscribe", "recover", "sudo"] }`, false},
		{"parameters accepted", `path "a" {
  capabilities = ["create"]
  allowed_parameters = { "x" = ["1"] }
  required_parameters = ["x"]
}`, false},
		{"wrapping TTLs accepted", `path "a" {
  capabilities = ["read"]
  min_wrapping_ttl = "1m"
  max_wrapping_ttl = 3600
}`, false},
		{"max wrapping TTL below min refused", `path "a" {
  capabilities = ["read"]
  min_wrapping_ttl = "1h"
  max_wrapping_ttl = "1m"
}`, true},
		{"bad wrapping TTL refused", `path "a" {
  capabilities = ["read"]
  min_wrapping_ttl = "soon"
}`, true},
		{"control group without factors refused", `path "a" {
  capabilities = ["read"]
  control_group = { ttl = "1h" }
}`, true},
		{"empty document", ``, false},
		{"json document", `{"path": {"a/b": {"capabilities": ["read"]}}}`, false},
		{"not hcl", `path "a" {`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p", c.doc)
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want error %v", err, c.wantErr)
			}
		})
	}
}

// TestSpecLoginPolicies is row 41 (and 39): what a login makes of a
// role's token_policies.
func TestSpecLoginPolicies(t *testing.T) {
	cases := []struct {
		in         []string
		addDefault bool
		want       []string
	}{
		{[]string{"Salt_Role_Web"}, true, []string{"default", "salt_role_web"}},
		{[]string{"b", " A ", "b"}, false, []string{"a", "b"}},
		{nil, false, nil},
		{[]string{"web", "root"}, true, []string{"root"}},
	}
	for _, c := range cases {
		if got := LoginPolicies(c.in, c.addDefault); !reflect.DeepEqual(got, c.want) {
			t.Errorf("LoginPolicies(%q, %v) = %q, want %q", c.in, c.addDefault, got, c.want)
		}
	}
}

// TestSpecCommaPaths is row 46.
func TestSpecCommaPaths(t *testing.T) {
	if got := SplitPaths("a, b"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("SplitPaths = %q", got)
	}
}

// TestSpecTimeNowFlagged is row 47: a time.now path is rendered, and
// flagged as not auditable.
func TestSpecTimeNowFlagged(t *testing.T) {
	ev, err := New(map[string]string{"p": rule("tmp/{{time.now.plus.1h}}", "read")}, Options{Now: func() time.Time { return time.Unix(100, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	p := ev.Prepare(Subject{TokenPolicies: []string{"p"}})
	r := p.Rendered()
	if len(r) != 1 || r[0].Path != "tmp/3700" || !r[0].Time {
		t.Fatalf("rendered %+v", r)
	}
}

// TestModeForVersion is every version switch across the tested lines
// (1.15 to 1.21), the patch releases where a switch flips, and 2.x.
func TestModeForVersion(t *testing.T) {
	// reject: templated * or + dropped; refuse: uncleaned real requests
	// refused; whole: list parameters matched whole; norec: no recover
	// capability; dup: an attribute set twice accepted.
	type want struct{ reject, refuse, whole, norec, dup bool }
	old := want{whole: true, norec: true, dup: true} // 1.15 to 1.19
	v120 := want{whole: true, dup: true}             // 1.20.0 to 1.20.10
	v121 := want{}                                   // 1.21.0 to 1.21.4
	cases := map[string]want{
		"1.15.0": old, "1.15.6": old, "v1.16.3": old, "1.17.6": old, "1.18.0": old, "1.18.5": old,
		"1.19.0": old, "1.19.5": old, "1.19.16": old, "1.19.17": {reject: true, whole: true, norec: true, dup: true},
		"1.19.17+ent": {reject: true, whole: true, norec: true, dup: true},
		"1.20.0":      v120, "1.20.4": v120, "1.20.10": v120, "1.20.11": {reject: true, whole: true, dup: true},
		"1.21.0": v121, "1.21.4": v121, "1.21.4+ent": v121, "1.21.4+minionvault-minimal": v121, "1.21.5-rc1": {refuse: true},
		"v1.21.5": {refuse: true}, "1.21.6": {reject: true, refuse: true}, "1.22.0": {reject: true, refuse: true},
		"2.0.0": {refuse: true}, "2.0.1": {reject: true, refuse: true}, "2.1.0": {reject: true, refuse: true},
		"3.0.0": {reject: true, refuse: true},
	}
	for v, w := range cases {
		m, err := ModeForVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		got := want{m.RejectTemplatedGlobs, m.RefuseUncleanedPaths, m.WholeListParameters, m.NoRecover, m.AllowDuplicateAttributes}
		if got != w || m.DenySlash {
			t.Errorf("%s: %+v, want %+v", v, got, w)
		}
		if strings.ContainsAny(m.Version, "v+-") || len(m.Rules()) < 4 {
			t.Errorf("%s: version %q, rules %q", v, m.Version, m.Rules())
		}
	}
	if m, _ := ModeForVersion("v1.21.4+ent"); m.Version != "1.21.4" {
		t.Errorf("version %q", m.Version)
	}
	// The zero Mode is v1.21.4's.
	if m, _ := ModeForVersion("1.21.4"); !reflect.DeepEqual(m.Rules(), Mode{}.Rules()) {
		t.Errorf("1.21.4 %q, zero %q", m.Rules(), Mode{}.Rules())
	}
	for _, bad := range []string{"latest", "", "1.21", "1.21.x", "1.-1.0", "1.21.4.1"} {
		if _, err := ModeForVersion(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// A policy Vault refuses in one release and accepts in another: recover
// before 1.20.0, an attribute set twice from 1.21.0.
func TestParseByVersion(t *testing.T) {
	recover := rule("secret/x", "read", "recover")
	dup := "path \"secret/x\" {\n  capabilities = [\"read\"]\n  capabilities = [\"list\"]\n}\n"
	cases := []struct {
		version, doc string
		ok           bool
		caps         []string // on secret/x
	}{
		{"1.19.5", recover, false, nil},
		{"1.20.0", recover, true, []string{"read", "recover"}},
		{"1.21.4", recover, true, []string{"read", "recover"}},
		{"1.19.5", rule("secret/x", "deny", "recover"), true, []string{"deny"}}, // the walk stops at deny
		{"1.19.5", dup, true, nil},
		{"1.20.4", dup, true, nil},
		{"1.21.0", dup, false, nil},
		{"1.21.4", dup, false, nil},
	}
	for _, c := range cases {
		mode, err := ModeForVersion(c.version)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := New(map[string]string{"p": c.doc}, Options{Mode: mode})
		if (err == nil) != c.ok {
			t.Errorf("%s %q: error %v, want ok %v", c.version, c.doc, err, c.ok)
			continue
		}
		if err != nil {
			continue
		}
		got := ev.Prepare(Subject{TokenPolicies: []string{"p"}}).Check("secret/x").Capabilities()
		if c.caps != nil && !reflect.DeepEqual(got, c.caps) {
			t.Errorf("%s %q: %v, want %v", c.version, c.doc, got, c.caps)
		}
		if c.caps == nil && len(got) == 0 {
			t.Errorf("%s %q: no answer", c.version, c.doc)
		}
	}
	if _, err := New(map[string]string{"p": dup}, Options{}); err == nil || !strings.Contains(err.Error(), duplicateText) {
		t.Errorf("the zero mode (1.21.4): %v", err)
	}
}
