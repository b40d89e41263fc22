package template

import (
	"unicode"
	"unicode/utf8"
)

// The parser is a port of CPython's str.format grammar
// (Objects/stringlib/unicode_format.h: MarkupIterator, parse_field,
// field_name_split, FieldNameIterator), because upstream behaviour, including
// which error wins, follows from it. Like CPython it is lazy: a syntax error
// is only raised when the walk reaches it, so parse records the chunks before
// the first error and the error itself.
//
// Every function takes an optional mask: bytes for which lit[i] is true are
// substituted data and are never special. That is how substituted values stay
// literal (the deliberate deviation from upstream, which re-parses them).

type chunk struct {
	lit   string // literal text before the field, braces unescaped
	f     *field // nil when the chunk is literal text only
	start int    // byte offset of the field's '{' in the source
}

type parsed struct {
	chunks []chunk
	err    *Error // raised after the chunks, when reached
}

type accessor struct {
	attr bool
	name string
	idx  int // >= 0 when name is an integer index
}

type field struct {
	name     string // field_name as written, e.g. pillar[roles]
	nameMask []bool // mask of name, nil when all raw
	first    string
	firstVar Var    // the variable first names, 0 when none
	firstIdx int    // >= 0 when first is an integer
	firstErr *Error // integer overflow in first
	accs     []accessor
	accErr   *Error // raised after accs
	conv     rune   // 0, or the conversion character
	spec     string
	specMask []bool
	nested   *parsed // the spec's own fields, when it has any
	// tokenable: the markup is exactly "{" + name + "}", so upstream's textual
	// token replacement hits it.
	tokenable bool
	// same lists this chunk and the later tokenable chunks with the same
	// name: the chunks a substitution at this field replaces.
	same []int
}

func isLit(lit []bool, i int) bool { return lit != nil && lit[i] }

func sub(lit []bool, i, j int) []bool {
	if lit == nil {
		return nil
	}
	return lit[i:j]
}

func parse(s string, lit []bool) parsed {
	var p parsed
	pos := 0
	for pos < len(s) {
		start := pos
		var c byte
		markup := false
		for pos < len(s) {
			b := s[pos]
			pos++
			if (b == '{' || b == '}') && !isLit(lit, pos-1) {
				c, markup = b, true
				break
			}
		}
		atEnd := pos >= len(s)
		if markup && c == '}' && (atEnd || s[pos] != '}' || isLit(lit, pos)) {
			p.err = errf(ValueError, "single '}' encountered in format string")
			return p
		}
		if markup && c == '{' && atEnd {
			p.err = errf(ValueError, "single '{' encountered in format string")
			return p
		}
		litEnd := pos
		if markup {
			if s[pos] == c && !isLit(lit, pos) {
				pos++ // escaped brace: keep one in the literal
				markup = false
			} else {
				litEnd--
			}
		}
		ch := chunk{lit: s[start:litEnd], start: -1}
		if !markup {
			p.chunks = append(p.chunks, ch)
			continue
		}
		ch.start = pos - 1
		f, next, err := parseField(s, lit, pos)
		if err != nil {
			p.err = err
			return p
		}
		pos = next
		ch.f = f
		p.chunks = append(p.chunks, ch)
	}
	return p
}

