package value

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PyStr is Python's str(v): what a template substitutes for a value.
func (v Value) PyStr() string {
	switch v.kind {
	case String:
		return v.s
	case Null:
		return "None"
	case Bool:
		if v.Bool() {
			return "True"
		}
		return "False"
	case Int:
		return strconv.FormatInt(v.Int(), 10)
	case Float:
		return FormatFloatRepr(v.Float())
	}
	var b strings.Builder
	v.appendRepr(&b, false)
	return b.String()
}

// PyRepr is Python's repr(v).
func (v Value) PyRepr() string {
	var b strings.Builder
	v.appendRepr(&b, false)
	return b.String()
}

// PyASCII is Python's ascii(v): repr with every non-ASCII character escaped.
func (v Value) PyASCII() string {
	var b strings.Builder
	v.appendRepr(&b, true)
	return b.String()
}

// AppendStr appends str(v) to dst without an intermediate string for scalars.
func (v Value) AppendStr(dst []byte) []byte {
	switch v.kind {
	case String:
		return append(dst, v.s...)
	case Int:
		return strconv.AppendInt(dst, v.Int(), 10)
	}
	return append(dst, v.PyStr()...)
}

func (v Value) appendRepr(b *strings.Builder, ascii bool) {
	switch v.kind {
	case String:
		b.WriteString(QuoteString(v.s, ascii))
	case List:
		b.WriteByte('[')
		for i, it := range v.Items() {
			if i > 0 {
				b.WriteString(", ")
			}
			it.appendRepr(b, ascii)
		}
		b.WriteByte(']')
	case Map:
		b.WriteByte('{')
		for i, p := range v.Pairs() {
			if i > 0 {
				b.WriteString(", ")
			}
			p.Key.appendRepr(b, ascii)
			b.WriteString(": ")
			p.Val.appendRepr(b, ascii)
		}
		b.WriteByte('}')
	default:
		b.WriteString(v.PyStr())
	}
}

// QuoteString is Python's repr of a str (ascii() when ascii is set): single
// quotes unless the text holds a single quote and no double quote.
func QuoteString(s string, ascii bool) string {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(quote)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			// Not valid UTF-8; Python strings cannot hold such bytes, so
			// show them the way a surrogateescape'd str would print.
			b.WriteString(`\udc`)
			b.WriteString(strconv.FormatUint(uint64(s[i]), 16))
			i++
			continue
		}
		i += size
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			writeHexEscape(&b, r)
		case r < 0x80:
			b.WriteRune(r)
		case ascii || !IsPrintable(r):
			writeHexEscape(&b, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

func writeHexEscape(b *strings.Builder, r rune) {
	const hexdigits = "0123456789abcdef"
	switch {
	case r <= 0xff:
		b.WriteString(`\x`)
		b.WriteByte(hexdigits[r>>4])
		b.WriteByte(hexdigits[r&0xf])
	case r <= 0xffff:
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hexdigits[(r>>uint(shift))&0xf])
		}
	default:
		b.WriteString(`\U`)
		for shift := 28; shift >= 0; shift -= 4 {
			b.WriteByte(hexdigits[(r>>uint(shift))&0xf])
		}
	}
}

// IsPrintable is Python's str.isprintable for one character: letters, marks,
// numbers, punctuation, symbols and the ASCII space.
func IsPrintable(r rune) bool {
	return unicode.IsPrint(r)
}

// FormatFloatRepr is Python's repr(float): the shortest digits that round-trip,
// positional for exponents in [-4, 16), otherwise scientific, and always
// marked as a float ("1.0", "1e+16").
func FormatFloatRepr(f float64) string {
	return string(AppendFloatRepr(nil, f))
}

// AppendFloatRepr appends FormatFloatRepr(f) to dst.
func AppendFloatRepr(dst []byte, f float64) []byte {
	switch {
	case f != f:
		return append(dst, "nan"...)
	case f > 1.7976931348623157e308:
		return append(dst, "inf"...)
	case f < -1.7976931348623157e308:
		return append(dst, "-inf"...)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	neg := false
	if e[0] == '-' {
		neg = true
		e = e[1:]
	}
	// e is d[.ddd]e±XX
	epos := strings.IndexByte(string(e), 'e')
	mant, expPart := e[:epos], e[epos+1:]
	exp, _ := strconv.Atoi(string(expPart))
	digits := make([]byte, 0, 20)
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	decpt := exp + 1 // value = 0.digits * 10^decpt
	if neg {
		dst = append(dst, '-')
	}
	if decpt <= -4 || decpt > 16 {
		dst = append(dst, digits[0])
		if len(digits) > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		return AppendExponent(dst, 'e', exp)
	}
	switch {
	case decpt <= 0:
		dst = append(dst, '0', '.')
		for i := 0; i < -decpt; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	case decpt >= len(digits):
		dst = append(dst, digits...)
		for i := len(digits); i < decpt; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, '.', '0')
	default:
		dst = append(dst, digits[:decpt]...)
		dst = append(dst, '.')
		dst = append(dst, digits[decpt:]...)
	}
	return dst
}

// AppendExponent appends Python's exponent suffix: the marker, a sign, and
// at least two digits ("e+16", "E-05").
func AppendExponent(dst []byte, marker byte, exp int) []byte {
	dst = append(dst, marker)
	if exp < 0 {
		dst = append(dst, '-')
		exp = -exp
	} else {
		dst = append(dst, '+')
	}
	if exp < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(exp), 10)
}
