package vaultversion

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		err  bool
	}{
		{in: "1.21.4", want: Version{1, 21, 4}},
		{in: "v1.19.5", want: Version{1, 19, 5}},
		{in: "1.21.4+minionvault-minimal", want: Version{1, 21, 4}},
		{in: "1.19.5+ent", want: Version{1, 19, 5}},
		{in: "2.0.0-rc1", want: Version{2, 0, 0}},
		{in: " 2.1.0 ", want: Version{2, 1, 0}},
		{in: "", err: true},
		{in: "1.21", err: true},
		{in: "1.2.3.4", err: true},
		{in: "1.x.4", err: true},
		{in: "1.-1.4", err: true},
	} {
		got, err := Parse(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestAtLeast(t *testing.T) {
	v := Version{1, 21, 4}
	for _, tc := range []struct {
		ma, mi, pa int
		want       bool
	}{
		{1, 21, 4, true}, {1, 21, 3, true}, {1, 21, 5, false},
		{1, 20, 99, true}, {1, 22, 0, false}, {0, 99, 99, true}, {2, 0, 0, false},
	} {
		if got := v.AtLeast(tc.ma, tc.mi, tc.pa); got != tc.want {
			t.Errorf("%s.AtLeast(%d.%d.%d) = %v, want %v", v, tc.ma, tc.mi, tc.pa, got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1.21.4", "v1.19.5+ent", "2.0.0-rc1", "", "1..2", "+-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		// What parses prints as a version that parses back to itself.
		if w, err := Parse(v.String()); err != nil || w != v {
			t.Fatalf("Parse(%q) = %v, but Parse(%q) = %v, %v", s, v, v.String(), w, err)
		}
	})
}
