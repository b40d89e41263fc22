package parameters

import (
	"errors"
	"fmt"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// j decodes JSON keeping key order and int/float.
func j(t testing.TB, s string) value.Value {
	t.Helper()
	v, err := value.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

// y decodes YAML, for keys JSON cannot write (ints, None).
func y(t testing.TB, s string) value.Value {
	t.Helper()
	v, err := value.DecodeYAML([]byte(s))
	if err != nil {
		t.Fatalf("bad test YAML %s: %v", s, err)
	}
	return v
}

func TestMerge(t *testing.T) {
	const (
		a = `{"k": {"x": 1, "y": [1, 2]}, "l": ["a", "b"], "s": "a", "only_a": 0}`
		b = `{"k": {"y": [2, 3], "z": 3}, "l": ["b", "c", "c"], "s": null, "only_b": 1}`
	)
	tests := []struct {
		name       string
		strategy   string
		mergeLists bool
		want       string
	}{
		{"smart", "smart", false,
			`{"k": {"x": 1, "y": [2, 3], "z": 3}, "l": ["b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		{"recurse", "recurse", false,
			`{"k": {"x": 1, "y": [2, 3], "z": 3}, "l": ["b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		// merge_lists: a + [x for x in b if x not in a]; b's own duplicates stay.
		{"smart merge_lists", "smart", true,
			`{"k": {"x": 1, "y": [1, 2, 3], "z": 3}, "l": ["a", "b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		{"recurse merge_lists", "recurse", true,
			`{"k": {"x": 1, "y": [1, 2, 3], "z": 3}, "l": ["a", "b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		// none and unknown names recurse but ignore merge_lists.
		{"none", "none", true,
			`{"k": {"x": 1, "y": [2, 3], "z": 3}, "l": ["b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		{"unknown", "bogus", true,
			`{"k": {"x": 1, "y": [2, 3], "z": 3}, "l": ["b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		{"case matters", "Recurse", true,
			`{"k": {"x": 1, "y": [2, 3], "z": 3}, "l": ["b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		// overwrite: top-level keys replaced wholesale, merge_lists or not.
		{"overwrite", "overwrite", false,
			`{"k": {"y": [2, 3], "z": 3}, "l": ["b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		{"overwrite merge_lists", "overwrite", true,
			`{"k": {"y": [2, 3], "z": 3}, "l": ["b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		// aggregate without !aggr tags is overwrite.
		{"aggregate", "aggregate", true,
			`{"k": {"y": [2, 3], "z": 3}, "l": ["b", "c", "c"], "s": null, "only_a": 0, "only_b": 1}`},
		// list: a's keys only, collisions become [a, b].
		{"list", "list", true,
			`{"k": [{"x": 1, "y": [1, 2]}, {"y": [2, 3], "z": 3}], "l": [["a", "b"], ["b", "c", "c"]], "s": ["a", null], "only_a": 0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			av, bv := j(t, a), j(t, b)
			got, err := Merge(av, bv, tt.strategy, tt.mergeLists)
			if err != nil {
				t.Fatal(err)
			}
			want := j(t, tt.want)
			if p, ok := strictEqual(got, want, ""); !ok {
				t.Errorf("at %s:\n got %s\nwant %s", p, jsonText(got), jsonText(want))
			}
			// Inputs are never modified.
			if p, ok := strictEqual(av, j(t, a), ""); !ok {
				t.Errorf("a modified at %s: %s", p, jsonText(av))
			}
			if p, ok := strictEqual(bv, j(t, b), ""); !ok {
				t.Errorf("b modified at %s: %s", p, jsonText(bv))
			}
		})
	}
}

func TestMergeDetails(t *testing.T) {
	tests := []struct {
		name, a, b, strategy string
		mergeLists           bool
		want                 string
	}{
		// Python dict keys: 1, 1.0 and True are one key, which keeps its
		// first spelling and place.
		{"equal keys", "{1: a, x: b}", "{true: c, 1.5: d}", "recurse", false, "{1: c, x: b, 1.5: d}"},
		// merge_lists compares with ==: 1.0 is already there as 1.
		{"list membership", "{l: [1, a]}", "{l: [1.0, true, b]}", "recurse", true, "{l: [1, a, b]}"},
		// A mapping meeting a non-mapping is replaced, either way round.
		{"map replaced by scalar", "{k: {x: 1}}", "{k: 0}", "recurse", false, "{k: 0}"},
		{"scalar replaced by map", "{k: 0}", "{k: {x: 1}}", "recurse", false, "{k: {x: 1}}"},
		{"list replaced by map", "{k: [1]}", "{k: {x: 1}}", "recurse", true, "{k: {x: 1}}"},
		{"null replaced by map", "{k: null}", "{k: {x: 1}}", "recurse", false, "{k: {x: 1}}"},
		// Deep recursion keeps order at every level.
		{"deep", "{a: {b: {c: 1, d: 2}}}", "{a: {b: {e: 3, c: 4}}}", "smart", false, "{a: {b: {c: 4, d: 2, e: 3}}}"},
		{"empty b", "{a: 1}", "{}", "overwrite", false, "{a: 1}"},
		{"empty a", "{}", "{a: 1}", "list", false, "{}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Merge(y(t, tt.a), y(t, tt.b), tt.strategy, tt.mergeLists)
			if err != nil {
				t.Fatal(err)
			}
			want := y(t, tt.want)
			if p, ok := strictEqual(got, want, ""); !ok {
				t.Errorf("at %s:\n got %s\nwant %s", p, got.PyRepr(), want.PyRepr())
			}
		})
	}
}

func TestMergeLargeMappings(t *testing.T) {
	// Past indexThreshold comparisons keys are found through a Go map:
	// same result.
	a, b := emptyMap, emptyMap
	for i := range 100 {
		k := value.NewString(fmt.Sprint("k", i))
		a = a.Set(k, value.NewInt(int64(i)))
		if i%3 == 0 {
			b = b.Set(k, value.NewString("b"))
		}
	}
	b = b.Set(value.NewString("new"), value.NewBool(true))
	for _, st := range []string{"recurse", "overwrite"} {
		got, err := Merge(a, b, st, false)
		if err != nil {
			t.Fatal(err)
		}
		if got.Len() != 101 {
			t.Fatalf("%s: %d keys, want 101", st, got.Len())
		}
		for i, p := range got.Pairs()[:100] {
			want := value.NewInt(int64(i))
			if i%3 == 0 {
				want = value.NewString("b")
			}
			if !value.Equal(p.Val, want) {
				t.Fatalf("%s: key %s = %s, want %s", st, p.Key.PyStr(), p.Val.PyRepr(), want.PyRepr())
			}
		}
	}
}

func TestMergeNonMapping(t *testing.T) {
	for _, st := range []string{"smart", "recurse", "overwrite", "list", "aggregate", "none", "bogus"} {
		for _, b := range []string{`"abc"`, `[1]`, `null`, `0`, `true`} {
			_, err := Merge(j(t, `{"a": 1}`), j(t, b), st, true)
			if !errors.Is(err, ErrMerge) {
				t.Errorf("%s: merging %s: err = %v, want ErrMerge", st, b, err)
			}
		}
		if _, err := Merge(j(t, `[]`), j(t, `{}`), st, false); !errors.Is(err, ErrMerge) {
			t.Errorf("%s: merging into a list: err = %v, want ErrMerge", st, err)
		}
	}
}

func TestToBool(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"true", true}, {"false", false}, {"null", false},
		{`"yes"`, true}, {`"YES"`, true}, {`"True"`, true}, {`"1"`, true}, {`"tRuE"`, true},
		{`"on"`, false}, {`"y"`, false}, {`"0"`, false}, {`""`, false}, {`" true"`, false},
		{"1", true}, {"2", true}, {"0", false}, {"-1", false},
		// Floats are hashable non-ints: always false for to_bool.
		{"1.0", false}, {"0.5", false},
		{"[0]", true}, {"[]", false}, {`{"a": 1}`, true}, {"{}", false},
	}
	for _, tt := range tests {
		if got := toBool(j(t, tt.in)); got != tt.want {
			t.Errorf("toBool(%s) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseStrategy(t *testing.T) {
	tests := []struct {
		in   value.Value
		want strategy
	}{
		{value.NewString("smart"), stRecurse},
		{value.NewString("recurse"), stRecurse},
		{value.NewString("overwrite"), stOverwrite},
		{value.NewString("aggregate"), stOverwrite},
		{value.NewString("list"), stList},
		{value.NewString("none"), stPlain},
		{value.NewString("SMART"), stPlain},
		{value.NewNull(), stPlain},
		{value.NewInt(1), stPlain},
	}
	for _, tt := range tests {
		if got := parseStrategy(tt.in); got != tt.want {
			t.Errorf("parseStrategy(%s) = %d, want %d", tt.in.PyRepr(), got, tt.want)
		}
	}
}
