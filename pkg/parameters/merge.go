package parameters

import (
	"errors"
	"fmt"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// ErrMerge reports a layer that is not a mapping where one is needed.
var ErrMerge = errors.New("cannot merge")

// strategy is a merge strategy of Salt's dictupdate.merge.
type strategy uint8

const (
	stRecurse   strategy = iota // "recurse", and "smart" with the yaml renderer
	stPlain                     // "none" and unknown names: recurse, merge_lists ignored
	stOverwrite                 // "overwrite" (and "aggregate" on plain data)
	stList                      // "list"
)

// parseStrategy names the strategy a layer asks for. Non-string values never
// equal a name in Python, so they are unknown.
func parseStrategy(v value.Value) strategy {
	if !v.IsString() {
		return stPlain
	}
	switch v.Str() {
	case "smart", "recurse":
		// smart means aggregate only for the yamlex renderer; ours is yaml.
		return stRecurse
	case "overwrite":
		return stOverwrite
	case "aggregate":
		// yamlex merge_recursive(level=1) without !aggr tags replaces each
		// top-level key wholesale, exactly like overwrite.
		return stOverwrite
	case "list":
		return stList
	}
	// "none" and unknown names (Salt logs a warning for the latter).
	return stPlain
}

// Merge is Salt's salt.utils.dictupdate.merge(a, b, strategy, "yaml",
// mergeLists) on mappings: smart, recurse, overwrite, list, aggregate, none,
// and unknown names (recurse). The result shares unchanged subtrees with a
// and b; neither is modified.
func Merge(a, b value.Value, strategyName string, mergeLists bool) (value.Value, error) {
	return merge(a, b, parseStrategy(value.NewString(strategyName)), mergeLists)
}

func merge(a, b value.Value, st strategy, mergeLists bool) (value.Value, error) {
	if !a.IsMap() || !b.IsMap() {
		// Salt raises TypeError here, except that its list strategy lets a
		// list or string with none of a's keys through unmerged; the spec
		// makes that an error too.
		return value.Value{}, fmt.Errorf("%w %s into %s", ErrMerge, kindName(b), kindName(a))
	}
	return mergeMaps(a, b, st, mergeLists), nil
}

func kindName(v value.Value) string {
	switch v.Kind() {
	case value.Null:
		return "null"
	case value.Bool:
		return "a boolean"
	case value.Int, value.Float:
		return "a number"
	case value.String:
		return "a string"
	case value.List:
		return "a list"
	}
	return "a mapping"
}

func mergeMaps(a, b value.Value, st strategy, mergeLists bool) value.Value {
	switch st {
	case stList:
		return mergeList(a, b)
	case stOverwrite:
		return overwrite(a, b)
	case stRecurse:
		return update(a, b, mergeLists)
	}
	return update(a, b, false)
}

// update is dictupdate.update: b recursively into a. Two mappings merge, two
// lists concatenate (minus items already in a's list) when mergeLists is set,
// anything else is replaced by b's value. Keys keep a's order, new ones are
// appended, as with a Python dict.
func update(a, b value.Value, mergeLists bool) value.Value {
	bp, ap := b.Pairs(), a.Pairs()
	switch {
	case len(bp) == 0:
		return a
	case len(ap) == 0:
		// Nothing to merge with: the result is b, in b's order.
		return b
	}
	out := make([]value.Pair, len(ap), len(ap)+len(bp))
	copy(out, ap)
	idx := newKeyIndex(out, len(bp))
	for _, p := range bp {
		i := idx.find(out, p.Key)
		if i < 0 {
			out = append(out, p)
			idx.add(p.Key, len(out)-1)
			continue
		}
		old := out[i].Val
		switch {
		case old.IsMap() && p.Val.IsMap():
			out[i].Val = update(old, p.Val, mergeLists)
		case mergeLists && old.IsList() && p.Val.IsList():
			out[i].Val = unionLists(old, p.Val)
		default:
			out[i].Val = p.Val
		}
	}
	return value.NewMap(out)
}

// unionLists is merge_lists: a + [x for x in b if x not in a]. Duplicates
// within b survive, because the filter looks at a only.
func unionLists(a, b value.Value) value.Value {
	ai := a.Items()
	out := make([]value.Value, len(ai), len(ai)+len(b.Items()))
	copy(out, ai)
next:
	for _, x := range b.Items() {
		for _, y := range ai {
			if value.Equal(x, y) {
				continue next
			}
		}
		out = append(out, x)
	}
	return value.NewList(out)
}

// overwrite is dictupdate.merge_overwrite: each top-level key of b replaces
// a's value wholesale (merge_lists cannot matter: the lists are then equal).
func overwrite(a, b value.Value) value.Value {
	bp, ap := b.Pairs(), a.Pairs()
	switch {
	case len(bp) == 0:
		return a
	case len(ap) == 0:
		return b
	}
	out := make([]value.Pair, len(ap), len(ap)+len(bp))
	copy(out, ap)
	idx := newKeyIndex(out, len(bp))
	for _, p := range bp {
		if i := idx.find(out, p.Key); i >= 0 {
			out[i].Val = p.Val
			continue
		}
		out = append(out, p)
		idx.add(p.Key, len(out)-1)
	}
	return value.NewMap(out)
}

// mergeList is dictupdate.merge_list: only a's keys survive, and a key in
// both becomes [a_value, b_value].
func mergeList(a, b value.Value) value.Value {
	ap := a.Pairs()
	out := make([]value.Pair, len(ap))
	for i, p := range ap {
		out[i] = p
		if bv, ok := b.Get(p.Key); ok {
			out[i].Val = value.NewList([]value.Value{p.Val, bv})
		}
	}
	return value.NewMap(out)
}

// keyIndex speeds up key lookups when a merge would otherwise compare many
// keys; a few scans of a short slice are cheaper than building a Go map.
type keyIndex map[string]int

// indexThreshold is the number of key comparisons (keys times lookups) from
// which a Go map pays for itself.
const indexThreshold = 1024

func newKeyIndex(pairs []value.Pair, lookups int) keyIndex {
	if len(pairs)*lookups < indexThreshold {
		return nil
	}
	idx := make(keyIndex, len(pairs)+4)
	for i, p := range pairs {
		if p.Key.IsString() {
			idx[p.Key.Str()] = i
		}
	}
	return idx
}

func (idx keyIndex) add(k value.Value, i int) {
	if idx != nil && k.IsString() {
		idx[k.Str()] = i
	}
}

// find returns the position of the key equal to k (Python's dict equality:
// 1, 1.0 and True are one key), or -1.
func (idx keyIndex) find(pairs []value.Pair, k value.Value) int {
	if k.IsString() {
		if idx != nil {
			if i, ok := idx[k.Str()]; ok {
				return i
			}
			return -1
		}
		s := k.Str()
		for i := range pairs {
			if pk := pairs[i].Key; pk.IsString() && pk.Str() == s {
				return i
			}
		}
		return -1
	}
	for i := range pairs {
		if value.Equal(pairs[i].Key, k) {
			return i
		}
	}
	return -1
}

// toBool is Salt's to_bool Jinja filter, which reads merge_lists: strings
// yes/1/true in any case, integers above zero, non-empty lists and mappings.
// Floats are hashable non-integers, so always false.
func toBool(v value.Value) bool {
	switch v.Kind() {
	case value.Bool:
		return v.Bool()
	case value.String:
		switch value.Lower(v.Str()) {
		case "yes", "1", "true":
			return true
		}
		return false
	case value.Int:
		return v.Int() > 0
	case value.List, value.Map:
		return v.Len() > 0
	}
	return false
}
