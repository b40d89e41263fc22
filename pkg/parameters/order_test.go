package parameters

import (
	"math"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

func TestSortKeys(t *testing.T) {
	tests := []struct{ in, want string }{
		{"{b: 1, a: 2}", "{a: 2, b: 1}"},
		{"{B: 1, a: 2, _: 3, é: 4, z: 5}", "{B: 1, _: 3, a: 2, z: 5, é: 4}"},
		{"[{b: 1, a: {d: 1, c: 2}}, [{y: 1, x: 2}]]", "[{a: {c: 2, d: 1}, b: 1}, [{x: 2, y: 1}]]"},
		{"{10: a, 9: b, 9.5: c, true: d, -1: e}", "{-1: e, true: d, 9: b, 9.5: c, 10: a}"},
		// Keys Python cannot compare: the mapping keeps its order, its
		// values are still sorted.
		{"{b: 1, 1: 2, a: {y: 1, x: 1}}", "{b: 1, 1: 2, a: {x: 1, y: 1}}"},
		{"{~: 1, a: 2}", "{~: 1, a: 2}"},
		{"{~: {b: 1, a: 1}}", "{~: {a: 1, b: 1}}"},
		{"{}", "{}"},
	}
	for _, tt := range tests {
		got := sortKeys(y(t, tt.in))
		want := y(t, tt.want)
		if p, ok := strictEqual(got, want, ""); !ok {
			t.Errorf("sortKeys(%s) = %s, want %s (at %s)", tt.in, got.PyRepr(), want.PyRepr(), p)
		}
	}
}

func TestSortKeysKeepsSortedSubtrees(t *testing.T) {
	in := y(t, "{a: {b: [1, {c: 1, d: 2}]}, b: 2}")
	if got := sortKeys(in); !same(got, in) {
		t.Error("an already sorted value was copied")
	}
	in = y(t, "{a: {b: [1, {d: 1, c: 2}]}, b: {x: 1}}")
	got := sortKeys(in)
	b1, _ := in.GetString("b")
	b2, _ := got.GetString("b")
	if !same(b1, b2) {
		t.Error("an unchanged sibling subtree was copied")
	}
}

func TestCmpNumbers(t *testing.T) {
	big := int64(1<<62 + 1) // not exactly representable as a float64
	tests := []struct {
		a, b value.Value
		want int
	}{
		{value.NewInt(1), value.NewInt(2), -1},
		{value.NewInt(2), value.NewFloat(1.5), 1},
		{value.NewFloat(1.5), value.NewInt(2), -1},
		{value.NewBool(true), value.NewFloat(1), 0},
		{value.NewBool(false), value.NewInt(-1), 1},
		{value.NewInt(big), value.NewFloat(float64(big)), 1},
		{value.NewFloat(float64(big)), value.NewInt(big), -1},
		{value.NewInt(math.MaxInt64), value.NewFloat(0x1p63), -1},
		{value.NewInt(math.MinInt64), value.NewFloat(-0x1p63), 0},
		{value.NewInt(-3), value.NewFloat(-2.5), -1},
		{value.NewInt(-2), value.NewFloat(-2.5), 1},
		{value.NewFloat(math.Inf(-1)), value.NewInt(math.MinInt64), -1},
		{value.NewFloat(math.NaN()), value.NewInt(1), 0},
	}
	for _, tt := range tests {
		if got := cmpNumbers(tt.a, tt.b); got != tt.want {
			t.Errorf("cmpNumbers(%s, %s) = %d, want %d", tt.a.PyRepr(), tt.b.PyRepr(), got, tt.want)
		}
	}
}
