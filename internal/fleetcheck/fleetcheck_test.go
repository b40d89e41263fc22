package fleetcheck

import (
	"encoding/json"
	"testing"
)

// TestSameParam: role parameters as Vault answers them (JSON numbers,
// lists of any) against the rendered ones.
func TestSameParam(t *testing.T) {
	tests := []struct {
		got, want any
		same      bool
	}{
		{json.Number("60"), int64(60), true},
		{json.Number("61"), int64(60), false},
		{true, true, true},
		{false, true, false},
		{[]any{"a", "b"}, []string{"a", "b"}, true},
		{[]any{"b", "a"}, []string{"a", "b"}, false},
		{[]any{"a"}, []string{"a", "b"}, false},
		{nil, []string{}, true},
		{nil, []string{"a"}, false},
		{"default", "default", true},
	}
	for _, tc := range tests {
		if got := sameParam(tc.got, tc.want); got != tc.same {
			t.Errorf("sameParam(%#v, %#v) = %v", tc.got, tc.want, got)
		}
	}
}

func TestMapDiff(t *testing.T) {
	if d := mapDiff(map[string]string{"a": "1"}, map[string]string{"a": "1"}); d != "" {
		t.Errorf("equal maps: %s", d)
	}
	d := mapDiff(map[string]string{"a": "1", "x": "y"}, map[string]string{"a": "2", "b": "3"})
	want := `"a" is "1", want "2", "b" missing (want "3"), "x" = "y" not wanted`
	if d != want {
		t.Errorf("mapDiff = %s, want %s", d, want)
	}
}
