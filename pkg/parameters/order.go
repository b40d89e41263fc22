package parameters

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// sortKeys orders every mapping in v by key, recursively, as PyYAML's dump
// does. Upstream passes each lookup result and each stack through
// `| yaml | load_yaml`, so mapdata, and the names a Y source expands a
// mapping to, come out in this order. Like Python's sorted(), a mapping whose
// keys cannot be compared (a str next to an int, or None next to anything)
// keeps its order. Unchanged subtrees are returned as they are.
func sortKeys(v value.Value) value.Value {
	switch v.Kind() {
	case value.List:
		items := v.Items()
		var out []value.Value
		for i, it := range items {
			s := sortKeys(it)
			if out == nil && !same(s, it) {
				out = make([]value.Value, len(items))
				copy(out, items[:i])
			}
			if out != nil {
				out[i] = s
			}
		}
		if out == nil {
			return v
		}
		return value.NewList(out)
	case value.Map:
		pairs := v.Pairs()
		var out []value.Pair
		for i, p := range pairs {
			s := sortKeys(p.Val)
			if out == nil && !same(s, p.Val) {
				out = make([]value.Pair, len(pairs))
				copy(out, pairs[:i])
			}
			if out != nil {
				out[i] = value.Pair{Key: p.Key, Val: s}
			}
		}
		src := pairs
		if out != nil {
			src = out
		}
		if cmpFn := keyOrder(src); cmpFn != nil && !slices.IsSortedFunc(src, cmpFn) {
			if out == nil {
				out = slices.Clone(pairs)
			}
			slices.SortStableFunc(out, cmpFn)
		}
		if out == nil {
			return v
		}
		return value.NewMap(out)
	}
	return v
}

// same reports whether a and b are the very same container (or scalar),
// which tells sortKeys that nothing below changed.
func same(a, b value.Value) bool {
	switch a.Kind() {
	case value.List:
		ai, bi := a.Items(), b.Items()
		return b.IsList() && len(ai) == len(bi) && (len(ai) == 0 || &ai[0] == &bi[0])
	case value.Map:
		ap, bp := a.Pairs(), b.Pairs()
		return b.IsMap() && len(ap) == len(bp) && (len(ap) == 0 || &ap[0] == &bp[0])
	}
	return true
}

// keyOrder returns how Python orders these keys, or nil when it cannot: all
// strings or all numbers (bool, int, float) sort, None compares with
// nothing, and a str next to a number is a TypeError.
func keyOrder(pairs []value.Pair) func(a, b value.Pair) int {
	if len(pairs) < 2 {
		return nil // nothing to sort
	}
	str := pairs[0].Key.IsString()
	for _, p := range pairs {
		switch p.Key.Kind() {
		case value.String:
			if !str {
				return nil
			}
		case value.Bool, value.Int, value.Float:
			if str {
				return nil
			}
		default:
			return nil
		}
	}
	if str {
		return cmpStringKeys
	}
	return cmpNumberKeys
}

// cmpStringKeys orders by UTF-8 bytes, which is code point order: Python's.
func cmpStringKeys(a, b value.Pair) int { return strings.Compare(a.Key.Str(), b.Key.Str()) }

func cmpNumberKeys(a, b value.Pair) int { return cmpNumbers(a.Key, b.Key) }

// cmpNumbers compares bool, int and float exactly, as Python does. NaN
// compares as neither smaller nor larger, which leaves its place to the sort.
func cmpNumbers(a, b value.Value) int {
	ai, aInt := intOf(a)
	bi, bInt := intOf(b)
	switch {
	case aInt && bInt:
		return cmp.Compare(ai, bi)
	case aInt:
		return cmpIntFloat(ai, b.Float())
	case bInt:
		return -cmpIntFloat(bi, a.Float())
	}
	switch x, y := a.Float(), b.Float(); {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func intOf(v value.Value) (int64, bool) {
	switch v.Kind() {
	case value.Bool:
		if v.Bool() {
			return 1, true
		}
		return 0, true
	case value.Int:
		return v.Int(), true
	}
	return 0, false
}

// cmpIntFloat compares i with f without rounding i to a float.
func cmpIntFloat(i int64, f float64) int {
	switch {
	case f != f:
		return 0
	case f >= 0x1p63:
		return -1
	case f < -0x1p63:
		return 1
	}
	t := math.Trunc(f)
	if ti := int64(t); i != ti {
		return cmp.Compare(i, ti)
	}
	switch {
	case f > t:
		return -1
	case f < t:
		return 1
	}
	return 0
}
