package template

import (
	"math"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// This file is Python's format(value, spec): the format-spec mini-language
// of str.__format__, int.__format__ (which bool inherits), float.__format__
// and object.__format__ (NoneType, list, dict), as CPython 3.11 implements it
// in Python/formatter_unicode.c and Python/pystrtod.c. The functions follow
// the C closely (parse_internal_render_format_spec, format_string_internal,
// format_long_internal, format_float_internal, calc_number_widths,
// fill_number, _PyUnicode_InsertThousandsGrouping, format_float_short), so
// that which error wins and where the padding goes come out the same.
//
// Deliberate differences from Python:
//   - maxFormatWidth bounds the width (and a float's precision): Python would
//     build a string of any size the spec asks for, which a template author
//     could use to exhaust memory. Exceeding it is a LimitError.
//   - OverflowError ('c' with an argument outside range(0x110000)) has no
//     ErrKind of its own and is reported as a ValueError.
//   - format(0xD800, 'c') makes a lone surrogate in Python, which no UTF-8
//     output can hold; it becomes U+FFFD here.
//   - Go strings may hold invalid UTF-8, Python strings cannot: each invalid
//     byte counts as one character (of value 0xDC00+byte, as surrogateescape
//     would decode it) and is copied through unchanged.

// maxFormatWidth is our bound on a spec's width, and on a float's precision
// (a string's precision only truncates, so it is not bounded).
const maxFormatWidth = 4096

// formatSpec is CPython's InternalFormatSpec.
type formatSpec struct {
	fill      string // the fill character, as written in the spec
	align     rune   // '<', '>', '^' or '='
	sign      rune   // 0, '+', '-' or ' '
	noNeg0    bool   // 'z'
	alt       bool   // '#'
	width     int64  // -1 when not given
	thousands byte   // 0, ',', '_', or '4' for '_' every four digits
	precision int64  // -1 when not given
	typ       rune   // presentation type; 0 is none (for float)
}

// appendFormat appends Python's format(v, spec) to dst. On error dst is
// returned unchanged and the error is a *Error with Python's message.
func appendFormat(dst []byte, v value.Value, spec string) ([]byte, error) {
	if spec == "" {
		// str(v) for every type.
		switch v.Kind() {
		case value.String:
			return append(dst, v.Str()...), nil
		case value.Int:
			return strconv.AppendInt(dst, v.Int(), 10), nil
		case value.Float:
			return value.AppendFloatRepr(dst, v.Float()), nil
		case value.Bool:
			if v.Bool() {
				return append(dst, "True"...), nil
			}
			return append(dst, "False"...), nil
		case value.Null:
			return append(dst, "None"...), nil
		}
		return append(dst, v.PyStr()...), nil
	}
	var fs formatSpec
	var err *Error
	switch v.Kind() {
	case value.String:
		if err = parseFormatSpec(&fs, spec, 's', '<', "str"); err != nil {
			return dst, err
		}
		if fs.typ != 's' {
			return dst, unknownFormatCode(fs.typ, "str")
		}
		out, err := appendFormatStr(dst, v.Str(), &fs)
		if err != nil {
			return dst, err
		}
		return out, nil
	case value.Int, value.Bool:
		typeName := "int"
		i := v.Int()
		if v.Kind() == value.Bool {
			typeName = "bool"
			i = 0
			if v.Bool() {
				i = 1
			}
		}
		if err = parseFormatSpec(&fs, spec, 'd', '>', typeName); err != nil {
			return dst, err
		}
		var out []byte
		switch fs.typ {
		case 'b', 'c', 'd', 'o', 'x', 'X', 'n':
			out, err = appendFormatInt(dst, i, &fs)
		case 'e', 'E', 'f', 'F', 'g', 'G', '%':
			// float(i) is correctly rounded in both languages.
			out, err = appendFormatFloat(dst, float64(i), &fs)
		default:
			return dst, unknownFormatCode(fs.typ, typeName)
		}
		if err != nil {
			return dst, err
		}
		return out, nil
	case value.Float:
		if err = parseFormatSpec(&fs, spec, 0, '>', "float"); err != nil {
			return dst, err
		}
		switch fs.typ {
		case 0, 'e', 'E', 'f', 'F', 'g', 'G', 'n', '%':
		default:
			return dst, unknownFormatCode(fs.typ, "float")
		}
		out, err := appendFormatFloat(dst, v.Float(), &fs)
		if err != nil {
			return dst, err
		}
		return out, nil
	}
	// object.__format__ accepts only the empty spec.
	return dst, errf(TypeError, "unsupported format string passed to %s.__format__", v.Kind().PyType())
}

// specRune decodes the character at s[i]. An invalid byte is one character,
// valued as surrogateescape would decode it.
func specRune(s string, i int) (rune, int) {
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return 0xDC00 + rune(s[i]), 1
	}
	return r, n
}

