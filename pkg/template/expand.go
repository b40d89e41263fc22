package template

import (
	"errors"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Expansion follows saltext-vault's expand_pattern_lists (phase A) and
// str.format (phase B), templating spec §3. Phase A walks the fields left
// to right; at the first list or dict it makes one copy per element with
// every occurrence of the field's token replaced, and expands each copy
// again. Phase B formats each copy.
//
// Regular patterns (the token text occurs only as the fields themselves)
// take a fast path: the pattern is parsed once and a substitution is an
// override on the field, so nothing is re-parsed or copied. Other patterns
// take the general path, which rewrites and re-parses the text as upstream
// does, with substituted bytes masked as literal.

type expander struct {
	sc        scope
	arena     []byte
	mode      leafMode
	spans     []span   // results, as ranges of arena
	kvs       []kvSpan // metadata results
	warnings  []string
	composite bool // a list or dict was expanded

	// With recordFields, the text each field contributed to each result is
	// kept in fieldSpans, leafFields[k] being where result k's fields start.
	recordFields bool
	fieldSpans   []span
	leafFields   []int

	vals []value.Value
	ov   []string
	has  []bool
	skip []bool
	spec []byte // scratch for nested format specs
}

// reset sizes the per-chunk scratch. Only skip needs clearing: vals is
// written before it is read, and walk leaves has and ov as it found them.
func (e *expander) reset(n int) {
	e.composite = false
	if cap(e.vals) < n {
		e.vals = make([]value.Value, n)
		e.ov = make([]string, n)
		e.has = make([]bool, n)
		e.skip = make([]bool, n)
	}
	e.vals, e.ov, e.has, e.skip = e.vals[:n], e.ov[:n], e.has[:n], e.skip[:n]
	clear(e.skip)
}

// run expands and formats p, calling onLeaf after formatting each result
// (with the error that formatting raised, if any). It returns the error that
// ended the expansion: a phase A error (no leaf was formatted) or whatever
// onLeaf returned to stop.
func (e *expander) run(p *Pattern) *Error {
	if !p.regular {
		return e.runGeneral(p.src)
	}
	if p.static {
		start := len(e.arena)
		e.composite = false
		e.arena = append(e.arena, p.parsed.chunks[0].lit...)
		return e.onLeaf(start, nil)
	}
	chunks := p.parsed.chunks
	e.reset(len(chunks))
	leaves, err := e.precheck(p)
	if err != nil || leaves == 0 {
		return err
	}
	return e.walk(chunks, 0)
}

// precheck is phase A's first branch: it resolves each field once, raises
// the first error in upstream order, and counts the results from the list
// sizes, so an oversized product is refused before it is built.
func (e *expander) precheck(p *Pattern) (int, *Error) {
	chunks := p.parsed.chunks
	leaves := 1
	for i := range chunks {
		f := chunks[i].f
		if f == nil {
			continue
		}
		if f.tokenable && e.expandedEarlier(chunks, i) {
			e.skip[i] = true
			continue
		}
		v, err := e.sc.resolve(f)
		if err != nil {
			return 0, err
		}
		e.vals[i] = v
		if !v.IsComposite() {
			continue
		}
		e.composite = true
		n := v.Len()
		if n == 0 {
			// Upstream expands the first list field it meets: an empty one
			// leaves no pattern at all, before the field's text (a
			// conversion or format spec it cannot replace) matters.
			return 0, nil
		}
		if !f.tokenable {
			return 0, errf(RecursionError, "{%s}", f.name)
		}
		leaves *= n
		if leaves > MaxResults {
			return 0, errf(LimitError, "expands to more than %d results", MaxResults)
		}
	}
	if p.parsed.err != nil {
		return 0, p.parsed.err
	}
	return leaves, nil
}

func (e *expander) expandedEarlier(chunks []chunk, i int) bool {
	name := chunks[i].f.name
	for j := 0; j < i; j++ {
		if g := chunks[j].f; g != nil && g.tokenable && !e.skip[j] && g.name == name && e.vals[j].IsComposite() {
			return true
		}
	}
	return false
}

func (e *expander) walk(chunks []chunk, i int) *Error {
	for ; i < len(chunks); i++ {
		f := chunks[i].f
		if f == nil || e.has[i] || !e.vals[i].IsComposite() {
			continue
		}
		v := e.vals[i]
		for k, n := 0, v.Len(); k < n; k++ {
			text := elemText(v, k)
			for _, j := range f.same {
				e.has[j], e.ov[j] = true, text
			}
			err := e.walk(chunks, i+1)
			for _, j := range f.same {
				e.has[j], e.ov[j] = false, ""
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	start := len(e.arena)
	var err *Error
	e.arena, err = e.formatChunks(e.arena, chunks, true)
	return e.onLeaf(start, err)
}

// elemText is the text substituted for element k: str() of a list item or
// of a dict key.
func elemText(v value.Value, k int) string {
	if v.IsList() {
		return v.Items()[k].PyStr()
	}
	return v.Pairs()[k].Key.PyStr()
}

// formatChunks is phase B. With cached set, field values come from the
// precheck and substitutions from the overrides; otherwise every field is
// resolved again.
func (e *expander) formatChunks(dst []byte, chunks []chunk, cached bool) ([]byte, *Error) {
	for i := range chunks {
		c := &chunks[i]
		dst = append(dst, c.lit...)
		if c.f == nil {
			continue
		}
		fstart := len(dst)
		if cached && e.has[i] {
			dst = append(dst, e.ov[i]...)
			if e.recordFields {
				e.fieldSpans = append(e.fieldSpans, span{fstart, len(dst)})
			}
			continue
		}
		var v value.Value
		if cached {
			v = e.vals[i]
		} else {
			var err *Error
			if v, err = e.sc.resolveC(c.f); err != nil {
				return dst, err
			}
		}
		var err *Error
		if dst, err = e.formatValue(dst, c.f, v, 2); err != nil {
			return dst, err
		}
		if e.recordFields {
			e.fieldSpans = append(e.fieldSpans, span{fstart, len(dst)})
		}
	}
	return dst, nil
}

// formatValue is CPython's output_markup: conversion, then the format spec
// with its nested fields expanded (one level, as CPython allows), then
// format().
func (e *expander) formatValue(dst []byte, f *field, v value.Value, depth int) ([]byte, *Error) {
	switch f.conv {
	case 0:
	case 's':
		v = value.NewString(v.PyStr())
	case 'r':
		v = value.NewString(v.PyRepr())
	case 'a':
		v = value.NewString(v.PyASCII())
	default:
		return dst, errf(ValueError, "unknown conversion specifier %q", f.conv)
	}
	spec := f.spec
	if f.nested != nil {
		if depth-1 <= 0 {
			return dst, errf(ValueError, "max string recursion exceeded")
		}
		buf := e.spec[:0]
		for i := range f.nested.chunks {
			c := &f.nested.chunks[i]
			buf = append(buf, c.lit...)
			if c.f == nil {
				continue
			}
			nv, err := e.sc.resolveC(c.f)
			if err != nil {
				return dst, err
			}
			if buf, err = e.formatValue(buf, c.f, nv, depth-1); err != nil {
				return dst, err
			}
		}
		e.spec = buf
		if f.nested.err != nil {
			return dst, f.nested.err
		}
		spec = string(buf)
	}
	if spec == "" {
		return v.AppendStr(dst), nil
	}
	out, err := appendFormat(dst, v, spec)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return dst, pe
		}
		return dst, &Error{Kind: ValueError, Msg: err.Error()}
	}
	return out, nil
}

// resolveC resolves a field the way str.format (C) does in phase B: an
// empty or numeric first name is a positional argument, and there are none.
func (sc *scope) resolveC(f *field) (value.Value, *Error) {
	if f.firstErr != nil {
		return value.Value{}, f.firstErr
	}
	if f.first == "" || f.firstIdx >= 0 {
		return value.Value{}, errf(IndexError, "replacement index out of range for positional args tuple ({%s})", f.name)
	}
	return sc.resolve(f)
}

// runGeneral is upstream's algorithm on text: rewrite, re-parse, recurse.
func (e *expander) runGeneral(src string) *Error {
	e.composite = false
	var leaves []maskedText
	calls := 0
	if err := e.expandText(src, nil, &leaves, &calls); err != nil {
		return err
	}
	for _, l := range leaves {
		p := parse(l.s, l.lit)
		start := len(e.arena)
		var err *Error
		e.arena, err = e.formatChunks(e.arena, p.chunks, false)
		if err == nil && p.err != nil {
			err = p.err
		}
		if err := e.onLeaf(start, err); err != nil {
			return err
		}
	}
	return nil
}

type maskedText struct {
	s   string
	lit []bool
}

func (e *expander) expandText(s string, lit []bool, leaves *[]maskedText, calls *int) *Error {
	*calls++
	if *calls > maxSlowCalls {
		return errf(LimitError, "expansion needs more than %d steps", maxSlowCalls)
	}
	p := parse(s, lit)
	for _, c := range p.chunks {
		if c.f == nil {
			continue
		}
		v, err := e.sc.resolve(c.f)
		if err != nil {
			return err
		}
		if !v.IsComposite() {
			continue
		}
		e.composite = true
		tok := "{" + c.f.name + "}"
		var tokMask []bool
		if c.f.nameMask != nil {
			tokMask = make([]bool, len(tok))
			copy(tokMask[1:], c.f.nameMask)
		}
		for k, n := 0, v.Len(); k < n; k++ {
			s2, lit2, ok := replaceToken(s, lit, tok, tokMask, elemText(v, k))
			if !ok {
				return errf(RecursionError, "{%s}", c.f.name)
			}
			if err := e.expandText(s2, lit2, leaves, calls); err != nil {
				return err
			}
		}
		return nil
	}
	if p.err != nil {
		return p.err
	}
	*leaves = append(*leaves, maskedText{s, lit})
	if len(*leaves) > MaxResults {
		return errf(LimitError, "expands to more than %d results", MaxResults)
	}
	return nil
}

// replaceToken is str.replace(token, text) where token must match raw text
// (or, for a token that itself holds substituted bytes, the same mask), and
// the inserted text is marked literal.
func replaceToken(s string, lit []bool, tok string, tokMask []bool, text string) (string, []bool, bool) {
	var b strings.Builder
	var mask []bool
	found := false
	last := 0
	for off := 0; off <= len(s)-len(tok); {
		k := strings.Index(s[off:], tok)
		if k < 0 {
			break
		}
		at := off + k
		if !maskMatches(lit, at, tokMask, len(tok)) {
			off = at + 1
			continue
		}
		found = true
		b.WriteString(s[last:at])
		mask = appendMask(mask, lit, last, at)
		b.WriteString(text)
		for range len(text) {
			mask = append(mask, true)
		}
		last = at + len(tok)
		off = last
	}
	if !found {
		return s, lit, false
	}
	b.WriteString(s[last:])
	mask = appendMask(mask, lit, last, len(s))
	return b.String(), mask, true
}

func maskMatches(lit []bool, at int, tokMask []bool, n int) bool {
	for i := range n {
		want := tokMask != nil && tokMask[i]
		if isLit(lit, at+i) != want {
			return false
		}
	}
	return true
}

func appendMask(mask, lit []bool, from, to int) []bool {
	for i := from; i < to; i++ {
		mask = append(mask, isLit(lit, i))
	}
	return mask
}
