package acl

import (
	"fmt"
	"strings"
	"time"
)

// Dropped is a templated rule that Vault ignores for this token.
type Dropped struct {
	Policy  string `json:"policy"`
	Pattern string `json:"pattern"`
	Line    int    `json:"line,omitempty"`
	Reason  string `json:"reason"`
	err     error
}

// Rendered is a templated rule as this token's templating made it.
type Rendered struct {
	Policy  string `json:"policy"`
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
	// Glob is set when a substituted value brought a '*' or '+' into the
	// path (Vault before 1.21.6 splices it: the rule changes shape).
	Glob bool `json:"glob,omitempty"`
	// Slash is set when a substituted value brought a '/' (extra segments).
	Slash bool `json:"slash,omitempty"`
	// Time is set when the path uses {{time.now}}: it changes every second.
	Time bool `json:"time,omitempty"`
}

// Prepared is one subject with its templated rules rendered: ready to
// answer for any path.
type Prepared struct {
	names    []string
	base     *base
	missing  []string
	over     *ruleSet
	err      error
	none     bool
	mode     Mode
	dropped  []Dropped
	rendered []Rendered
}

// Prepare renders the subject's templated rules and binds it to the
// compiled rules of its policy names.
func (e *Evaluator) Prepare(s Subject) *Prepared {
	p := &Prepared{names: s.PolicyNames(), mode: e.opts.Mode}
	if s.Entity != nil && s.Entity.Disabled {
		p.err = ErrInvalidToken
		return p
	}
	if len(p.names) == 0 {
		p.none = true
		return p
	}
	p.base, p.missing = e.base(p.names)
	if p.base.err != nil {
		p.err = p.base.err
		return p
	}
	if len(p.base.templated) == 0 {
		return p
	}
	now := time.Now
	if e.opts.Now != nil {
		now = e.opts.Now
	}
	in := &renderInput{entity: s.Entity, mode: e.opts.Mode, now: now()}
	if s.Entity != nil {
		in.groups = s.Groups
	}
	over := newRuleSet()
	for _, pol := range p.base.templated {
		for _, r := range pol.Rules {
			if !r.Templated {
				continue
			}
			out, info, err := render(r.Pattern, in)
			if err != nil {
				p.dropped = append(p.dropped, Dropped{Policy: pol.Name, Pattern: r.Pattern, Line: r.Line, Reason: err.Error(), err: err})
				continue
			}
			path := strings.TrimPrefix(out, "/")
			k, err := classify(path)
			if err != nil {
				p.err = fmt.Errorf("%w %q: path %q: %w", ErrTemplatedPolicy, pol.Name, path, err)
				return p
			}
			p.rendered = append(p.rendered, Rendered{Policy: pol.Name, Pattern: r.Pattern, Path: path,
				Glob: info.glob, Slash: info.slash, Time: info.usedTime})
			over.add(k, path, Source{Policy: pol.Name, Pattern: r.Pattern, Path: path, Line: r.Line, Caps: r.Caps, Templated: true}, r.Constrained, r.Parameters)
		}
	}
	if !over.empty() {
		p.over = over
	}
	return p
}

// Err is the error every capabilities call of this subject answers, if
// any (a disabled entity, a templated policy that no longer parses).
func (p *Prepared) Err() error { return p.err }

// Names are the policy names Vault loads for the subject.
func (p *Prepared) Names() []string { return p.names }

// Missing are the names with no policy document (skipped).
func (p *Prepared) Missing() []string { return p.missing }

// Dropped are the templated rules Vault ignores for this subject.
func (p *Prepared) Dropped() []Dropped { return p.dropped }

// Rendered are the templated rules as rendered for this subject.
func (p *Prepared) Rendered() []Rendered { return p.rendered }
