package acl

import (
	"slices"
	"strings"
)

// Source is one policy's rule behind a stored pattern.
type Source struct {
	Policy string `json:"policy"`
	// Pattern is the key as written in the policy; Path is the key after
	// templating, without its leading "/" (what the store is keyed by, the
	// trailing "*" included).
	Pattern   string `json:"pattern"`
	Path      string `json:"path"`
	Line      int    `json:"line,omitempty"`
	Caps      Caps   `json:"-"`
	Templated bool   `json:"templated,omitempty"`
	// Ignored is set when the rule added nothing because the pattern was
	// already a deny (Vault drops it).
	Ignored bool `json:"ignored,omitempty"`
}

// entry is one stored pattern after the merge of every rule with the same
// key (vault/acl.go NewACL).
type entry struct {
	kind kind
	// key is the store key: the exact path, the prefix without its "*", or
	// the full segment pattern with its "*".
	key         string
	caps        Caps
	constrained bool
	// parameters: among the constraints, allowed or denied parameters.
	parameters bool
	sources    []Source

	// The priority inputs of CheckAllowedFromNonExactPaths.
	firstWC   int
	isPrefix  bool
	wildcards int
	wcPath    string
	// parts is wcPath split on "/" (segment patterns only).
	parts []string
}

// Pattern is the pattern as a policy writes it.
func (e *entry) pattern() string {
	if e.kind == prefixKind {
		return e.key + "*"
	}
	return e.key
}

// ruleSet holds the three stores, indexed by literal prefix so that a
// lookup touches only the patterns that can match.
type ruleSet struct {
	exact map[string]*entry
	// prefix is keyed by the prefix without "*"; prefixLens lists the
	// distinct key lengths, longest first, so the longest prefix of a path
	// is a few map lookups.
	prefix     map[string]*entry
	prefixLens []int
	// segs groups the segment patterns by their text before the first '+'
	// (every match starts with it); segLens lists those lengths.
	segs    map[string][]*entry
	segLens []int
	segKeys map[string]*entry
}

// newRuleSet returns an empty set. Its maps are made on first use: a
// minion's templated rules usually fill one or two of them, and a fleet
// holds one set per minion.
func newRuleSet() *ruleSet { return &ruleSet{} }

func (s *ruleSet) empty() bool {
	return len(s.exact) == 0 && len(s.prefix) == 0 && len(s.segKeys) == 0
}

// add stores one rule whose path is already stripped of its leading "/"
// and classified. Same store and same key: Vault's merge, deny sticky.
func (s *ruleSet) add(k kind, path string, src Source, constrained, parameters bool) {
	var store map[string]*entry
	key := path
	switch k {
	case exactKind:
		if s.exact == nil {
			s.exact = map[string]*entry{}
		}
		store = s.exact
	case prefixKind:
		if s.prefix == nil {
			s.prefix = map[string]*entry{}
		}
		store = s.prefix
		key = strings.TrimSuffix(path, "*")
	case segmentKind:
		if s.segKeys == nil {
			s.segKeys, s.segs = map[string]*entry{}, map[string][]*entry{}
		}
		store = s.segKeys
	}
	if e, ok := store[key]; ok {
		switch {
		case e.caps&Deny != 0:
			src.Ignored = true
		case src.Caps&Deny != 0:
			e.caps = Deny
			e.constrained, e.parameters = false, false
		default:
			e.caps |= src.Caps
			e.constrained = e.constrained || constrained
			e.parameters = e.parameters || parameters
		}
		e.sources = append(e.sources, src)
		return
	}
	e := &entry{kind: k, key: key, caps: src.Caps, constrained: constrained && src.Caps&Deny == 0,
		parameters: parameters && src.Caps&Deny == 0, sources: []Source{src}}
	store[key] = e
	switch k {
	case prefixKind:
		e.firstWC, e.isPrefix, e.wcPath = len(key), true, key
		if !slices.Contains(s.prefixLens, len(key)) {
			s.prefixLens = append(s.prefixLens, len(key))
			slices.SortFunc(s.prefixLens, func(a, b int) int { return b - a })
		}
	case segmentKind:
		e.firstWC = strings.Index(key, "+")
		e.wcPath = key
		if strings.HasSuffix(key, "*") {
			e.isPrefix = true
			e.wcPath = key[:len(key)-1]
		}
		e.parts = strings.Split(e.wcPath, "/")
		for _, p := range e.parts {
			if p == "+" {
				e.wildcards++
			}
		}
		lit := key[:e.firstWC]
		s.segs[lit] = append(s.segs[lit], e)
		if !slices.Contains(s.segLens, len(lit)) {
			s.segLens = append(s.segLens, len(lit))
		}
	}
}

