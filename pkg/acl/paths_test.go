package acl

import (
	"errors"
	"fmt"
	"testing"
)

// MatchPattern is the stores' matching: every row agrees with the
// evaluator's answer for a policy holding only that pattern.
func TestMatchPattern(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"salt/data/roles/db", "salt/data/roles/db", true},
		{"salt/data/roles/db", "salt/data/roles/dbx", false},
		{"/salt/data/roles/db", "salt/data/roles/db", true},
		{"salt/data/+/db", "salt/data/roles/db", true},
		{"salt/data/+/db", "salt/data/roles/web", false},
		{"salt/data/+/db", "salt/data/a/b/db", false},
		{"salt/data/+/db", "salt/data//db", true}, // an empty segment is a segment
		{"salt/data/roles/*", "salt/data/roles/db", true},
		{"salt/data/roles/*", "salt/data/roles/", true},
		{"salt/data/roles/*", "salt/data/roles", false},
		{"salt/data/ro*", "salt/data/roles/db/x", true},
		{"salt/+/roles/d*", "salt/data/roles/db/x", true},
		{"salt/+/roles/d*", "salt/data/roles/web", false},
		{"+", "sys", true},
		{"+", "sys/mounts", false},
		{"*", "anything/at/all", true},
	}
	for _, c := range cases {
		got, err := MatchPattern(c.pattern, c.path)
		if err != nil || got != c.want {
			t.Errorf("MatchPattern(%q, %q) = %v, %v; want %v", c.pattern, c.path, got, err, c.want)
			continue
		}
		ev, err := New(map[string]string{"p": fmt.Sprintf("path %q {\n  capabilities = [\"read\"]\n}\n", c.pattern)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d := ev.Prepare(Subject{TokenPolicies: []string{"p"}}).Check(c.path); (d.Caps.Granted() != 0) != c.want {
			t.Errorf("%q on %q: the evaluator grants %v, MatchPattern says %v", c.pattern, c.path, d.Capabilities(), c.want)
		}
	}
	for _, bad := range []string{"salt/*/db", "salt/data/ro+les", "salt/+*", "a+/b"} {
		if _, err := MatchPattern(bad, "salt/data/roles/db"); err == nil {
			t.Errorf("MatchPattern(%q): no error", bad)
		} else if !errors.Is(err, ErrNotAPattern) && !errors.Is(err, ErrWildcards) {
			t.Errorf("MatchPattern(%q): %v", bad, err)
		}
	}
}
