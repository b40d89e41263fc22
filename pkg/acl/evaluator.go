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

	mu sync.Mutex
	// compiled is the base of each list of loaded names (see base).
	compiled map[string]*base
}

// New parses the documents (name to HCL text). An error names the first
// document Vault would refuse, in name order; the mode says whether an
// attribute set twice is refused (Vault 1.21 and later) or accepted.
func New(docs map[string]string, opts Options) (*Evaluator, error) {
	e := &Evaluator{opts: opts, policies: make(map[string]*Policy, len(docs)), compiled: map[string]*base{}}
	names := make([]string, 0, len(docs))
	for n := range docs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p, err := ParseMode(n, docs[n], opts.Mode)
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

// base is the part of an ACL shared by every token with the same loaded
// policies: the non-templated rules, compiled once.
type base struct {
	names []string // loaded policies
	root  bool
	err   error
	set   *ruleSet
	// templated are the loaded policies with templated rules; each token
	// renders those rules itself.
	templated []*Policy
}

// base is the compiled base of names, and the names with no policy
// (skipped, as Vault does). Lists that differ only in absent names (a
// per-minion policy nobody wrote) share one base, and nothing is kept per
// list: a fleet of distinct lists costs no memory per token.
func (e *Evaluator) base(names []string) (*base, []string) {
	var missing []string
	loaded := make([]string, 0, len(names))
	rootSeen := false
	for _, n := range names {
		switch {
		case n == "root":
			rootSeen = true
		case e.policies[n] == nil:
			missing = append(missing, n)
		default:
			loaded = append(loaded, n)
		}
	}
	ckey := strings.Join(loaded, "\x00")
	if rootSeen {
		ckey = "root\x01" + ckey
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.compiled[ckey]
	if !ok {
		c = e.compile(loaded, rootSeen)
		e.compiled[ckey] = c
	}
	return c, missing
}

// Missing are the names among the subject's policies with no document,
// which Vault skips: what Prepare(s).Missing() says, without rendering.
func (e *Evaluator) Missing(s Subject) []string {
	names := s.PolicyNames()
	if (s.Entity != nil && s.Entity.Disabled) || len(names) == 0 {
		return nil
	}
	_, missing := e.base(names)
	return missing
}

// compile is the base of loaded policy names (all present), with root
// when rootSeen.
func (e *Evaluator) compile(loaded []string, rootSeen bool) *base {
	b := &base{set: newRuleSet()}
	for _, n := range loaded {
		p := e.policies[n]
		b.names = append(b.names, n)
		for _, r := range p.Rules {
			if r.Templated {
				continue
			}
			path := strings.TrimPrefix(r.Pattern, "/")
			k, _ := classify(path) // Parse refused the errors
			b.set.add(k, path, Source{Policy: p.Name, Pattern: r.Pattern, Path: path, Line: r.Line, Caps: r.Caps}, r.Constrained, r.Parameters)
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
	return b
}
