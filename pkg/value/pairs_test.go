package value

import (
	"math"
	"math/rand"
	"testing"
)

// pairSet must build exactly what the linear setPair builds: same keys, in
// the same order, with the same values, for keys of every scalar kind.
func TestPairSetMatchesLinearSetPair(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	keys := []Value{
		NewNull(), NewBool(true), NewBool(false), NewInt(0), NewInt(1), NewInt(-7), NewFloat(1.0), NewFloat(0.5),
		NewFloat(-0.0), NewFloat(math.NaN()), NewFloat(math.Inf(1)), NewFloat(1e20), NewFloat(9.223372036854775807e18),
		NewInt(math.MaxInt64), NewString("1"), NewString(""), NewString("a"),
	}
	for round := 0; round < 200; round++ {
		var linear []Pair
		var ps pairSet
		n := rnd.Intn(300)
		for i := 0; i < n; i++ {
			var k Value
			if rnd.Intn(3) == 0 {
				k = keys[rnd.Intn(len(keys))]
			} else {
				k = NewInt(int64(rnd.Intn(80)))
				if rnd.Intn(2) == 0 {
					k = NewFloat(float64(rnd.Intn(80)) / 2)
				}
			}
			v := NewInt(int64(i))
			linear = setPair(linear, k, v)
			ps.set(k, v)
		}
		if len(linear) != len(ps.pairs) {
			t.Fatalf("round %d: %d pairs, linear %d", round, len(ps.pairs), len(linear))
		}
		for i := range linear {
			a, b := linear[i], ps.pairs[i]
			if a.Key.PyRepr() != b.Key.PyRepr() || !Equal(a.Val, b.Val) {
				t.Fatalf("round %d, pair %d: %s: %s, linear %s: %s", round, i, b.Key.PyRepr(), b.Val.PyRepr(), a.Key.PyRepr(), a.Val.PyRepr())
			}
		}
	}
}
