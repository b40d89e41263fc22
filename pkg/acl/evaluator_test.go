package acl

import (
	"slices"
	"testing"
)

// Missing names the absent policies as Prepare does, for a disabled
// entity (none: every request fails first) and for root among them.
func TestEvaluatorMissing(t *testing.T) {
	ev, err := New(map[string]string{"a": rule("x", "read"), "t": rule("y/{{identity.entity.name}}", "read")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Subject{
		{TokenPolicies: []string{"a", "b", "t", "z"}, Entity: minion("web01", nil)},
		{TokenPolicies: []string{"a", "root", "q"}},
		{TokenPolicies: []string{"b"}, Entity: &Entity{Name: "off", Disabled: true}},
		{},
	} {
		if got, want := ev.Missing(s), ev.Prepare(s).Missing(); !slices.Equal(got, want) {
			t.Errorf("%v: Missing %q, Prepare %q", s.TokenPolicies, got, want)
		}
	}
	if got := ev.Missing(Subject{TokenPolicies: []string{"a", "b", "t", "z"}}); !slices.Equal(got, []string{"b", "z"}) {
		t.Errorf("Missing %q, want b and z", got)
	}
}
