package value

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DecodeJSON decodes one JSON document keeping object key order and the
// int/float distinction of the literals (1 is an int, 1.0 a float).
func DecodeJSON(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	c := converter{}
	v, err := c.jsonValue(dec, 0)
	if err != nil {
		return Value{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Value{}, errors.New("unexpected data after the JSON document")
	}
	return v, nil
}

func (c *converter) jsonValue(dec *json.Decoder, depth int) (Value, error) {
	c.count++
	if c.count > maxNodes {
		return Value{}, ErrTooLarge
	}
	if depth > 512 {
		return Value{}, errors.New("JSON nested deeper than 512 levels")
	}
	tok, err := dec.Token()
	if err != nil {
		return Value{}, err
	}
	switch t := tok.(type) {
	case nil:
		return Value{}, nil
	case bool:
		return NewBool(t), nil
	case string:
		return NewString(t), nil
	case json.Number:
		return numberValue(string(t))
	case json.Delim:
		switch t {
		case '[':
			var items []Value
			for dec.More() {
				v, err := c.jsonValue(dec, depth+1)
				if err != nil {
					return Value{}, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return Value{}, err
			}
			if items == nil {
				items = []Value{}
			}
			return NewList(items), nil
		case '{':
			var ps pairSet
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return Value{}, err
				}
				k, ok := kt.(string)
				if !ok {
					return Value{}, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := c.jsonValue(dec, depth+1)
				if err != nil {
					return Value{}, err
				}
				ps.set(NewString(k), v)
			}
			if _, err := dec.Token(); err != nil {
				return Value{}, err
			}
			pairs := ps.pairs
			if pairs == nil {
				pairs = []Pair{}
			}
			return NewMap(pairs), nil
		}
	}
	return Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}

func numberValue(s string) (Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return NewInt(i), nil
		}
		// Too large for int64: keep the digits rather than lose precision.
		return NewString(s), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return Value{}, err
	}
	return NewFloat(f), nil
}

// MarshalJSON writes v with its key order; floats keep their Python repr so
// 1.0 stays a float. Non-string keys are written as their str().
func (v Value) MarshalJSON() ([]byte, error) {
	return v.AppendJSON(nil), nil
}

// AppendJSON appends the JSON text of v to dst.
func (v Value) AppendJSON(dst []byte) []byte {
	switch v.kind {
	case Null:
		return append(dst, "null"...)
	case Bool:
		return strconv.AppendBool(dst, v.Bool())
	case Int:
		return strconv.AppendInt(dst, v.Int(), 10)
	case Float:
		switch s := FormatFloatRepr(v.Float()); s {
		case "inf":
			return append(dst, "Infinity"...)
		case "-inf":
			return append(dst, "-Infinity"...)
		case "nan":
			return append(dst, "NaN"...)
		default:
			return append(dst, s...)
		}
	case String:
		return appendJSONString(dst, v.s)
	case List:
		dst = append(dst, '[')
		for i, it := range v.Items() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = it.AppendJSON(dst)
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		for i, p := range v.Pairs() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, p.Key.PyStr())
			dst = append(dst, ':')
			dst = p.Val.AppendJSON(dst)
		}
		return append(dst, '}')
	}
}

// UnmarshalJSON lets a Value be a field of a JSON-decoded struct.
func (v *Value) UnmarshalJSON(data []byte) error {
	d, err := DecodeJSON(data)
	if err != nil {
		return err
	}
	*v = d
	return nil
}

// appendJSONString quotes s as JSON without encoding/json's HTML escaping,
// so "<no jid set>" prints as written.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\t':
			dst = append(dst, `\t`...)
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			dst = append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
