package acl

import (
	"testing"
)

// FuzzParseAndCheck feeds arbitrary policy text, metadata and paths
// through the parser, the templating and the evaluator: nothing may panic,
// and Check and Explain must agree.
func FuzzParseAndCheck(f *testing.F) {
	f.Add(rule("secret/+/x*", "read"), "secret/a/xy", "a*")
	f.Add(rule("secret/{{identity.entity.metadata.k}}*", "deny"), "secret/ab/", "ab+")
	f.Add(`{"path": {"a/b": {"capabilities": ["read"]}}}`, "a/b", "")
	f.Add(`path "x" { policy = "write" }`+"\n"+rule("*", "list"), "/x/", "+/x")
	f.Add(rule("identity/entity/name/{{identity.entity.name}}", "read"), "identity/entity/name/web01", "x")
	f.Fuzz(func(t *testing.T, doc, path, value string) {
		ev, err := New(map[string]string{"p": doc, "q": rule("+/{{identity.entity.metadata.k}}/*", "read")}, Options{})
		if err != nil {
			return
		}
		for _, mode := range []Mode{{}, {RejectTemplatedGlobs: true, DenySlash: true}} {
			ev.opts.Mode = mode
			ev.compiled = map[string]*base{}
			p := ev.Prepare(Subject{TokenPolicies: []string{"p", "q"}, Entity: &Entity{ID: "e", Name: value, Metadata: map[string]string{"k": value}}})
			d := p.Check(path)
			x := p.Explain(path)
			if d.Err == nil && len(x.Capabilities) == 0 {
				t.Fatalf("explain has no capabilities for %q", path)
			}
			_ = p.Patterns()
		}
	})
}
