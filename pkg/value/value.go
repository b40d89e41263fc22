// Package value is the ordered data model shared by the templating core and
// the parameter stack.
//
// Salt hands Python objects to its templates: mappings keep document order,
// integers and floats are different types, and keys need not be strings. A
// map[string]any loses all three, and with them the order of expanded
// policies and the text of rendered numbers, so everything here decodes into
// Value instead.
package value

import (
	"math"
)

// Kind is the dynamic type of a Value.
type Kind uint8

// The kinds mirror the Python types YAML and JSON decode to.
const (
	Null Kind = iota
	Bool
	Int
	Float
	String
	List
	Map
)

var kindNames = [...]string{"NoneType", "bool", "int", "float", "str", "list", "dict"}

// PyType is the Python type name, as used in Python's error messages.
func (k Kind) PyType() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "object"
}

// Value is one immutable datum. The zero Value is null.
type Value struct {
	kind Kind
	n    uint64 // bool (0/1), int64, or float64 bits
	s    string
	c    *compound
}

// compound holds a list's items or a mapping's pairs. It sits behind a
// pointer so that Value stays small: values are copied a lot while
// rendering, containers are built only while decoding.
type compound struct {
	l []Value
	m []Pair
}

// Pair is one mapping entry.
type Pair struct {
	Key Value
	Val Value
}

// Constructors.
func NewNull() Value { return Value{} }
func NewBool(b bool) Value {
	if b {
		return Value{kind: Bool, n: 1}
	}
	return Value{kind: Bool}
}
func NewInt(i int64) Value        { return Value{kind: Int, n: uint64(i)} }
func NewFloat(f float64) Value    { return Value{kind: Float, n: math.Float64bits(f)} }
func NewString(s string) Value    { return Value{kind: String, s: s} }
func NewList(items []Value) Value { return Value{kind: List, c: &compound{l: items}} }
func NewMap(pairs []Pair) Value   { return Value{kind: Map, c: &compound{m: pairs}} }
func (v Value) Kind() Kind        { return v.kind }
func (v Value) IsNull() bool      { return v.kind == Null }
func (v Value) IsMap() bool       { return v.kind == Map }
func (v Value) IsList() bool      { return v.kind == List }
func (v Value) IsString() bool    { return v.kind == String }
func (v Value) Bool() bool        { return v.n != 0 }
func (v Value) Int() int64        { return int64(v.n) }
func (v Value) Float() float64    { return math.Float64frombits(v.n) }
func (v Value) Str() string       { return v.s }

// Items returns a list's items (nil for other kinds).
func (v Value) Items() []Value {
	if v.kind != List {
		return nil
	}
	return v.c.l
}

// Pairs returns a mapping's entries in order (nil for other kinds).
func (v Value) Pairs() []Pair {
	if v.kind != Map {
		return nil
	}
	return v.c.m
}

// Len is the number of items, entries or bytes.
func (v Value) Len() int {
	switch v.kind {
	case List:
		return len(v.c.l)
	case Map:
		return len(v.c.m)
	}
	return len(v.s)
}
func (v Value) IsComposite() bool { return v.kind == List || v.kind == Map }
func NewStringMap(kv ...string) Value {
	pairs := make([]Pair, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		pairs = append(pairs, Pair{Key: NewString(kv[i]), Val: NewString(kv[i+1])})
	}
	return NewMap(pairs)
}

// Truthy is Python's bool(v).
func (v Value) Truthy() bool {
	switch v.kind {
	case Null:
		return false
	case Bool:
		return v.Bool()
	case Int:
		return v.Int() != 0
	case Float:
		return v.Float() != 0
	case String:
		return v.s != ""
	case List:
		return len(v.Items()) > 0
	default:
		return len(v.Pairs()) > 0
	}
}

// Get looks a key up in a mapping with Python's dict semantics, where
// 1 == 1.0 == True. It reports false for a missing key or a non-mapping.
func (v Value) Get(key Value) (Value, bool) {
	if v.kind != Map {
		return Value{}, false
	}
	m := v.c.m
	for i := range m {
		if Equal(m[i].Key, key) {
			return m[i].Val, true
		}
	}
	return Value{}, false
}

// GetString looks up a string key, the common case, without building a Value.
func (v Value) GetString(key string) (Value, bool) {
	if v.kind != Map {
		return Value{}, false
	}
	m := v.c.m
	for i := range m {
		if k := &m[i].Key; k.kind == String && k.s == key {
			return m[i].Val, true
		}
	}
	return Value{}, false
}

// numeric returns v as a float for cross-type comparison and whether it is a number.
func (v Value) numeric() (float64, bool) {
	switch v.kind {
	case Bool:
		if v.Bool() {
			return 1, true
		}
		return 0, true
	case Int:
		return float64(v.Int()), true
	case Float:
		return v.Float(), true
	}
	return 0, false
}

// Equal is Python's ==: numbers compare by value across bool/int/float,
// containers element-wise (mappings ignoring order).
func Equal(a, b Value) bool {
	if a.kind == Int && b.kind == Int {
		return a.Int() == b.Int()
	}
	if an, ok := a.numeric(); ok {
		bn, ok := b.numeric()
		if !ok {
			return false
		}
		if a.kind == Int && b.kind == Float || a.kind == Float && b.kind == Int {
			// Compare exactly: float64(int) may round.
			i, f := a.Int(), b.Float()
			if a.kind == Float {
				i, f = b.Int(), a.Float()
			}
			return f == math.Trunc(f) && f >= -9.223372036854775808e18 && f < 9.223372036854775808e18 && int64(f) == i
		}
		return an == bn
	}
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case Null:
		return true
	case String:
		return a.s == b.s
	case List:
		if len(a.Items()) != len(b.Items()) {
			return false
		}
		for i := range a.Items() {
			if !Equal(a.Items()[i], b.Items()[i]) {
				return false
			}
		}
		return true
	case Map:
		if len(a.Pairs()) != len(b.Pairs()) {
			return false
		}
		for _, p := range a.Pairs() {
			o, ok := b.Get(p.Key)
			if !ok || !Equal(p.Val, o) {
				return false
			}
		}
		return true
	}
	return false
}

// Set returns a copy of the mapping v with key set to val: an existing key
// keeps its position, a new one is appended. A non-mapping v is treated as empty.
func (v Value) Set(key, val Value) Value {
	pairs := make([]Pair, 0, len(v.Pairs())+1)
	found := false
	for _, p := range v.Pairs() {
		if !found && Equal(p.Key, key) {
			pairs = append(pairs, Pair{Key: p.Key, Val: val})
			found = true
			continue
		}
		pairs = append(pairs, p)
	}
	if !found {
		pairs = append(pairs, Pair{Key: key, Val: val})
	}
	return NewMap(pairs)
}

// Delete returns a copy of the mapping v without key.
func (v Value) Delete(key Value) Value {
	pairs := make([]Pair, 0, len(v.Pairs()))
	for _, p := range v.Pairs() {
		if !Equal(p.Key, key) {
			pairs = append(pairs, p)
		}
	}
	return NewMap(pairs)
}
