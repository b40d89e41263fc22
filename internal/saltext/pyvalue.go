package saltext

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// The port works on value.Value, the repository's model of Python data:
// mappings keep their order (it decides the order of keys in request
// bodies) and int, float and bool stay distinct (they print differently).
// These helpers convert at the API boundary and do the few dict operations
// saltext needs.

// fromAny converts decoded Go data (encoding/json, yaml.v3, the Vault API
// client's json.Number) into a Value. Go maps have no order: their keys are
// sorted, so callers who care about order pass a Value instead.
func fromAny(x any) value.Value {
	switch t := x.(type) {
	case nil:
		return value.NewNull()
	case value.Value:
		return t
	case bool:
		return value.NewBool(t)
	case string:
		return value.NewString(t)
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return value.NewInt(i)
		}
		f, _ := strconv.ParseFloat(string(t), 64)
		return value.NewFloat(f)
	case float64:
		return value.NewFloat(t)
	case float32:
		return value.NewFloat(float64(t))
	case int:
		return value.NewInt(int64(t))
	case int64:
		return value.NewInt(t)
	case int32:
		return value.NewInt(int64(t))
	case uint64:
		if t > math.MaxInt64 {
			return value.NewFloat(float64(t))
		}
		return value.NewInt(int64(t))
	case []string:
		items := make([]value.Value, len(t))
		for i, s := range t {
			items[i] = value.NewString(s)
		}
		return value.NewList(items)
	case []any:
		items := make([]value.Value, len(t))
		for i, it := range t {
			items[i] = fromAny(it)
		}
		return value.NewList(items)
	case map[string]string:
		m := make(map[string]any, len(t))
		for k, v := range t {
			m[k] = v
		}
		return fromAny(m)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([]value.Pair, len(keys))
		for i, k := range keys {
			pairs[i] = value.Pair{Key: value.NewString(k), Val: fromAny(t[k])}
		}
		return value.NewMap(pairs)
	}
	// Other integer kinds, named types, slices and maps of other types.
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return value.NewInt(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fromAny(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return value.NewFloat(rv.Float())
	case reflect.String:
		return value.NewString(rv.String())
	case reflect.Bool:
		return value.NewBool(rv.Bool())
	case reflect.Slice, reflect.Array:
		items := make([]value.Value, rv.Len())
		for i := range items {
			items[i] = fromAny(rv.Index(i).Interface())
		}
		return value.NewList(items)
	case reflect.Map:
		m := make(map[string]any, rv.Len())
		for _, k := range rv.MapKeys() {
			m[fmt.Sprint(k.Interface())] = rv.MapIndex(k).Interface()
		}
		return fromAny(m)
	case reflect.Pointer:
		if rv.IsNil() {
			return value.NewNull()
		}
		return fromAny(rv.Elem().Interface())
	}
	return value.NewString(fmt.Sprint(x))
}

// toAny converts a Value into plain Go data: nil, bool, int64, float64,
// string, []any, map[string]any (keys as Python's str()).
func toAny(v value.Value) any {
	switch v.Kind() {
	case value.Null:
		return nil
	case value.Bool:
		return v.Bool()
	case value.Int:
		return v.Int()
	case value.Float:
		return v.Float()
	case value.String:
		return v.Str()
	case value.List:
		out := make([]any, len(v.Items()))
		for i, it := range v.Items() {
			out[i] = toAny(it)
		}
		return out
	}
	out := make(map[string]any, len(v.Pairs()))
	for _, p := range v.Pairs() {
		out[p.Key.PyStr()] = toAny(p.Val)
	}
	return out
}

// toMap is toAny for a mapping; anything else gives nil.
func toMap(v value.Value) map[string]any {
	if !v.IsMap() {
		return nil
	}
	return toAny(v).(map[string]any)
}

// str is a Value holding a string.
func str(s string) value.Value { return value.NewString(s) }

// omap builds an ordered mapping from key, value pairs.
func omap(kv ...any) value.Value {
	pairs := make([]value.Pair, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		pairs = append(pairs, value.Pair{Key: str(kv[i].(string)), Val: fromAny(kv[i+1])})
	}
	return value.NewMap(pairs)
}

// get is d[key] for a string key; ok is false for a missing key or a
// non-mapping.
func get(d value.Value, key string) (value.Value, bool) {
	return d.GetString(key)
}

// has is `key in d` for a mapping.
func has(d value.Value, key string) bool {
	_, ok := d.GetString(key)
	return ok
}

// set is d[key] = val: an existing key keeps its place.
func set(d value.Value, key string, val value.Value) value.Value {
	return d.Set(str(key), val)
}

// pop is d.pop(key).
func pop(d value.Value, key string) (value.Value, value.Value) {
	v, _ := d.GetString(key)
	return d.Delete(str(key)), v
}

// setIn is d[k0][k1]...[kn] = val, rebuilding the mappings on the way. A
// step that is not a mapping fails like Python's item assignment.
func setIn(d value.Value, keys []string, val value.Value) (value.Value, error) {
	if !d.IsMap() {
		return d, saltErr("TypeError", "'%s' object does not support item assignment", d.Kind().PyType())
	}
	if len(keys) == 1 {
		return set(d, keys[0], val), nil
	}
	sub, ok := get(d, keys[0])
	if !ok {
		return d, saltErr("KeyError", "'%s'", keys[0])
	}
	sub, err := setIn(sub, keys[1:], val)
	if err != nil {
		return d, err
	}
	return set(d, keys[0], sub), nil
}
