package acl

import (
	"fmt"
	"slices"
	"strings"
)

// Explanation says why a subject gets its answer on one path.
type Explanation struct {
	Path         string   `json:"path"`
	Capabilities []string `json:"capabilities,omitempty"`
	Error        string   `json:"error,omitempty"`
	// Step is the stage of Vault's lookup that decided.
	Step string `json:"step"`
	// Pattern is the deciding pattern as written, Kind its store.
	Pattern string `json:"pattern,omitempty"`
	Kind    string `json:"kind,omitempty"`
	// Policies are the policies with a rule on the deciding pattern;
	// Sources are those rules.
	Policies []string `json:"policies,omitempty"`
	Sources  []Source `json:"sources,omitempty"`
	// Rule is why the pattern won over the best other candidate.
	Rule string `json:"rule,omitempty"`
	// Over are the other matching patterns, each with why it lost.
	Over []Beaten `json:"over,omitempty"`
	// Caveats are what the answer does not show or cannot be trusted for.
	Caveats []string `json:"caveats,omitempty"`
}

// Beaten is a matching pattern that did not decide.
type Beaten struct {
	Pattern      string   `json:"pattern"`
	Kind         string   `json:"kind"`
	Policies     []string `json:"policies"`
	Capabilities []string `json:"capabilities"`
	Why          string   `json:"why"`
}

// candidate is a hit with what it is, for explanations.
type candidate struct {
	h    hit
	step Step
}

func (h hit) entry() *entry { return h.first() }

