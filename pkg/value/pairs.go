package value

import (
	"math"
	"strconv"
)

// pairSet builds a mapping's pairs with Python dict semantics (a repeated
// key keeps its first position and takes the last value; 1, 1.0 and True
// are one key). Small mappings scan; from indexFrom pairs on, keys are
// looked up in an index, so that decoding a mapping with many keys (a
// fleet's grains, one key per minion) is not quadratic.
type pairSet struct {
	pairs []Pair
	index map[string]int // canonical key -> position
	odd   []int          // positions of keys without a canonical form (NaN)
}

const indexFrom = 32

func (ps *pairSet) set(k, v Value) {
	if ps.index == nil && len(ps.pairs) >= indexFrom {
		ps.index = make(map[string]int, 2*len(ps.pairs))
		for i, p := range ps.pairs {
			if ck, ok := canonicalKey(p.Key); ok {
				ps.index[ck] = i
			} else {
				ps.odd = append(ps.odd, i)
			}
		}
	}
	if ps.index == nil {
		ps.pairs = setPair(ps.pairs, k, v)
		return
	}
	ck, ok := canonicalKey(k)
	if !ok {
		for i := range ps.pairs {
			if Equal(ps.pairs[i].Key, k) {
				ps.pairs[i].Val = v
				return
			}
		}
		ps.odd = append(ps.odd, len(ps.pairs))
		ps.pairs = append(ps.pairs, Pair{Key: k, Val: v})
		return
	}
	if i, found := ps.index[ck]; found {
		ps.pairs[i].Val = v
		return
	}
	for _, i := range ps.odd {
		if Equal(ps.pairs[i].Key, k) {
			ps.pairs[i].Val = v
			return
		}
	}
	ps.index[ck] = len(ps.pairs)
	ps.pairs = append(ps.pairs, Pair{Key: k, Val: v})
}

// canonicalKey is one string per class of Equal scalar keys: numbers that
// are equal (True, 1, 1.0) share one. NaN has none (it equals nothing).
func canonicalKey(k Value) (string, bool) {
	switch k.kind {
	case Null:
		return "n", true
	case String:
		return "s" + k.s, true
	case Bool, Int:
		return "i" + strconv.FormatInt(k.Int(), 10), true
	case Float:
		f := k.Float()
		switch {
		case math.IsNaN(f):
			return "", false
		case f == math.Trunc(f) && f >= -9.223372036854775808e18 && f < 9.223372036854775808e18:
			return "i" + strconv.FormatInt(int64(f), 10), true
		}
		return "f" + strconv.FormatFloat(f, 'g', -1, 64), true
	}
	return "", false
}