// longestPrefix is prefixRules.LongestPrefix: byte-wise, segment-blind,
// the empty key of path "*" included.
func (s *ruleSet) longestPrefix(path string) *entry {
	for _, l := range s.prefixLens {
		if l <= len(path) {
			if e, ok := s.prefix[path[:l]]; ok {
				return e
			}
		}
	}
	return nil
}

// best is CheckAllowedFromNonExactPaths: the highest-priority candidate
// among the longest prefix and every matching segment pattern. nParts is
// the number of "/"-separated parts of path.
func (s *ruleSet) best(path string, nParts int) *entry {
	best := s.longestPrefix(path)
	s.eachSegment(path, nParts, func(e *entry) {
		if best == nil || compare(e, best) > 0 {
			best = e
		}
	})
	return best
}

func (s *ruleSet) eachSegment(path string, nParts int, fn func(*entry)) {
	for _, l := range s.segLens {
		if l > len(path) {
			continue
		}
		for _, e := range s.segs[path[:l]] {
			if segMatch(e.parts, e.isPrefix, path, nParts) {
				fn(e)
			}
		}
	}
}

// segMatch is the segment loop of CheckAllowedFromNonExactPaths: "+"
// matches any one segment, an empty one included; the last part of a
// prefix pattern only has to start the path's segment and swallows the
// rest.
func segMatch(parts []string, isPrefix bool, path string, nParts int) bool {
	if nParts < len(parts) || (!isPrefix && nParts != len(parts)) {
		return false
	}
	rest := path
	for i, want := range parts {
		seg := rest
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			seg, rest = rest[:j], rest[j+1:]
		} else {
			rest = ""
		}
		switch {
		case want == "+", want == seg:
		case isPrefix && i == len(parts)-1 && strings.HasPrefix(seg, want):
		default:
			return false
		}
	}
	return true
}

// Priority rules of CheckAllowedFromNonExactPaths, in the order the less
// function applies them.
const (
	ruleNone = iota
	ruleFirstWildcard
	ruleNotPrefix
	ruleFewerWildcards
	ruleLonger
	ruleLexical
)

var ruleText = [...]string{
	ruleNone:           "",
	ruleFirstWildcard:  "rule 1: its first wildcard or glob comes later",
	ruleNotPrefix:      "rule 2: it is not a prefix (trailing *) pattern",
	ruleFewerWildcards: "rule 3: it has fewer + segments",
	ruleLonger:         "rule 4: it is longer",
	ruleLexical:        "rule 5: it is greater in byte order",
}

// compare ranks two non-exact candidates: > 0 when a has the higher
// priority.
func compare(a, b *entry) int {
	c, _ := compareRule(a, b)
	return c
}

// compareRule also says which rule separated them.
func compareRule(a, b *entry) (int, int) {
	switch {
	case a.firstWC != b.firstWC:
		return sign(a.firstWC - b.firstWC), ruleFirstWildcard
	case a.isPrefix != b.isPrefix:
		if a.isPrefix {
			return -1, ruleNotPrefix
		}
		return 1, ruleNotPrefix
	case a.wildcards != b.wildcards:
		return sign(b.wildcards - a.wildcards), ruleFewerWildcards
	case len(a.wcPath) != len(b.wcPath):
		return sign(len(a.wcPath) - len(b.wcPath)), ruleLonger
	}
	return strings.Compare(a.wcPath, b.wcPath), ruleLexical
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