func (h hit) policies() []string {
	var out []string
	for _, e := range []*entry{h.a, h.b} {
		if e == nil {
			continue
		}
		for _, s := range e.sources {
			if !slices.Contains(out, s.Policy) {
				out = append(out, s.Policy)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (h hit) sources() []Source {
	var out []Source
	for _, e := range []*entry{h.a, h.b} {
		if e != nil {
			out = append(out, e.sources...)
		}
	}
	return out
}

// candidates lists every pattern Vault considers for path at one step:
// the exact entry, or the longest prefix and every matching segment
// pattern, with the same key in the base and the templated rules merged.
func (p *Prepared) candidates(path string, exact bool) []hit {
	if exact {
		if h := p.exact(path); h.found() {
			return []hit{h}
		}
		return nil
	}
	n := strings.Count(path, "/") + 1
	var out []hit
	addEntry := func(e *entry, fromOver bool) {
		for i := range out {
			o := out[i].first()
			if o.kind == e.kind && o.key == e.key {
				if fromOver {
					out[i].b = e
				}
				return
			}
		}
		if fromOver {
			out = append(out, hit{b: e})
		} else {
			out = append(out, hit{a: e})
		}
	}
	sets := []*ruleSet{p.base.set, p.over}
	// Only the longest prefix of all is a candidate.
	var longest *entry
	for _, s := range sets {
		if s == nil {
			continue
		}
		if e := s.longestPrefix(path); e != nil && (longest == nil || len(e.key) > len(longest.key)) {
			longest = e
		}
	}
	for i, s := range sets {
		if s == nil {
			continue
		}
		if longest != nil {
			if e := s.prefix[longest.key]; e != nil {
				addEntry(e, i == 1)
			}
		}
		s.eachSegment(path, n, func(e *entry) { addEntry(e, i == 1) })
	}
	slices.SortFunc(out, func(x, y hit) int { return -compare(x.first(), y.first()) })
	return out
}

// Explain answers like Check and says why.
func (p *Prepared) Explain(path string) Explanation {
	x := Explanation{Path: path}
	d := p.Check(path)
	x.Step = d.Step.String()
	switch {
	case d.Err != nil:
		x.Error = d.Err.Error()
		x.Step = ""
		return x
	case d.Root:
		x.Capabilities = []string{"root"}
		x.Step = "root token"
		return x
	}
	x.Capabilities = d.Capabilities()
	if p.none {
		x.Caveats = append(x.Caveats, "the token has no policies at all")
		return x
	}
	clean := strings.TrimLeft(path, "/")
	trimmed := strings.TrimSuffix(clean, "/")

	// Every candidate of every step, in Vault's order of steps.
	var all []candidate
	add := func(hs []hit, s Step) {
		for _, h := range hs {
			all = append(all, candidate{h, s})
		}
	}
	add(p.candidates(clean, true), StepExact)
	if trimmed != clean {
		add(p.candidates(trimmed, true), StepExactTrimmed)
		add(p.candidates(trimmed, false), StepNonExactTrimmed)
	}
	add(p.candidates(clean, false), StepNonExact)

	win := d.hit.first()
	if win != nil {
		x.Pattern = win.pattern()
		x.Kind = win.kind.String()
		x.Policies = d.hit.policies()
		x.Sources = d.hit.sources()
	}
	var runnerUp *entry
	seen := map[*entry]bool{win: true}
	for _, c := range all {
		e := c.h.first()
		if seen[e] {
			continue
		}
		seen[e] = true
		b := Beaten{Pattern: e.pattern(), Kind: e.kind.String(), Policies: c.h.policies(), Capabilities: c.h.caps().Names()}
		switch {
		case c.step != d.Step:
			b.Why = fmt.Sprintf("%s decides first", d.Step)
		default:
			_, r := compareRule(win, e)
			b.Why = ruleText[r]
			if runnerUp == nil {
				runnerUp = e
				x.Rule = fmt.Sprintf("%s over %q", ruleText[r], e.pattern())
			}
		}
		x.Over = append(x.Over, b)
		if c.h.caps()&Deny != 0 {
			x.Caveats = append(x.Caveats, fmt.Sprintf("deny on %q (%s) matches but lost to %q: between different patterns a deny has no precedence",
				e.pattern(), strings.Join(c.h.policies(), ", "), x.Pattern))
		}
	}
	if x.Rule == "" && win != nil {
		switch d.Step {
		case StepExact, StepExactTrimmed:
			x.Rule = "an exact pattern decides before any glob or + pattern"
		default:
			x.Rule = "the only matching pattern"
		}
	}
	if d.Constrained() {
		c := fmt.Sprintf("%q carries parameter constraints (allowed, denied or required parameters, wrapping TTL, MFA or control group) that capabilities do not show", x.Pattern)
		if d.Parameters() {
			c += "; of allowed_parameters and denied_parameters, " + p.mode.ParametersNote()
		}
		x.Caveats = append(x.Caveats, c)
	}
	if g := d.Caps.Granted(); g != 0 && g&Sudo == 0 && RootProtected(path) {
		x.Caveats = append(x.Caveats, "a root-protected path: a real request also needs sudo, which these capabilities lack")
	}
	if d.Step == StepExactTrimmed || d.Step == StepNonExactTrimmed {
		x.Caveats = append(x.Caveats, "capabilities evaluate a list here, with the fallback to the path without its trailing /; a real read of this path does not fall back")
	}
	if Uncleaned(path) {
		x.Caveats = append(x.Caveats, p.mode.UncleanedCaveat())
	}
	for _, dr := range p.dropped {
		if relevant(dr.Pattern, clean) {
			x.Caveats = append(x.Caveats, fmt.Sprintf("templated rule %q of policy %q is dropped for this token: %s", dr.Pattern, dr.Policy, dr.Reason))
		}
	}
	for _, r := range p.rendered {
		if !relevant(r.Pattern, clean) {
			continue
		}
		if r.Glob {
			x.Caveats = append(x.Caveats, fmt.Sprintf("templated rule %q of policy %q rendered to %q: %s", r.Pattern, r.Policy, r.Path, p.mode.GlobCaveat()))
		}
		if r.Slash {
			x.Caveats = append(x.Caveats, fmt.Sprintf("templated rule %q of policy %q rendered to %q: a value brought a /, dropped where deny_slash_in_templated_paths is set", r.Pattern, r.Policy, r.Path))
		}
		if r.Time {
			x.Caveats = append(x.Caveats, fmt.Sprintf("templated rule %q of policy %q uses time.now: the path changes every second", r.Pattern, r.Policy))
		}
	}
	for _, m := range p.Missing() {
		x.Caveats = append(x.Caveats, fmt.Sprintf("policy %q does not exist and is skipped", m))
	}
	return x
}

// relevant reports whether a templated pattern could concern path: the
// text before its first directive starts the path.
func relevant(pattern, path string) bool {
	lit := strings.TrimPrefix(pattern, "/")
	if i := strings.Index(lit, "{{"); i >= 0 {
		lit = lit[:i]
	}
	return strings.HasPrefix(path, lit) || strings.HasPrefix(lit, path)
}

// PatternView is one stored pattern of a subject, after templating and
// the merge of every rule with the same key.
type PatternView struct {
	Pattern      string   `json:"pattern"`
	Kind         string   `json:"kind"`
	Capabilities []string `json:"capabilities"`
	Constrained  bool     `json:"constrained,omitempty"`
	// ParametersNote is set when the constraints include allowed or
	// denied parameters: how the Vault version matches a list value.
	ParametersNote string   `json:"parametersNote,omitempty"`
	Sources        []Source `json:"sources"`
	caps           Caps
}

// Caps is the pattern's merged bitmap.
func (v PatternView) Caps() Caps { return v.caps }

// Patterns lists the subject's patterns after templating, sorted by
// pattern: what a what-can report shows.
func (p *Prepared) Patterns() []PatternView {
	if p.base == nil || p.err != nil {
		return nil
	}
	var out []PatternView
	seen := map[string]bool{}
	view := func(h hit) {
		e := h.first()
		c := h.caps()
		v := PatternView{Pattern: e.pattern(), Kind: e.kind.String(), Capabilities: c.Names(),
			Constrained: c&Deny == 0 && h.constrained(), Sources: h.sources(), caps: c}
		if c&Deny == 0 && h.parameters() {
			v.ParametersNote = p.mode.ParametersNote()
		}
		out = append(out, v)
	}
	type store struct {
		k        kind
		base, ov map[string]*entry
	}
	var ovExact, ovPrefix, ovSeg map[string]*entry
	if p.over != nil {
		ovExact, ovPrefix, ovSeg = p.over.exact, p.over.prefix, p.over.segKeys
	}
	for _, s := range []store{{exactKind, p.base.set.exact, ovExact}, {prefixKind, p.base.set.prefix, ovPrefix}, {segmentKind, p.base.set.segKeys, ovSeg}} {
		for k, e := range s.base {
			seen[s.k.String()+"\x00"+k] = true
			view(hit{a: e, b: s.ov[k]})
		}
		for k, e := range s.ov {
			if !seen[s.k.String()+"\x00"+k] {
				view(hit{b: e})
			}
		}
	}
	slices.SortFunc(out, func(a, b PatternView) int {
		if c := strings.Compare(a.Pattern, b.Pattern); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	return out
}
