package acl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Errors a capabilities call answers instead of a list.
var (
	// ErrMissingPath is sys/capabilities' 400 for an empty path.
	ErrMissingPath = errors.New("missing path")
	// ErrInvalidToken is the 400 sys/capabilities gives for a token whose
	// entity is disabled (vault/capabilities.go).
	ErrInvalidToken = errors.New("invalid token")
	// ErrTemplatedPolicy is the 500 of every request of a token whose
	// templated policy no longer parses once rendered ("+*").
	ErrTemplatedPolicy = errors.New("error parsing templated policy")
	// ErrRootWithOthers is NewACL's refusal of root beside other policies.
	ErrRootWithOthers = errors.New("other policies present along with root")
)

// Options configure an Evaluator.
type Options struct {
	Mode Mode
	// Now is the clock of {{time.now}}; nil means time.Now.
	Now func() time.Time
}

// Evaluator holds a set of policy documents, as one Vault holds them, and
// the compiled rules of every list of policy names asked about so far.
type Evaluator struct {
	opts     Options
	policies map[string]*Policy

	mu    sync.Mutex
	bases map[string]*base
}

// New parses the documents (name to HCL text). An error names the first
// document Vault would refuse, in name order.
func New(docs map[string]string, opts Options) (*Evaluator, error) {
	e := &Evaluator{opts: opts, policies: make(map[string]*Policy, len(docs)), bases: map[string]*base{}}
	names := make([]string, 0, len(docs))
	for n := range docs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p, err := Parse(n, docs[n])
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", n, err)
		}
		e.policies[p.Name] = p
	}
	return e, nil
}

// Mode is the evaluator's Vault mode.
func (e *Evaluator) Mode() Mode { return e.opts.Mode }

// Policy returns the parsed policy of a name, nil when there is none.
func (e *Evaluator) Policy(name string) *Policy { return e.policies[SanitizeName(name)] }

// Policies returns the parsed policies, by name.
func (e *Evaluator) Policies() map[string]*Policy { return e.policies }

// Subject is what Vault knows of one token when it answers
// sys/capabilities: its own policies, fixed at login, and its entity and
// groups, read live.
type Subject struct {
	// TokenPolicies are te.Policies (for a login: LoginPolicies of the
	// role's token_policies).
	TokenPolicies []string
	// NoIdentityPolicies is te.NoIdentityPolicies.
	NoIdentityPolicies bool
	// Entity is nil for a token without an entity.
	Entity *Entity
	// Groups are the entity's groups, direct and inherited.
	Groups []Group
}

// PolicyNames are the names Vault loads for the subject, sanitised, without
// duplicates, sorted: token policies, then the identity policies of the
// entity and its groups.
func (s *Subject) PolicyNames() []string {
	var names []string
	add := func(list []string) {
		for _, n := range list {
			if n = SanitizeName(n); n != "" {
				names = append(names, n)
			}
		}
	}
	add(s.TokenPolicies)
	if !s.NoIdentityPolicies && s.Entity != nil {
		add(s.Entity.Policies)
		for _, g := range s.Groups {
			add(g.Policies)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// LoginPolicies is policyutil.SanitizePolicies as a login applies it to a
// role's token_policies: trimmed, lower-cased, "default" added unless the
// role says no, root alone, no duplicates, sorted.
func LoginPolicies(tokenPolicies []string, addDefault bool) []string {
	var out []string
	hasDefault, hasRoot := false, false
	for _, p := range tokenPolicies {
		p = SanitizeName(p)
		if p == "" {
			continue
		}
		hasDefault = hasDefault || p == "default"
		hasRoot = hasRoot || p == "root"
		out = append(out, p)
	}
	if !hasDefault && addDefault {
		out = append(out, "default")
	}
	if hasRoot {
		return []string{"root"}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// base is the part of an ACL shared by every token with the same policy
// names: the non-templated rules, compiled once.
type base struct {
	names   []string // loaded policies
	missing []string // names with no policy (skipped, as Vault does)
	root    bool
	err     error
	set     *ruleSet
	// templated are the loaded policies with templated rules; each token
	// renders those rules itself.
	templated []*Policy
}

func (e *Evaluator) base(names []string) *base {
	key := strings.Join(names, "\x00")
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := e.bases[key]; ok {
		return b
	}
	b := &base{set: newRuleSet()}
	rootSeen := false
	for _, n := range names {
		if n == "root" {
			rootSeen = true
			continue
		}
		p := e.policies[n]
		if p == nil {
			b.missing = append(b.missing, n)
			continue
		}
		b.names = append(b.names, n)
		for _, r := range p.Rules {
			if r.Templated {
				continue
			}
			path := strings.TrimPrefix(r.Pattern, "/")
			k, _ := classify(path) // Parse refused the errors
			b.set.add(k, path, Source{Policy: p.Name, Pattern: r.Pattern, Path: path, Line: r.Line, Caps: r.Caps}, r.Constrained)
		}
		if p.Templated {
			b.templated = append(b.templated, p)
		}
	}
	if rootSeen {
		if len(b.names) == 0 {
			b.root = true
		} else {
			b.err = ErrRootWithOthers
		}
	}
	e.bases[key] = b
	return b
}

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
	over     *ruleSet
	err      error
	none     bool
	dropped  []Dropped
	rendered []Rendered
}

// Prepare renders the subject's templated rules and binds it to the
// compiled rules of its policy names.
func (e *Evaluator) Prepare(s Subject) *Prepared {
	p := &Prepared{names: s.PolicyNames()}
	if s.Entity != nil && s.Entity.Disabled {
		p.err = ErrInvalidToken
		return p
	}
	if len(p.names) == 0 {
		p.none = true
		return p
	}
	p.base = e.base(p.names)
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
			over.add(k, path, Source{Policy: pol.Name, Pattern: r.Pattern, Path: path, Line: r.Line, Caps: r.Caps, Templated: true}, r.Constrained)
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
func (p *Prepared) Missing() []string {
	if p.base == nil {
		return nil
	}
	return p.base.missing
}

// Dropped are the templated rules Vault ignores for this subject.
func (p *Prepared) Dropped() []Dropped { return p.dropped }

// Rendered are the templated rules as rendered for this subject.
func (p *Prepared) Rendered() []Rendered { return p.rendered }

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

// Pattern is the deciding pattern as written ("" when none).
func (d Decision) Pattern() string {
	if e := d.hit.first(); e != nil {
		return e.pattern()
	}
	return ""
}

// Policies are the names of the policies whose rules made the deciding
// pattern.
func (d Decision) Policies() []string {
	var out []string
	for _, e := range []*entry{d.hit.a, d.hit.b} {
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
