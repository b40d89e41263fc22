package acl

import (
	"reflect"
	"strings"
	"testing"
)

// TestExplain checks the why of a few spec rows: the deciding policy and
// pattern, the rule that made it win, and the caveats.
func TestExplain(t *testing.T) {
	cases := []struct {
		name        string
		docs        map[string]string
		entity      *Entity
		path        string
		pattern     string
		policies    []string
		rule        string // substring
		caveat      string // substring of one caveat
		overPattern string
		version     string // the Vault version (default: the zero Mode, v1.21.4's)
	}{
		{name: "glob deny lost to exact allow (row 5)",
			docs: map[string]string{"a": rule("secret/*", "deny"), "b": rule("secret/foo", "read")},
			path: "secret/foo", pattern: "secret/foo", policies: []string{"b"},
			rule: "exact pattern decides", caveat: `deny on "secret/*" (a) matches but lost`, overPattern: "secret/*"},
		{name: "rule 2 (row 6)",
			docs: map[string]string{"a": rule("secret/*", "deny"), "b": rule("secret/+/x", "read")},
			path: "secret/a/x", pattern: "secret/+/x", policies: []string{"b"},
			rule: "rule 2", caveat: "lost to", overPattern: "secret/*"},
		{name: "rule 3 (row 14, vault #10096)",
			docs: map[string]string{"a": rule("secret/*", "list"), "b": rule("secret/+/prefix-*", "create", "update")},
			path: "secret/alice/prefix-test", pattern: "secret/*", policies: []string{"a"},
			rule: `rule 3: it has fewer + segments over "secret/+/prefix-*"`, overPattern: "secret/+/prefix-*"},
		{name: "rule 5 (row 13)",
			docs: map[string]string{"a": rule("secret/+/+/c", "read"), "b": rule("secret/+/b/+", "list")},
			path: "secret/a/b/c", pattern: "secret/+/b/+", policies: []string{"b"}, rule: "rule 5"},
		{name: "list fallback (row 1)",
			docs: map[string]string{"p": rule("secret/foo", "read")},
			path: "secret/foo/", pattern: "secret/foo", policies: []string{"p"}, caveat: "a real read of this path does not fall back"},
		{name: "dropped templated rule (row 28)",
			docs:   map[string]string{"p": rule("secret/data/{{identity.entity.metadata.roles__2}}/*", "read") + rule("secret/data/db/*", "list")},
			entity: minion("web01", map[string]string{"roles__0": "db"}),
			path:   "secret/data/db/k", pattern: "secret/data/db/*", policies: []string{"p"},
			caveat: `templated rule "secret/data/{{identity.entity.metadata.roles__2}}/*" of policy "p" is dropped`},
		{name: "glob value (row 32)",
			docs:   map[string]string{"p": rule("secret/{{identity.entity.metadata.glob}}", "read")},
			entity: minion("web01", map[string]string{"glob": "a*"}),
			path:   "secret/abc", pattern: "secret/a*", policies: []string{"p"}, caveat: "1.21.6, 2.0.1 and later drop"},
		{name: "parameter constraints",
			docs: map[string]string{"p": "path \"secret/x\" {\n  capabilities = [\"create\"]\n  allowed_parameters = { \"a\" = [] }\n}\n"},
			path: "secret/x", pattern: "secret/x", policies: []string{"p"}, caveat: "parameter constraints"},
		{name: "allowed_parameters, element by element since 1.21.0",
			docs: map[string]string{"p": "path \"secret/x\" {\n  capabilities = [\"create\"]\n  allowed_parameters = { \"a\" = [\"x\"] }\n}\n"},
			path: "secret/x", pattern: "secret/x", policies: []string{"p"}, caveat: "checked element by element (Vault 1.21.0 and later)"},
		{name: "allowed_parameters, a whole list before 1.21.0", version: "1.20.4",
			docs: map[string]string{"p": "path \"secret/x\" {\n  capabilities = [\"create\"]\n  allowed_parameters = { \"a\" = [\"x\"] }\n}\n"},
			path: "secret/x", pattern: "secret/x", policies: []string{"p"}, caveat: "must equal a listed value whole (before Vault 1.21.0)"},
		{name: "root-protected path without sudo",
			docs: map[string]string{"p": rule("sys/auth/*", "read", "update")},
			path: "sys/auth/approle", pattern: "sys/auth/*", policies: []string{"p"}, caveat: "also needs sudo"},
		{name: "uncleaned path (row 21)",
			docs: map[string]string{"p": rule("secret/+/x", "read")},
			path: "secret//x", pattern: "secret/+/x", policies: []string{"p"}, caveat: "served here, but Vault 1.21.5 and later refuse it"},
		{name: "uncleaned path refused since 1.21.5", version: "1.21.5",
			docs: map[string]string{"p": rule("secret/+/x", "read")},
			path: "secret/./x", pattern: "secret/+/x", policies: []string{"p"}, caveat: "a real request is refused (Vault 1.21.5 and later)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mode Mode
			if c.version != "" {
				var err error
				if mode, err = ModeForVersion(c.version); err != nil {
					t.Fatal(err)
				}
			}
			ev, err := New(c.docs, Options{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for n := range c.docs {
				names = append(names, n)
			}
			x := ev.Prepare(Subject{TokenPolicies: names, Entity: c.entity}).Explain(c.path)
			if x.Pattern != c.pattern || !reflect.DeepEqual(x.Policies, c.policies) {
				t.Fatalf("pattern %q policies %v, want %q %v\n%+v", x.Pattern, x.Policies, c.pattern, c.policies, x)
			}
			if !strings.Contains(x.Rule, c.rule) {
				t.Fatalf("rule %q, want it to contain %q", x.Rule, c.rule)
			}
			if c.caveat != "" && !containsSub(x.Caveats, c.caveat) {
				t.Fatalf("caveats %q, want one containing %q", x.Caveats, c.caveat)
			}
			if c.overPattern != "" && (len(x.Over) == 0 || x.Over[0].Pattern != c.overPattern) {
				t.Fatalf("over %+v, want %q first", x.Over, c.overPattern)
			}
		})
	}
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestPatterns is what-can's view: the templated rules rendered, the same
// key of the base and the templated rules merged.
func TestPatterns(t *testing.T) {
	ev, err := New(map[string]string{
		"a": rule("salt/web01/*", "read"),
		"b": rule("salt/{{identity.entity.name}}/*", "list") + rule("salt/{{identity.entity.metadata.nope}}", "read"),
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := ev.Prepare(Subject{TokenPolicies: []string{"a", "b"}, Entity: minion("web01", nil)})
	got := p.Patterns()
	if len(got) != 1 || got[0].Pattern != "salt/web01/*" || !reflect.DeepEqual(got[0].Capabilities, []string{"list", "read"}) || len(got[0].Sources) != 2 {
		t.Fatalf("patterns %+v", got)
	}
	if d := p.Dropped(); len(d) != 1 || d[0].Policy != "b" {
		t.Fatalf("dropped %+v", d)
	}
}

// A pattern with allowed or denied parameters carries the version's note
// on list values; other constraints (wrapping TTLs) do not.
func TestPatternsParametersNote(t *testing.T) {
	docs := map[string]string{"p": "path \"a\" {\n  capabilities = [\"create\"]\n  denied_parameters = { \"x\" = [\"y\"] }\n}\n" +
		"path \"b\" {\n  capabilities = [\"create\"]\n  min_wrapping_ttl = \"1s\"\n}\n"}
	for v, want := range map[string]string{"1.21.0": "element by element", "1.20.4": "whole"} {
		mode, err := ModeForVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := New(docs, Options{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		got := ev.Prepare(Subject{TokenPolicies: []string{"p"}}).Patterns()
		if len(got) != 2 || !got[0].Constrained || !strings.Contains(got[0].ParametersNote, want) || !got[1].Constrained || got[1].ParametersNote != "" {
			t.Fatalf("%s: %+v", v, got)
		}
	}
}

func TestRootProtected(t *testing.T) {
	cases := map[string]bool{
		"sys/auth/approle": true, "/sys/auth/x/tune": true, "sys/audit": true, "sys/audit/file": true,
		"sys/leases": true, "sys/leases/lookup": false, "sys/leases/lookup/x": true, "sys/seal": true,
		"sys/mounts": false, "sys/auth": false, "auth/token/create": false, "sys/rotate": true,
	}
	for p, want := range cases {
		if got := RootProtected(p); got != want {
			t.Errorf("RootProtected(%q) = %v, want %v", p, got, want)
		}
	}
}