func isAlignment(r rune) bool { return r == '<' || r == '>' || r == '=' || r == '^' }

// specDigit is Py_UNICODE_TODECIMAL: the value of a Unicode decimal digit
// (category Nd), or -1.
func specDigit(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	if r < 0x80 || !unicode.Is(unicode.Nd, r) {
		return -1
	}
	// Decimal digits come in contiguous runs of ten, 0 to 9, so the offset
	// from the start of the contiguous Nd block gives the value.
	z := r
	for unicode.Is(unicode.Nd, z-1) {
		z--
	}
	return int(r-z) % 10
}

// parseInteger is get_integer: it reads decimal digits at *pos into *result
// and reports how many it read.
func parseInteger(spec string, pos *int, result *int64) (int, *Error) {
	var acc int64
	n := 0
	i := *pos
	for i < len(spec) {
		r, size := specRune(spec, i)
		d := specDigit(r)
		if d < 0 {
			break
		}
		if acc > (math.MaxInt64-int64(d))/10 {
			*pos = i
			return -1, errf(ValueError, "Too many decimal digits in format string")
		}
		acc = acc*10 + int64(d)
		i += size
		n++
	}
	*pos = i
	*result = acc
	return n, nil
}

// parseFormatSpec is parse_internal_render_format_spec for a non-empty spec.
func parseFormatSpec(fs *formatSpec, spec string, defType, defAlign rune, typeName string) *Error {
	*fs = formatSpec{fill: " ", align: defAlign, width: -1, precision: -1, typ: defType}
	end := len(spec)
	pos := 0
	fillSpecified, alignSpecified := false, false

	r0, n0 := specRune(spec, 0)
	if n0 < end {
		if r1, n1 := specRune(spec, n0); isAlignment(r1) {
			fs.fill = spec[:n0]
			fs.align = r1
			fillSpecified, alignSpecified = true, true
			pos = n0 + n1
		}
	}
	if !alignSpecified && isAlignment(r0) {
		fs.align = r0
		alignSpecified = true
		pos = n0
	}
	// The remaining flags are ASCII, and no byte of a multi-byte UTF-8
	// sequence is ASCII, so they can be matched byte-wise.
	if pos < end && (spec[pos] == '+' || spec[pos] == '-' || spec[pos] == ' ') {
		fs.sign = rune(spec[pos])
		pos++
	}
	if pos < end && spec[pos] == 'z' {
		fs.noNeg0 = true
		pos++
	}
	if pos < end && spec[pos] == '#' {
		fs.alt = true
		pos++
	}
	if !fillSpecified && pos < end && spec[pos] == '0' {
		fs.fill = "0"
		if !alignSpecified && defAlign == '>' {
			fs.align = '='
		}
		pos++
	}
	n, err := parseInteger(spec, &pos, &fs.width)
	if err != nil {
		return err
	}
	if n == 0 {
		fs.width = -1
	}
	if pos < end && spec[pos] == ',' {
		fs.thousands = ','
		pos++
	}
	if pos < end && spec[pos] == '_' {
		if fs.thousands != 0 {
			return errf(ValueError, "Cannot specify both ',' and '_'.")
		}
		fs.thousands = '_'
		pos++
	}
	if pos < end && spec[pos] == ',' && fs.thousands == '_' {
		return errf(ValueError, "Cannot specify both ',' and '_'.")
	}
	if pos < end && spec[pos] == '.' {
		pos++
		n, err := parseInteger(spec, &pos, &fs.precision)
		if err != nil {
			return err
		}
		if n == 0 {
			return errf(ValueError, "Format specifier missing precision")
		}
	}
	if pos < end {
		r, size := specRune(spec, pos)
		if pos+size < end {
			return errf(ValueError, "Invalid format specifier '%s' for object of type '%s'", spec, typeName)
		}
		fs.typ = r
	}
	if fs.thousands != 0 {
		switch fs.typ {
		case 'd', 'e', 'f', 'g', 'E', 'G', '%', 'F', 0:
		case 'b', 'o', 'x', 'X':
			if fs.thousands == '_' {
				fs.thousands = '4'
				break
			}
			return invalidThousands(fs.thousands, fs.typ)
		default:
			return invalidThousands(fs.thousands, fs.typ)
		}
	}
	return nil
}

