package saltmaster

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// errNotJSONCompliant is requests' InvalidJSONError: it dumps request
// bodies with allow_nan=False.
var errNotJSONCompliant = errors.New("Out of range float values are not JSON compliant")

// pyJSON is Python's json.dumps with its default separators (", " and
// ": "), keys in the mapping's order.
//
// ensureASCII true is what `requests` does with json= (every request body,
// client.py request_raw); false is salt.utils.json.dumps, which saltext
// uses for the secret-ID metadata string (api.py:337). allowNaN false is
// requests again (models.py prepare_body).
func pyJSON(v value.Value, ensureASCII, allowNaN bool) ([]byte, error) {
	return appendPyJSON(nil, v, ensureASCII, allowNaN)
}

func appendPyJSON(dst []byte, v value.Value, ensureASCII, allowNaN bool) ([]byte, error) {
	var err error
	switch v.Kind() {
	case value.Null:
		return append(dst, "null"...), nil
	case value.Bool:
		if v.Bool() {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case value.Int:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case value.Float:
		f := v.Float()
		switch {
		case math.IsNaN(f), math.IsInf(f, 0):
			if !allowNaN {
				return nil, errNotJSONCompliant
			}
			switch {
			case math.IsNaN(f):
				return append(dst, "NaN"...), nil
			case f > 0:
				return append(dst, "Infinity"...), nil
			default:
				return append(dst, "-Infinity"...), nil
			}
		}
		return value.AppendFloatRepr(dst, f), nil
	case value.String:
		return appendPyJSONString(dst, v.Str(), ensureASCII), nil
	case value.List:
		dst = append(dst, '[')
		for i, it := range v.Items() {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			if dst, err = appendPyJSON(dst, it, ensureASCII, allowNaN); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	default:
		dst = append(dst, '{')
		for i, p := range v.Pairs() {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = appendPyJSONString(dst, pyJSONKey(p.Key), ensureASCII)
			dst = append(dst, ": "...)
			if dst, err = appendPyJSON(dst, p.Val, ensureASCII, allowNaN); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
}

// pyJSONKey is how json.dumps writes a non-string key: True as "true",
// None as "null", numbers as their repr.
func pyJSONKey(k value.Value) string {
	switch k.Kind() {
	case value.Bool:
		if k.Bool() {
			return "true"
		}
		return "false"
	case value.Null:
		return "null"
	}
	return k.PyStr()
}

// appendPyJSONString quotes s like json's encode_basestring(_ascii).
func appendPyJSONString(dst []byte, s string, ensureASCII bool) []byte {
	const hex = "0123456789abcdef"
	u4 := func(dst []byte, r rune) []byte {
		return append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		default:
			switch {
			case r < 0x20:
				dst = u4(dst, r)
			case !ensureASCII:
				// A Go string may hold invalid UTF-8, a Python str cannot:
				// write U+FFFD as the decoder saw it.
				dst = utf8.AppendRune(dst, r)
			case r < 0x7f:
				dst = append(dst, byte(r))
			case r <= 0xffff:
				dst = u4(dst, r)
			default:
				r -= 0x10000
				dst = u4(dst, 0xd800|(r>>10)&0x3ff)
				dst = u4(dst, 0xdc00|r&0x3ff)
			}
		}
	}
	return append(dst, '"')
}

// PyJSON is pyJSON, for internal/saltext's fuzz target.
func PyJSON(v value.Value, ensureASCII, allowNaN bool) ([]byte, error) {
	return pyJSON(v, ensureASCII, allowNaN)
}
