package parameters

import (
	"math"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// traverse is Salt's salt.utils.data.traverse_dict_and_list, the walk behind
// grains.get, pillar.get, config.get and the `traverse` Jinja filter. It
// reports false where Salt would return the caller's default.
func traverse(data value.Value, key, delim string) (value.Value, bool) {
	ptr := data
	for rest, more := key, true; more; {
		var part string
		part, rest, more = strings.Cut(rest, delim)
		switch ptr.Kind() {
		case value.List:
			v, ok := listStep(ptr.Items(), part)
			if !ok {
				return value.Value{}, false
			}
			ptr = v
		case value.Map:
			if v, ok := ptr.GetString(part); ok {
				ptr = v
				continue
			}
			// On a KeyError Salt retries with the part YAML-loaded, so
			// "8080" reaches an integer key 8080 and "true" a key True.
			k, ok := yamlKey(part)
			if !ok {
				return value.Value{}, false
			}
			v, ok := ptr.Get(k)
			if !ok {
				return value.Value{}, false
			}
			ptr = v
		default:
			// Subscripting a scalar is a TypeError: the default.
			return value.Value{}, false
		}
	}
	return ptr, true
}

// listStep takes one step into a list: a numeric part is first looked up as
// an integer key of the embedded mappings, then as a position (negative ones
// count from the end); any other part is looked up in the embedded mappings.
func listStep(items []value.Value, part string) (value.Value, bool) {
	idx, isInt, overflow := pyInt(part)
	if !isInt {
		for _, it := range items {
			if v, ok := it.GetString(part); ok {
				return v, true
			}
		}
		return value.Value{}, false
	}
	if overflow {
		return value.Value{}, false
	}
	k := value.NewInt(idx)
	for _, it := range items {
		if v, ok := it.Get(k); ok {
			return v, true
		}
	}
	n := int64(len(items))
	if idx < 0 {
		idx += n
	}
	if idx < 0 || idx >= n {
		return value.Value{}, false
	}
	return items[idx], true
}

// pyInt parses s the way Python's int(s) does for ASCII input: surrounding
// whitespace, an optional sign, digits with single underscores between them.
// overflow reports a valid integer beyond int64, which can index nothing.
func pyInt(s string) (n int64, isInt, overflow bool) {
	t := strings.TrimSpace(s)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if t == "" {
		return 0, false, false
	}
	var u uint64
	prevUnderscore := true // forbids a leading underscore
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c == '_' {
			if prevUnderscore {
				return 0, false, false
			}
			prevUnderscore = true
			continue
		}
		if c < '0' || c > '9' {
			return 0, false, false
		}
		prevUnderscore = false
		d := uint64(c - '0')
		if u > (math.MaxUint64-d)/10 {
			overflow = true
		} else {
			u = u*10 + d
		}
	}
	if prevUnderscore {
		return 0, false, false
	}
	switch {
	case overflow:
		return 0, true, true
	case neg && u <= 1<<63:
		return -int64(u), true, false
	case !neg && u < 1<<63:
		return int64(u), true, false
	}
	return 0, true, true
}

// yamlKey is salt.utils.args.yamlify_arg as traverse uses it: the part
// loaded as YAML, reported only when that yields a hashable value different
// from the part itself (otherwise the lookup has already failed).
func yamlKey(s string) (value.Value, bool) {
	t := strings.TrimSpace(s)
	if t == "" || t == "---" || t == "..." {
		return value.Value{}, false
	}
	if strings.Contains(s, "_") && strings.Trim(t, "0123456789_") == "" {
		// yamlify_arg refuses to turn "1_000" into 1000.
		return value.Value{}, false
	}
	var v value.Value
	switch {
	case plainScalar(s):
		// The common case (identifiers, numbers): no parser needed.
		if s != "None" {
			v = value.ResolvePlain(s)
		}
	default:
		d, err := value.DecodeYAML([]byte(s))
		if err != nil {
			return value.Value{}, false
		}
		v = d
		if strings.Contains(s, "#") && (v.IsNull() || v.IsString()) {
			// A comment would eat content: keep the original.
			return value.Value{}, false
		}
		if v.IsString() && v.Str() == "" && (s == "|" || s == "!") {
			return value.Value{}, false
		}
		if v.IsNull() && s == "!" {
			return value.Value{}, false
		}
	}
	if v.IsComposite() {
		// Unhashable (or refused by yamlify_arg): the lookup fails either way.
		return value.Value{}, false
	}
	if v.IsString() && v.Str() == s {
		return value.Value{}, false
	}
	return v, true
}

// plainScalar reports whether s is a YAML plain scalar made only of
// characters that need no parsing, so ResolvePlain alone decides its type.
func plainScalar(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == '+', c == '/':
		case c == '-' && (i > 0 || len(s) > 1):
			// A lone "-" is a YAML sequence entry.
		default:
			return false
		}
	}
	return true
}