func invalidThousands(sep byte, typ rune) *Error {
	if typ > 32 && typ < 128 {
		return errf(ValueError, "Cannot specify '%c' with '%c'.", sep, typ)
	}
	return errf(ValueError, "Cannot specify '%c' with '\\x%x'.", sep, typ)
}

func unknownFormatCode(typ rune, typeName string) *Error {
	if typ > 32 && typ < 128 {
		return errf(ValueError, "Unknown format code '%c' for object of type '%s'", typ, typeName)
	}
	return errf(ValueError, "Unknown format code '\\x%x' for object of type '%s'", typ, typeName)
}

func checkWidth(fs *formatSpec) *Error {
	if fs.width > maxFormatWidth {
		return errf(LimitError, "format width %d is above the limit of %d", fs.width, maxFormatWidth)
	}
	return nil
}

func appendFill(dst []byte, fill string, n int) []byte {
	if len(fill) == 1 {
		c := fill[0]
		for ; n > 0; n-- {
			dst = append(dst, c)
		}
		return dst
	}
	for ; n > 0; n-- {
		dst = append(dst, fill...)
	}
	return dst
}

// appendFormatStr is format_string_internal.
func appendFormatStr(dst []byte, s string, fs *formatSpec) ([]byte, *Error) {
	if fs.sign != 0 {
		if fs.sign == ' ' {
			return dst, errf(ValueError, "Space not allowed in string format specifier")
		}
		return dst, errf(ValueError, "Sign not allowed in string format specifier")
	}
	if fs.noNeg0 {
		return dst, errf(ValueError, "Negative zero coercion (z) not allowed in string format specifier")
	}
	if fs.alt {
		return dst, errf(ValueError, "Alternate form (#) not allowed in string format specifier")
	}
	if fs.align == '=' {
		return dst, errf(ValueError, "'=' alignment not allowed in string format specifier")
	}
	if err := checkWidth(fs); err != nil {
		return dst, err
	}
	n := int64(utf8.RuneCountInString(s))
	if fs.precision >= 0 && n > fs.precision {
		// Truncate to precision characters (invalid bytes count as one).
		i := 0
		for k := int64(0); k < fs.precision; k++ {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		s = s[:i]
		n = fs.precision
	}
	total := max(fs.width, n)
	var lpad int64
	switch fs.align {
	case '>':
		lpad = total - n
	case '^':
		lpad = (total - n) / 2
	}
	rpad := total - n - lpad
	dst = appendFill(dst, fs.fill, int(lpad))
	dst = append(dst, s...)
	return appendFill(dst, fs.fill, int(rpad)), nil
}

// grouping returns the group size and separator for fs (none for 'n', which
// uses the C locale: no grouping, '.' as the decimal point).
func grouping(fs *formatSpec) (int, byte) {
	if fs.typ == 'n' {
		return 0, 0
	}
	switch fs.thousands {
	case ',':
		return 3, ','
	case '_':
		return 3, '_'
	case '4':
		return 4, '_'
	}
	return 0, 0
}

// appendFormatInt is format_long_internal for an int or bool.
func appendFormatInt(dst []byte, i int64, fs *formatSpec) ([]byte, *Error) {
	if fs.precision != -1 {
		return dst, errf(ValueError, "Precision not allowed in integer format specifier")
	}
	if fs.noNeg0 {
		return dst, errf(ValueError, "Negative zero coercion (z) not allowed in integer format specifier")
	}
	var buf [80]byte
	var num number
	if fs.typ == 'c' {
		if fs.sign != 0 {
			return dst, errf(ValueError, "Sign not allowed with integer format specifier 'c'")
		}
		if fs.alt {
			return dst, errf(ValueError, "Alternate form (#) not allowed with integer format specifier 'c'")
		}
		if i < 0 || i > 0x10FFFF {
			// OverflowError in Python.
			return dst, errf(ValueError, "%%c arg not in range(0x110000)")
		}
		// A surrogate becomes U+FFFD.
		num.rem = utf8.AppendRune(buf[:0], rune(i))
		num.remLen = 1
	} else {
		base := 10
		switch fs.typ {
		case 'b':
			base, num.prefix = 2, "0b"
		case 'o':
			base, num.prefix = 8, "0o"
		case 'x':
			base, num.prefix = 16, "0x"
		case 'X':
			base, num.prefix = 16, "0X"
		}
		if !fs.alt {
			num.prefix = ""
		}
		mag := uint64(i)
		if i < 0 {
			num.sign = '-'
			mag = -mag
		}
		num.digits = strconv.AppendUint(buf[:0], mag, base)
		if fs.typ == 'X' {
			for k, c := range num.digits {
				if c >= 'a' && c <= 'f' {
					num.digits[k] = c - 'a' + 'A'
				}
			}
		}
	}
	if err := checkWidth(fs); err != nil {
		return dst, err
	}
	return num.appendTo(dst, fs), nil
}

// appendFormatFloat is format_float_internal; fs.typ is one of
// 0 e E f F g G n %.
func appendFormatFloat(dst []byte, f float64, fs *formatSpec) ([]byte, *Error) {
	if fs.precision > math.MaxInt32 {
		return dst, errf(ValueError, "precision too big")
	}
	if err := checkWidth(fs); err != nil {
		return dst, err
	}
	if fs.precision > maxFormatWidth {
		return dst, errf(LimitError, "format precision %d is above the limit of %d", fs.precision, maxFormatWidth)
	}
	prec := int(fs.precision)
	typ := fs.typ
	defaultPrec := 6
	addDot0 := false
	if typ == 0 {
		// Like repr without a precision, else like 'g' with at least one
		// digit after the point.
		addDot0 = true
		typ = 'r'
		defaultPrec = 0
	}
	if typ == 'n' {
		typ = 'g'
	}
	addPct := false
	if typ == '%' {
		typ = 'f'
		f *= 100
		addPct = true
	}
	if prec < 0 {
		prec = defaultPrec
	} else if typ == 'r' {
		typ = 'g'
	}
	var buf [64]byte
	s := appendDoubleToString(buf[:0], f, byte(typ), prec, fs.alt, addDot0, fs.noNeg0)
	if addPct {
		s = append(s, '%')
	}
	var num number
	if s[0] == '-' {
		num.sign = '-'
		s = s[1:]
	}
	// parse_number: digits, an optional '.', the remainder.
	k := 0
	for k < len(s) && s[k] >= '0' && s[k] <= '9' {
		k++
	}
	num.digits = s[:k]
	num.rem = s[k:]
	if k < len(s) && s[k] == '.' {
		num.decimal = true
		num.rem = s[k+1:]
	}
	num.remLen = len(num.rem)
	return num.appendTo(dst, fs), nil
}

// number is a formatted number split the way calc_number_widths sees it:
// sign, prefix, digits to group, decimal point, remainder.
type number struct {
	sign    byte // '-' or 0
	prefix  string
	digits  []byte
	decimal bool
	rem     []byte
	remLen  int // characters in rem
}

// appendTo is calc_number_widths followed by fill_number.
func (n *number) appendTo(dst []byte, fs *formatSpec) []byte {
	var sign byte
	switch fs.sign {
	case '+':
		sign = '+'
		if n.sign == '-' {
			sign = '-'
		}
	case ' ':
		sign = ' '
		if n.sign == '-' {
			sign = '-'
		}
	default:
		sign = n.sign
	}
	nonDigit := len(n.prefix) + n.remLen
	if sign != 0 {
		nonDigit++
	}
	if n.decimal {
		nonDigit++
	}
	width := int(fs.width) // at most maxFormatWidth, or -1
	minWidth := 0
	if fs.fill == "0" && fs.align == '=' {
		minWidth = width - nonDigit
	}
	group, sep := grouping(fs)
	nGrouped := 0
	if len(n.digits) > 0 {
		nGrouped = groupDigits(nil, n.digits, minWidth, group, sep)
	}
	var lpad, spad, rpad int
	if padding := width - (nonDigit + nGrouped); padding > 0 {
		switch fs.align {
		case '<':
			rpad = padding
		case '^':
			lpad = padding / 2
			rpad = padding - lpad
		case '=':
			spad = padding
		default:
			lpad = padding
		}
	}
	dst = appendFill(dst, fs.fill, lpad)
	if sign != 0 {
		dst = append(dst, sign)
	}
	dst = append(dst, n.prefix...)
	dst = appendFill(dst, fs.fill, spad)
	if nGrouped > 0 {
		start := len(dst)
		dst = slices.Grow(dst, nGrouped)[:start+nGrouped]
		groupDigits(dst[start:], n.digits, minWidth, group, sep)
	}
	if n.decimal {
		dst = append(dst, '.')
	}
	dst = append(dst, n.rem...)
	return appendFill(dst, fs.fill, rpad)
}

// groupDigits is _PyUnicode_InsertThousandsGrouping: it inserts sep every
// group digits (group 0: never) and pads with zeros to minWidth. With out
// nil it only counts; otherwise it fills out, which must be exactly as long
// as the count, from the right.
func groupDigits(out, digits []byte, minWidth, group int, sep byte) int {
	minWidth = max(minWidth, 0)
	count := 0
	remaining := len(digits)
	dpos := len(digits)
	bpos := len(out)
	useSep := false
	emit := func(nChars, nZeros int) {
		if useSep {
			count++
		}
		count += nChars + nZeros
		if out == nil {
			return
		}
		if useSep {
			bpos--
			out[bpos] = sep
		}
		bpos -= nChars
		dpos -= nChars
		copy(out[bpos:], digits[dpos:dpos+nChars])
		for ; nZeros > 0; nZeros-- {
			bpos--
			out[bpos] = '0'
		}
	}
	if group > 0 {
		// The group size repeats forever, so the loop ends by break.
		for {
			l := min(group, max(remaining, minWidth, 1))
			emit(max(0, min(remaining, l)), max(0, l-remaining))
			useSep = true
			remaining -= min(remaining, l)
			minWidth -= l
			if remaining <= 0 && minWidth <= 0 {
				return count
			}
			minWidth-- // the separator's width
		}
	}
	l := max(remaining, minWidth, 1)
	emit(max(0, min(remaining, l)), max(0, l-remaining))
	return count
}

// appendDoubleToString is PyOS_double_to_string (format_float_short) with
// code one of e E f F g G r, without a sign flag: the sign is '-' or none.
func appendDoubleToString(dst []byte, f float64, code byte, prec int, alt, addDot0, noNeg0 bool) []byte {
	infStr, nanStr, expChar := "inf", "nan", byte('e')
	switch code {
	case 'E', 'F', 'G':
		infStr, nanStr, expChar = "INF", "NAN", 'E'
		code += 'a' - 'A'
	}
	switch {
	case math.IsNaN(f):
		return append(dst, nanStr...)
	case math.IsInf(f, 1):
		return append(dst, infStr...)
	case math.IsInf(f, -1):
		dst = append(dst, '-')
		return append(dst, infStr...)
	}
	mode := 0
	switch code {
	case 'e':
		mode = 2
		prec++
	case 'f':
		mode = 3
	case 'g':
		mode = 2
		if prec == 0 {
			prec = 1
		}
	default: // 'r'
		prec = 0
	}
	var dbuf [32]byte
	digits, decpt := floatDigits(dbuf[:0], f, mode, prec)
	neg := math.Signbit(f)
	if noNeg0 && neg && (len(digits) == 0 || len(digits) == 1 && digits[0] == '0') {
		neg = false
	}

	useExp := false
	exp := 0
	vEnd := len(digits)
	switch code {
	case 'e':
		useExp = true
		vEnd = prec
	case 'f':
		vEnd = decpt + prec
	case 'g':
		limit := prec
		if addDot0 {
			limit = prec - 1
		}
		if decpt <= -4 || decpt > limit {
			useExp = true
		}
		if alt {
			vEnd = prec
		}
	default:
		if decpt <= -4 || decpt > 16 {
			useExp = true
		}
	}
	if useExp {
		exp = decpt - 1
		decpt = 1
	}
	vStart := 0
	if decpt <= 0 {
		vStart = decpt - 1
	}
	if !useExp && addDot0 {
		vEnd = max(vEnd, decpt+1)
	} else {
		vEnd = max(vEnd, decpt)
	}

	if neg {
		dst = append(dst, '-')
	}
	if decpt <= 0 {
		dst = appendZeros(dst, decpt-vStart)
		dst = append(dst, '.')
		dst = appendZeros(dst, -decpt)
	} else {
		dst = appendZeros(dst, -vStart)
	}
	if 0 < decpt && decpt <= len(digits) {
		dst = append(dst, digits[:decpt]...)
		dst = append(dst, '.')
		dst = append(dst, digits[decpt:]...)
	} else {
		dst = append(dst, digits...)
	}
	if len(digits) < decpt {
		dst = appendZeros(dst, decpt-len(digits))
		dst = append(dst, '.')
		dst = appendZeros(dst, vEnd-decpt)
	} else {
		dst = appendZeros(dst, vEnd-len(digits))
	}
	if dst[len(dst)-1] == '.' && !alt {
		dst = dst[:len(dst)-1]
	}
	if useExp {
		dst = value.AppendExponent(dst, expChar, exp)
	}
	return dst
}

func appendZeros(dst []byte, n int) []byte {
	for ; n > 0; n-- {
		dst = append(dst, '0')
	}
	return dst
}

// floatDigits is _Py_dg_dtoa for a finite f: the significant digits of |f|
// without trailing zeros, and the decimal point position (|f| is
// 0.digits * 10**decpt). Mode 0 is the shortest repr, mode 2 rounds to prec
// significant digits, mode 3 to prec digits after the point. strconv rounds
// correctly (half to even on exact ties), as dtoa does.
func floatDigits(dst []byte, f float64, mode, prec int) ([]byte, int) {
	f = math.Abs(f)
	var buf [32]byte
	if mode == 3 {
		s := strconv.AppendFloat(buf[:0], f, 'f', prec, 64)
		decpt := len(s)
		start := len(dst)
		for k, c := range s {
			if c == '.' {
				decpt = k
				continue
			}
			dst = append(dst, c)
		}
		// Strip leading zeros, moving the point; an all-zero result is
		// empty, as dtoa returns it.
		lead := 0
		for start+lead < len(dst) && dst[start+lead] == '0' {
			lead++
		}
		digits := dst[start+lead:]
		decpt -= lead
		for len(digits) > 0 && digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		return digits, decpt
	}
	p := -1
	if mode == 2 {
		p = prec - 1
	}
	s := strconv.AppendFloat(buf[:0], f, 'e', p, 64)
	e := len(s) - 1
	for s[e] != 'e' {
		e--
	}
	exp := 0
	for _, c := range s[e+2:] {
		exp = exp*10 + int(c-'0')
	}
	if s[e+1] == '-' {
		exp = -exp
	}
	for _, c := range s[:e] {
		if c != '.' {
			dst = append(dst, c)
		}
	}
	for len(dst) > 1 && dst[len(dst)-1] == '0' {
		dst = dst[:len(dst)-1]
	}
	if len(dst) == 1 && dst[0] == '0' {
		return dst, 1
	}
	return dst, exp + 1
}