// parseField parses one replacement field starting after its '{'.
func parseField(s string, lit []bool, pos int) (*field, int, *Error) {
	nameStart := pos
	var term byte
scan:
	for pos < len(s) {
		b := s[pos]
		pos++
		if isLit(lit, pos-1) {
			continue
		}
		switch b {
		case '{':
			return nil, 0, errf(ValueError, "unexpected '{' in field name")
		case '[':
			for pos < len(s) && (s[pos] != ']' || isLit(lit, pos)) {
				pos++
			}
		case '}', ':', '!':
			term = b
			break scan
		}
	}
	if term == 0 {
		return nil, 0, errf(ValueError, "expected '}' before end of string")
	}
	nameEnd := pos - 1
	f := &field{name: s[nameStart:nameEnd], nameMask: sub(lit, nameStart, nameEnd)}
	f.splitName()
	if term == '}' {
		f.tokenable = true
		return f, pos, nil
	}
	if term == '!' {
		if pos >= len(s) {
			return nil, 0, errf(ValueError, "end of string while looking for conversion specifier")
		}
		r, size := utf8.DecodeRuneInString(s[pos:])
		f.conv = r
		pos += size
		if pos < len(s) {
			b := s[pos]
			pos++
			if b == '}' && !isLit(lit, pos-1) {
				return f, pos, nil
			}
			if b != ':' || isLit(lit, pos-1) {
				return nil, 0, errf(ValueError, "expected ':' after conversion specifier")
			}
		}
	}
	specStart := pos
	count := 1
	expand := false
	for pos < len(s) {
		b := s[pos]
		pos++
		if isLit(lit, pos-1) {
			continue
		}
		switch b {
		case '{':
			expand = true
			count++
		case '}':
			count--
			if count == 0 {
				f.spec = s[specStart : pos-1]
				f.specMask = sub(lit, specStart, pos-1)
				if expand {
					n := parse(f.spec, f.specMask)
					f.nested = &n
				}
				return f, pos, nil
			}
		}
	}
	return nil, 0, errf(ValueError, "unmatched '{' in format spec")
}

// splitName is field_name_split plus an eager walk of FieldNameIterator,
// recording the first error so resolution can raise it in order.
func (f *field) splitName() {
	s, lit := f.name, f.nameMask
	i := 0
	for i < len(s) && !((s[i] == '[' || s[i] == '.') && !isLit(lit, i)) {
		i++
	}
	f.first = s[:i]
	f.firstVar = varNames[f.first]
	f.firstIdx, f.firstErr = getInteger(f.first)
	for i < len(s) {
		b := s[i]
		raw := !isLit(lit, i)
		i++
		var a accessor
		switch {
		case raw && b == '.':
			a.attr = true
			j := i
			for i < len(s) && !((s[i] == '[' || s[i] == '.') && !isLit(lit, i)) {
				i++
			}
			a.name, a.idx = s[j:i], -1
		case raw && b == '[':
			j := i
			for i < len(s) && (s[i] != ']' || isLit(lit, i)) {
				i++
			}
			if i >= len(s) {
				f.accErr = errf(ValueError, "missing ']' in format string")
				return
			}
			a.name = s[j:i]
			i++
			var err *Error
			if a.idx, err = getInteger(a.name); err != nil {
				f.accErr = err
				return
			}
		default:
			f.accErr = errf(ValueError, "only '.' or '[' may follow ']' in format field specifier")
			return
		}
		if a.name == "" {
			f.accErr = errf(ValueError, "empty attribute in format string")
			return
		}
		f.accs = append(f.accs, a)
	}
}

// getInteger is CPython's get_integer: -1 unless every character is a
// Unicode decimal digit (not only ASCII, as in CPython).
func getInteger(s string) (int, *Error) {
	if s == "" {
		return -1, nil
	}
	const maxInt = int(^uint(0) >> 1)
	acc := 0
	for _, r := range s {
		d := unicodeDecimal(r)
		if d < 0 {
			return -1, nil
		}
		if acc > (maxInt-d)/10 {
			return -1, errf(ValueError, "too many decimal digits in format string")
		}
		acc = acc*10 + d
	}
	return acc, nil
}

func unicodeDecimal(r rune) int {
	if '0' <= r && r <= '9' {
		return int(r - '0')
	}
	if r < 0x80 || !unicode.Is(unicode.Nd, r) {
		return -1
	}
	// Decimal digits come in contiguous runs of ten starting at zero.
	zero := r
	for zero > 0 && unicode.Is(unicode.Nd, zero-1) {
		zero--
	}
	return int(r-zero) % 10
}
