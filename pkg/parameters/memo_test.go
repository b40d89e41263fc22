package parameters

import (
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// TestMemoVectors runs every vector through Memos shared by the cases with
// the same root and files, twice, against Stack: the same mapdata (strictly)
// and the same error, whatever ran before.
func TestMemoVectors(t *testing.T) {
	cases := loadVectors(t)
	memos := map[string]*Memo{}
	ins := make([]Input, len(cases))
	for i, c := range cases {
		ins[i] = vectorInput(t, c)
	}
	for round := 0; round < 2; round++ {
		for i, c := range cases {
			in := ins[i]
			k := c.TplRoot + "\x00" + string(c.Files)
			m := memos[k]
			if m == nil {
				m = NewMemo(in.Root, in.Files)
				memos[k] = m
			}
			want, wantErr := Stack(in)
			got, err := m.Mapdata(in.Grains, in.Pillar, in.Opts)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("%s (round %d): error %v, want %v", c.Name, round, err, wantErr)
			}
			if p, ok := strictEqual(got, want.Mapdata, ""); !ok {
				t.Fatalf("%s (round %d): mapdata differs at %s:\n got %s\nwant %s", c.Name, round, p, jsonText(got), jsonText(want.Mapdata))
			}
		}
	}
}

// TestMemoShares: bindings differing only in what the stack does not read
// share one stack; a file named by a grain, or a pillar value, is not shared.
func TestMemoShares(t *testing.T) {
	files := map[string]value.Value{
		"f/parameters/defaults.yaml":         y(t, "values: {a: 1}"),
		"f/parameters/os_family/Debian.yaml": y(t, "values: {b: 2}"),
		"f/parameters/id/special.yaml":       y(t, "values: {c: 3}"),
		"f/parameters/os_family/RedHat.yaml": y(t, "values: {b: 4}"),
	}
	m := NewMemo("f", files)
	grains := func(id, fam string) value.Value {
		return y(t, "{id: "+id+", os_family: "+fam+"}")
	}
	for _, tc := range []struct {
		grains, pillar value.Value
		entries        int64
	}{
		{grains("a", "Debian"), value.Value{}, 1},
		{grains("b", "Debian"), y(t, "{roles: [web]}"), 1},
		{grains("c", "RedHat"), value.Value{}, 2},
		{grains("special", "Debian"), value.Value{}, 3},
		{grains("d", "Debian"), y(t, "{f: {lookup: {x: 1}}}"), 4},
		{grains("e", "Debian"), y(t, "{f: {lookup: {x: 1}}}"), 4},
		{grains("e", "Debian"), y(t, "{f: {lookup: {x: 1.0}}}"), 5},
	} {
		in := Input{Root: "f", Files: files, Grains: tc.grains, Pillar: tc.pillar}
		want, wantErr := Stack(in)
		got, err := m.Mapdata(in.Grains, in.Pillar, in.Opts)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("error %v, want %v", err, wantErr)
		}
		if p, ok := strictEqual(got, want.Mapdata, ""); !ok {
			t.Fatalf("mapdata differs at %s: got %s, want %s", p, jsonText(got), jsonText(want.Mapdata))
		}
		if n := m.n.Load(); n != tc.entries {
			t.Fatalf("%s: %d stacks kept, want %d", jsonText(tc.grains), n, tc.entries)
		}
	}
}
