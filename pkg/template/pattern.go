package template

import "strings"

// MaxResults bounds how many strings one pattern may expand to. Lists
// multiply (a cartesian product), so the bound is checked from the list
// sizes before any expansion work is done.
const MaxResults = 1024

// maxSlowCalls bounds the work of the general (irregular) expansion path.
const maxSlowCalls = 16 * MaxResults

// Pattern is a compiled template string. Compiling never fails: like
// Python, syntax errors surface only when rendering reaches them, which
// decides whether a missing key to their left hides them.
type Pattern struct {
	src    string
	parsed parsed
	// regular: upstream's textual token replacement only ever hits the
	// fields themselves, so expansion can substitute per field instead of
	// re-parsing rewritten text.
	regular bool
	// static: one literal chunk, no fields, no error.
	static bool
}

// Compile parses src once for repeated rendering.
func Compile(src string) *Pattern {
	p := &Pattern{src: src, parsed: parse(src, nil)}
	p.regular = p.isRegular()
	chunks := p.parsed.chunks
	p.static = p.parsed.err == nil && len(chunks) == 1 && chunks[0].f == nil
	for i := range chunks {
		f := chunks[i].f
		if f == nil || !f.tokenable {
			continue
		}
		for j := i; j < len(chunks); j++ {
			if g := chunks[j].f; g != nil && g.tokenable && g.name == f.name {
				f.same = append(f.same, j)
			}
		}
	}
	return p
}

// String returns the source text.
func (p *Pattern) String() string { return p.src }

// Fields returns the field names the pattern refers to (top level and in
// format specs), in order, e.g. "pillar[roles]". Validation uses it to see
// which variables a pattern reads.
func (p *Pattern) Fields() []string {
	var out []string
	var walk func(ps *parsed)
	walk = func(ps *parsed) {
		for _, c := range ps.chunks {
			if c.f == nil {
				continue
			}
			out = append(out, c.f.name)
			if c.f.nested != nil {
				walk(c.f.nested)
			}
		}
	}
	walk(&p.parsed)
	return out
}

func (p *Pattern) isRegular() bool {
	chunks := p.parsed.chunks
	for i, c := range chunks {
		if c.f == nil || !c.f.tokenable {
			continue
		}
		seen := false
		for _, prev := range chunks[:i] {
			if prev.f != nil && prev.f.tokenable && prev.f.name == c.f.name {
				seen = true
				break
			}
		}
		if seen {
			continue
		}
		token := "{" + c.f.name + "}"
		next := i // the next field chunk expected to hold an occurrence
		for off := 0; ; {
			k := strings.Index(p.src[off:], token)
			if k < 0 {
				break
			}
			at := off + k
			for next < len(chunks) && !(chunks[next].f != nil && chunks[next].f.tokenable && chunks[next].f.name == c.f.name) {
				next++
			}
			if next >= len(chunks) || chunks[next].start != at {
				return false
			}
			next++
			off = at + len(token)
		}
		for ; next < len(chunks); next++ {
			if chunks[next].f != nil && chunks[next].f.tokenable && chunks[next].f.name == c.f.name {
				return false
			}
		}
	}
	return true
}
