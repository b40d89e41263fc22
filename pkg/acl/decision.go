package acl

import "strings"

// Step is the stage of AllowOperation that found the deciding rule.
type Step uint8

// The stages, in the order Vault tries them for a List operation.
const (
	StepNone            Step = iota // nothing matched
	StepExact                       // exactRules.Get(path)
	StepExactTrimmed                // exactRules.Get(path without one trailing "/")
	StepNonExactTrimmed             // globs and segments on the trimmed path
	StepNonExact                    // globs and segments on the path
)

var stepText = [...]string{
	StepNone:            "no rule matches",
	StepExact:           "exact match",
	StepExactTrimmed:    "exact match of the path without its trailing / (list fallback)",
	StepNonExactTrimmed: "wildcard match of the path without its trailing / (list fallback)",
	StepNonExact:        "wildcard match",
}

func (s Step) String() string { return stepText[s] }

// Decision is one answer.
type Decision struct {
	// Caps is the deciding bitmap: 0 or Deny for ["deny"].
	Caps Caps
	Root bool
	Err  error
	Step Step
	// hit are the deciding entries (two when the base and the templated
	// rules have the same key: merged).
	hit hit
}

// Capabilities is the answer as sys/capabilities gives it; nil with an
// error.
func (d Decision) Capabilities() []string {
	switch {
	case d.Err != nil:
		return nil
	case d.Root:
		return []string{"root"}
	}
	return d.Caps.Names()
}

// Constrained reports parameter constraints (or wrapping, MFA) on the
// deciding pattern, which capabilities do not show.
func (d Decision) Constrained() bool {
	return d.Caps&Deny == 0 && d.hit.constrained()
}

// Parameters reports allowed_parameters or denied_parameters among the
// deciding pattern's constraints.
func (d Decision) Parameters() bool {
	return d.Caps&Deny == 0 && d.hit.parameters()
}

// Pattern is the deciding pattern as written ("" when none).
func (d Decision) Pattern() string {
	if e := d.hit.first(); e != nil {
		return e.pattern()
	}
	return ""
}

// Policies are the names of the policies whose rules made the deciding
// pattern.
func (d Decision) Policies() []string { return d.hit.policies() }

// hit is a stored pattern seen through the base and the templated rules:
// the same key in both is Vault's merge.
type hit struct{ a, b *entry }

func (h hit) found() bool { return h.a != nil || h.b != nil }

func (h hit) first() *entry {
	if h.a != nil {
		return h.a
	}
	return h.b
}

func (h hit) caps() Caps {
	switch {
	case h.a != nil && h.b != nil:
		return merge(h.a.caps, h.b.caps)
	case h.a != nil:
		return h.a.caps
	case h.b != nil:
		return h.b.caps
	}
	return 0
}

func (h hit) constrained() bool {
	return (h.a != nil && h.a.constrained) || (h.b != nil && h.b.constrained)
}

func (h hit) parameters() bool {
	return (h.a != nil && h.a.parameters) || (h.b != nil && h.b.parameters)
}

func (p *Prepared) exact(path string) hit {
	h := hit{a: p.base.set.exact[path]}
	if p.over != nil {
		h.b = p.over.exact[path]
	}
	return h
}

func (p *Prepared) nonExact(path string) hit {
	n := strings.Count(path, "/") + 1
	x := p.base.set.best(path, n)
	if p.over == nil {
		return hit{a: x}
	}
	y := p.over.best(path, n)
	switch {
	case x == nil:
		return hit{b: y}
	case y == nil:
		return hit{a: x}
	}
	switch c := compare(x, y); {
	case c > 0:
		return hit{a: x}
	case c < 0:
		return hit{b: y}
	}
	return hit{a: x, b: y}
}

// Check answers as sys/capabilities does for the path: Vault's
// AllowOperation with a List operation.
func (p *Prepared) Check(path string) Decision {
	if path == "" {
		return Decision{Err: ErrMissingPath}
	}
	switch {
	case p.err != nil:
		return Decision{Err: p.err}
	case p.none:
		return Decision{}
	case p.base.root:
		return Decision{Root: true}
	}
	path = strings.TrimLeft(path, "/")
	h, step := p.lookup(path)
	return Decision{Caps: h.caps(), Step: step, hit: h}
}

func (p *Prepared) lookup(path string) (hit, Step) {
	if h := p.exact(path); h.found() {
		return h, StepExact
	}
	trimmed := strings.TrimSuffix(path, "/")
	if trimmed != path {
		if h := p.exact(trimmed); h.found() {
			return h, StepExactTrimmed
		}
		if h := p.nonExact(trimmed); h.found() {
			return h, StepNonExactTrimmed
		}
	}
	if h := p.nonExact(path); h.found() {
		return h, StepNonExact
	}
	return hit{}, StepNone
}
