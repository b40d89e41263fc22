package audit

import (
	"errors"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// The audit reports, computed from a fleet: pure functions, table-tested.

// WhoCanReport is the output of audit who-can.
type WhoCanReport struct {
	Path string `json:"path"`
	// Logical and Operation are set for a KV query (--kv-op): the secret
	// path as the pillar names it and the operation asked about.
	Logical    string         `json:"logicalPath,omitempty"`
	Operation  string         `json:"operation,omitempty"`
	Capability string         `json:"capability,omitempty"`
	Count      WhoCanCount    `json:"count"`
	Minions    []MinionAccess `json:"minions"`
	Warnings   []string       `json:"warnings,omitempty"`
	// Vault names the Vault version whose rules answered (every report
	// has it).
	Vault VaultRules `json:"vault"`
}

// WhoCanCount is the count line: how many minions match of how many.
// Matching counts only the minions Vault would grant: not those whose
// every request fails (a disabled entity, a templated rule that renders an
// invalid pattern) nor those whose login Vault refuses ("root" among the
// role's policies); those are NoToken, listed with the reason.
type WhoCanCount struct {
	Matching int `json:"matching"`
	Minions  int `json:"minions"`
	NoToken  int `json:"noToken,omitempty"`
}

// MinionAccess is one minion's answer on a path, and why.
type MinionAccess struct {
	Path         string   `json:"path,omitempty"`
	Minion       string   `json:"minion"`
	Role         string   `json:"role"`
	Binding      string   `json:"binding,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	Error        string   `json:"error,omitempty"`
	Policies     []string `json:"policies,omitempty"`
	Pattern      string   `json:"pattern,omitempty"`
	Step         string   `json:"step,omitempty"`
	Rule         string   `json:"rule,omitempty"`
	Over         []string `json:"over,omitempty"`
	Caveats      []string `json:"caveats,omitempty"`
	// NotGranted says why a minion listed by who-can is not counted:
	// Vault refuses its login, or answers every request with an error.
	NotGranted string `json:"notGranted,omitempty"`
}

// Why a minion gets nothing whatever its rules say.
const (
	rootRefused = "Vault refuses the login: \"root\" is among the role's policies (no auth method may issue a root token)"
	allFail     = "Vault answers every request of its token with an error"
)

// notGranted is why Vault would grant nothing on d ("" when it answers).
func notGranted(d acl.Decision) string {
	switch {
	case d.Root:
		return rootRefused
	case d.Err != nil:
		return allFail + ": " + d.Err.Error()
	}
	return ""
}

// QueryPath checks a path asked about (who-can, what-can, diff --path):
// not empty, and without "*" or "+" unless literal, since Vault's
// sys/capabilities takes them as literal characters and the question
// almost always meant a pattern. A pattern goes to audit check, which
// expands it.
func QueryPath(p string, literal bool) error {
	switch {
	case strings.TrimSpace(strings.TrimLeft(p, "/")) == "":
		return fmt.Errorf("path %q names no Vault path", p)
	case !literal && acl.IsPattern(p):
		return fmt.Errorf("path %q holds %q or %q, which Vault's sys/capabilities takes as literal characters: "+
			"for every path a pattern covers, use audit check (its rules' paths are Vault patterns); to ask about the literal path, add --literal", p, "*", "+")
	}
	return nil
}

func access(m *Minion, p string) MinionAccess {
	x := m.prep.Explain(p)
	a := MinionAccess{Minion: m.id, Role: m.role, Binding: m.binding, Capabilities: x.Capabilities, Error: x.Error,
		Policies: x.Policies, Pattern: x.Pattern, Step: x.Step, Rule: x.Rule, Caveats: x.Caveats}
	for _, o := range x.Over {
		a.Over = append(a.Over, fmt.Sprintf("%s (%s: %s)", o.Pattern, strings.Join(o.Capabilities, ","), o.Why))
	}
	return a
}

// WhoCanQuery is what who-can asks: a path, and what counts as access.
type WhoCanQuery struct {
	Path string
	// Logical and Operation name a KV query for the report: the secret
	// path as the pillar names it and the operation asked about.
	Logical, Operation string
	// Want is the capability asked for (0: any); KV, when set, decides
	// instead (a KV operation).
	Want acl.Caps
	KV   *acl.KVRequest
	// All lists the minions without access too.
	All bool
}

// matches is whether Vault grants what q asks on d: a minion whose
// requests all fail, or whose login Vault refuses, is granted nothing.
func (q WhoCanQuery) matches(d acl.Decision) bool {
	switch {
	case d.Err != nil, d.Root:
		return false
	case q.KV != nil:
		return q.KV.Allowed(d.Caps)
	case q.Want != 0:
		return d.Caps.Allows(q.Want)
	}
	return d.Caps.Granted() != 0
}

// WhoCan answers for every minion: those the query matches, and those
// Vault grants nothing at all (listed with why, not counted); with all,
// the others too.
func WhoCan(f *Fleet, q WhoCanQuery) WhoCanReport {
	p, all := q.Path, q.All
	r := WhoCanReport{Path: p, Logical: q.Logical, Operation: q.Operation, Minions: []MinionAccess{}, Warnings: f.warnings, Vault: f.Rules()}
	switch {
	case q.KV != nil:
		r.Capability = strings.Join(q.KV.Need.Names(), " or ")
		if !q.KV.Any {
			r.Capability = strings.Join(q.KV.Need.Names(), ",")
		}
	case q.Want != 0:
		r.Capability = strings.Join(q.Want.Names(), ",")
	}
	r.Count.Minions = len(f.minions)
	for _, m := range f.minions {
		d := m.prep.Check(p)
		match := q.matches(d)
		no := notGranted(d)
		switch {
		case match:
			r.Count.Matching++
		case no != "":
			r.Count.NoToken++
		}
		if match || no != "" || all {
			a := access(m, p)
			a.NotGranted = no
			r.Minions = append(r.Minions, a)
		}
	}
	return r
}

// WhatCanReport is the output of audit what-can.
type WhatCanReport struct {
	Minion   string            `json:"minion"`
	Role     string            `json:"role"`
	Binding  string            `json:"binding,omitempty"`
	Policies []string          `json:"policies"`
	Missing  []string          `json:"missingPolicies,omitempty"`
	Error    string            `json:"error,omitempty"`
	Paths    map[string]any    `json:"paths,omitempty"`
	Explain  []MinionAccess    `json:"explanations,omitempty"`
	Patterns []acl.PatternView `json:"patterns"`
	Dropped  []acl.Dropped     `json:"droppedRules,omitempty"`
	Rendered []acl.Rendered    `json:"renderedRules,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
	Vault    VaultRules        `json:"vault"`
}

// WhatCan is a minion's policies, its patterns after templating (with the
// rules dropped for it and why), and its capabilities on paths, explained.
func WhatCan(f *Fleet, m *Minion, paths []string) WhatCanReport {
	r := WhatCanReport{Minion: m.id, Role: m.role, Binding: m.binding, Policies: m.prep.Names(), Missing: m.prep.Missing(),
		Patterns: m.prep.Patterns(), Dropped: m.prep.Dropped(), Rendered: m.prep.Rendered(), Warnings: f.warnings, Vault: f.Rules()}
	if r.Patterns == nil {
		r.Patterns = []acl.PatternView{}
	}
	if err := m.prep.Err(); err != nil {
		r.Error = err.Error()
	}
	if len(paths) > 0 {
		r.Paths = map[string]any{}
		for _, p := range paths {
			d := m.prep.Check(p)
			if d.Err != nil {
				r.Paths[p] = map[string]string{"error": d.Err.Error()}
			} else {
				r.Paths[p] = d.Capabilities()
			}
			x := access(m, p)
			x.Path = p
			r.Explain = append(r.Explain, x)
		}
	}
	return r
}

// DiffReport is the output of audit diff.
type DiffReport struct {
	Summary DiffSummary `json:"summary"`
	// Refused are the head's bindings the operator would refuse or leave
	// waiting: the change fails the gate, whatever access it changes,
	// unless the base already left the binding out (OnBase: not this
	// change's doing, said but not failed on).
	Refused  []LeftOut    `json:"refused,omitempty"`
	Minions  []MinionDiff `json:"minions"`
	Warnings []string     `json:"warnings,omitempty"`
	Vault    VaultRules   `json:"vault"`
}

// DiffSummary counts the minions that gain and lose access, and the
// head's bindings left out.
type DiffSummary struct {
	Minions int `json:"minions"`
	Gaining int `json:"gaining"`
	Losing  int `json:"losing"`
	Paths   int `json:"paths"`
	// Refused and Waiting count the head's bindings the operator would
	// refuse (Stalled) or leave waiting, of those the base did not leave
	// out already; AlreadyLeftOut counts those it did.
	Refused        int `json:"refused"`
	Waiting        int `json:"waiting,omitempty"`
	AlreadyLeftOut int `json:"alreadyLeftOut,omitempty"`
}

// Fails is the gate: a minion gains access, or the change makes the
// operator refuse a binding or leave it waiting (a change it would
// reject). A binding the base already left out does not fail it: an
// unrelated pull request is not blocked by what main already holds (the
// operator's own status and alerts say that).
func (r DiffReport) Fails() bool {
	return r.Summary.Gaining > 0 || r.Summary.Refused > 0 || r.Summary.Waiting > 0
}

// MinionDiff is one minion's changes.
type MinionDiff struct {
	Minion string `json:"minion"`
	Role   string `json:"role"`
	// Roles are the minion's Salt roles (the entity metadata "roles"),
	// for grouping the changes by role.
	Roles []string `json:"roles,omitempty"`
	// Status is added, removed, refused or waiting (the head leaves its
	// binding out), and Why says why for the last two.
	Status  string       `json:"status,omitempty"`
	Why     string       `json:"why,omitempty"`
	Changes []PathChange `json:"changes"`
}

// PathChange is one path whose answer changes.
type PathChange struct {
	Path   string   `json:"path"`
	Base   []string `json:"base"`
	Head   []string `json:"head"`
	Gained []string `json:"gained,omitempty"`
	Lost   []string `json:"lost,omitempty"`
	Why    string   `json:"why,omitempty"`
}

// probes are the concrete paths a pattern names: itself without its
// trailing "*", "+" segments filled in, and with a trailing "/" the same
// path as a list.
func probes(pattern string) []string {
	p := strings.TrimLeft(pattern, "/")
	if strings.Contains(p, "{{") {
		return nil
	}
	glob := strings.HasSuffix(p, "*")
	p = strings.TrimSuffix(p, "*")
	if strings.Contains(p, "+") {
		parts := strings.Split(p, "/")
		for i, s := range parts {
			if s == "+" {
				parts[i] = "_"
			}
		}
		p = strings.Join(parts, "/")
	}
	out := make([]string, 0, 2)
	if p != "" {
		out = append(out, p)
	}
	if glob {
		out = append(out, p+"_")
	}
	return out
}

// fleetProbes are the paths every policy of the fleet names.
func fleetProbes(f *Fleet, set map[string]bool) {
	for _, pol := range f.ev.Policies() {
		for _, r := range pol.Rules {
			for _, p := range probes(r.Pattern) {
				set[p] = true
			}
		}
	}
}

// Paths are the concrete paths the fleet's policies name and its
// minions' templated rules render, sorted: the paths a rule's "*" covers
// in Check.
func (f *Fleet) Paths() []string {
	set := map[string]bool{}
	fleetProbes(f, set)
	for _, m := range f.minions {
		minionProbes(m, set)
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// minionProbes are the paths of a minion's templated rules.
func minionProbes(m *Minion, set map[string]bool) {
	if m != nil {
		preparedProbes(m.prep, set)
	}
}

// preparedProbes are the paths of a prepared minion's templated rules.
func preparedProbes(p *acl.Prepared, set map[string]bool) {
	if p == nil {
		return
	}
	for _, r := range p.Rendered() {
		for _, q := range probes(r.Path) {
			set[q] = true
		}
	}
}

// prepared is the minion's prepared rules: those loadFleet kept, or made
// now (audit diff keeps none: each minion is prepared while it is
// compared, and let go). nil for a minion not in the fleet.
func (f *Fleet) prepared(m *Minion) *acl.Prepared {
	switch {
	case m == nil:
		return nil
	case m.prep != nil:
		return m.prep
	case m.unprepared != nil:
		return f.ev.Prepare(m.unprepared.subject(m.role))
	}
	return f.ev.Prepare(m.subject)
}

// preparedPair is the prepared rules of one minion on both sides; when the
// sides share its rendered parts, its subject is made once for both.
func preparedPair(base, head *Fleet, bm, hm *Minion) (bp, hp *acl.Prepared) {
	if bm != nil && hm != nil && bm.unprepared != nil && bm.unprepared == hm.unprepared && bm.role == hm.role {
		s := bm.unprepared.subject(bm.role)
		return base.ev.Prepare(s), head.ev.Prepare(s)
	}
	return base.prepared(bm), head.prepared(hm)
}

type answer struct {
	caps acl.Caps
	err  error
}

func answerOf(p *acl.Prepared, path string) answer {
	if p == nil {
		return answer{}
	}
	d := p.Check(path)
	if d.Root {
		return answer{caps: ^acl.Deny}
	}
	return answer{caps: d.Caps.Granted(), err: d.Err}
}

func (a answer) names(in *interned) []string {
	if a.err != nil {
		return []string{"error: " + a.err.Error()}
	}
	return in.names(a.caps)
}

// interned shares the strings a diff repeats for thousands of minions (the
// capability lists, the reasons of a common path) within one worker: the
// report holds one copy of each. Nothing changes them once made.
type interned struct {
	caps map[acl.Caps][]string
	text map[string]string
}

func newInterned() *interned {
	return &interned{caps: map[acl.Caps][]string{}, text: map[string]string{}}
}

func (in *interned) names(c acl.Caps) []string {
	n, ok := in.caps[c]
	if !ok {
		n = c.Names()
		in.caps[c] = n
	}
	return n
}

func (in *interned) string(s string) string {
	if v, ok := in.text[s]; ok {
		return v
	}
	in.text[s] = s
	return s
}

// Diff compares every minion of both fleets, paired by minion ID, on the
// paths their policies name plus extra.
func Diff(base, head *Fleet, extra []string) DiffReport {
	return diffFleetsWith(base, head, extra, runtime.GOMAXPROCS(0))
}

// diffFleetsWith is Diff with up to workers goroutines.
func diffFleetsWith(base, head *Fleet, extra []string, workers int) DiffReport {
	r := DiffReport{Minions: []MinionDiff{}, Vault: head.Rules()}
	// The head's bindings left out are said up front (Refused), not
	// again among the warnings.
	said := map[string]bool{}
	baseLeft := map[string]bool{}
	for _, l := range base.leftOut {
		baseLeft[l.Binding] = true
	}
	headLeft := map[string]LeftOut{}
	for _, l := range head.leftOut {
		said[l.warning] = true
		l.OnBase = baseLeft[l.Binding]
		r.Refused = append(r.Refused, l)
		switch {
		case l.OnBase:
			r.Summary.AlreadyLeftOut++
		case l.Kind == Refused:
			r.Summary.Refused++
		default:
			r.Summary.Waiting++
		}
		if _, ok := headLeft[strings.ToLower(l.Minion)]; !ok {
			headLeft[strings.ToLower(l.Minion)] = l
		}
	}
	slices.SortStableFunc(r.Refused, func(a, b LeftOut) int { return strings.Compare(a.Binding, b.Binding) })
	for _, w := range head.warnings {
		if !said[w] {
			r.Warnings = append(r.Warnings, "head: "+w)
		}
	}
	common := map[string]bool{}
	fleetProbes(base, common)
	fleetProbes(head, common)
	for _, p := range extra {
		common[p] = true
	}
	ids := map[string]bool{}
	for _, m := range base.minions {
		ids[strings.ToLower(m.id)] = true
	}
	for _, m := range head.minions {
		ids[strings.ToLower(m.id)] = true
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	slices.Sort(sorted)
	r.Summary.Minions = len(sorted)
	commonList := make([]string, 0, len(common))
	for p := range common {
		commonList = append(commonList, p)
	}
	slices.Sort(commonList)
	// The minions are compared in chunks side by side (each minion is
	// independent), then put together in order.
	type chunk struct {
		diffs           []MinionDiff
		gaining, losing int
		extras          map[string]bool
	}
	workers = max(1, min(workers, len(sorted)/256))
	chunks := make([]chunk, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(sorted)/workers, (w+1)*len(sorted)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &chunks[w]
			c.extras = map[string]bool{}
			in := newInterned()
			for _, id := range sorted[lo:hi] {
				bm, hm := base.byID[id], head.byID[id]
				bp, hp := preparedPair(base, head, bm, hm)
				md, gaining, losing := diffMinion(bm, hm, bp, hp, common, commonList, c.extras, in)
				if hm == nil {
					if l, ok := headLeft[id]; ok {
						md.Status, md.Why = l.Kind, in.string(l.Reason+": "+l.Message)
						for i := range md.Changes {
							md.Changes[i].Why = md.Why
						}
					}
				}
				if gaining {
					c.gaining++
				}
				if losing {
					c.losing++
				}
				if len(md.Changes) > 0 || md.Status != "" {
					c.diffs = append(c.diffs, md)
				}
			}
		}()
	}
	wg.Wait()
	extraSeen := map[string]bool{}
	for _, c := range chunks {
		r.Minions = append(r.Minions, c.diffs...)
		r.Summary.Gaining += c.gaining
		r.Summary.Losing += c.losing
		for p := range c.extras {
			extraSeen[p] = true
		}
	}
	r.Summary.Paths = len(commonList) + len(extraSeen)
	return r
}

// diffMinion compares one minion (nil on the side it is missing from),
// prepared as bp and hp, on the common paths and its own templated ones,
// which it adds to extraSeen.
func diffMinion(bm, hm *Minion, bp, hp *acl.Prepared, common map[string]bool, commonList []string, extraSeen map[string]bool, in *interned) (md MinionDiff, gaining, losing bool) {
	md = MinionDiff{Changes: []PathChange{}}
	switch {
	case bm == nil:
		md.Minion, md.Role, md.Roles, md.Status, md.Why = hm.id, hm.role, hm.roles(), "added", "a new binding"
	case hm == nil:
		md.Minion, md.Role, md.Roles, md.Status, md.Why = bm.id, bm.role, bm.roles(), "removed", "its binding is removed"
	default:
		md.Minion, md.Role, md.Roles = hm.id, hm.role, hm.roles()
	}
	// The minion's own templated paths, beyond those all share.
	own := map[string]bool{}
	preparedProbes(bp, own)
	preparedProbes(hp, own)
	var extras []string
	for p := range own {
		if !common[p] {
			extras = append(extras, p)
			extraSeen[p] = true
		}
	}
	compare := func(p string) {
		a, b := answerOf(bp, p), answerOf(hp, p)
		if a.caps == b.caps && (a.err == nil) == (b.err == nil) {
			return
		}
		c := PathChange{Path: p, Base: a.names(in), Head: b.names(in)}
		if g := b.caps &^ a.caps; g != 0 && b.err == nil {
			c.Gained = in.names(g)
			gaining = true
		}
		if l := a.caps &^ b.caps; l != 0 && a.err == nil {
			c.Lost = in.names(l)
			losing = true
		}
		if b.err != nil && a.err == nil && a.caps != 0 {
			// Every request of the minion fails now: it loses all.
			c.Lost = in.names(a.caps)
			losing = true
		}
		// Why: the rule that decides on the head, for a gain (a new
		// binding's too: which of its rules grants it) and for a loss to a
		// deny or a narrower rule; for a loss to nothing, the base's rule
		// that granted it; the reason when the minion has no head (removed,
		// refused) or every request of it fails.
		switch {
		case hp == nil || (md.Status != "" && md.Status != "added"):
			c.Why = in.string(md.Why)
		case b.err != nil:
			c.Why = in.string(allFail + ": " + b.err.Error())
		case len(c.Gained) > 0:
			c.Why = in.string(decided(hp.Check(p)))
		default:
			if d := hp.Check(p); d.Pattern() != "" {
				c.Why = in.string(decided(d))
			} else if bp != nil {
				c.Why = in.string("no rule on the head; the base had " + decided(bp.Check(p)))
			}
		}
		md.Changes = append(md.Changes, c)
	}
	for _, p := range commonList {
		compare(p)
	}
	for _, p := range extras {
		compare(p)
	}
	if len(extras) > 0 {
		slices.SortFunc(md.Changes, func(x, y PathChange) int { return strings.Compare(x.Path, y.Path) })
	}
	return md, gaining, losing
}

// decided is a decision's deciding rule, in a few words: policies,
// pattern and step.
func decided(d acl.Decision) string {
	return strings.TrimSpace(strings.Join(d.Policies(), ",") + " " + d.Pattern() + " (" + d.Step.String() + ")")
}

// Rules is the file of audit check: invariants over the fleet.
type Rules struct {
	Rules []Rule `json:"rules"`
}

// Rule says who may hold a capability on some paths. A path ending in
// "*" covers the paths the policies name under it, plus one probe.
type Rule struct {
	Name       string   `json:"name"`
	Paths      []string `json:"paths"`
	Capability string   `json:"capability"`
	// Allow is who may; nobody when empty.
	Allow Allow `json:"allow"`
}

// Allow selects minions: by minion ID glob, or by role (the entity
// metadata "roles").
type Allow struct {
	Minions []string `json:"minions,omitempty"`
	Roles   []string `json:"roles,omitempty"`
}

// CheckReport is the output of audit check.
type CheckReport struct {
	Rules      int         `json:"rules"`
	Violations []Violation `json:"violations"`
	Warnings   []string    `json:"warnings,omitempty"`
	Vault      VaultRules  `json:"vault"`
}

// Violation is one minion holding what a rule forbids.
type Violation struct {
	Rule         string   `json:"rule"`
	Minion       string   `json:"minion"`
	Path         string   `json:"path"`
	Capabilities []string `json:"capabilities"`
	Policies     []string `json:"policies,omitempty"`
	Pattern      string   `json:"pattern,omitempty"`
}

func (a Allow) allows(m *Minion) bool {
	for _, g := range a.Minions {
		if ok, _ := path.Match(g, m.id); ok {
			return true
		}
	}
	for _, r := range m.roles() {
		if slices.Contains(a.Roles, r) {
			return true
		}
	}
	return false
}

// Check reports every minion that holds what a rule forbids, on every
// path it holds it (not only the first: a reviewer fixes them all); err
// is a rule that says nothing valid, or no rule at all (a gate must not
// pass on nothing).
func Check(f *Fleet, rules Rules) (CheckReport, error) {
	r := CheckReport{Rules: len(rules.Rules), Violations: []Violation{}, Warnings: f.warnings, Vault: f.Rules()}
	if len(rules.Rules) == 0 {
		return r, errors.New("no rules: nothing to check")
	}
	named := f.Paths()
	for i, rule := range rules.Rules {
		if rule.Name == "" {
			rule.Name = fmt.Sprintf("rule %d", i+1)
		}
		want, ok := acl.ParseCap(rule.Capability)
		if !ok || want == acl.Deny {
			return r, fmt.Errorf("%s: unknown capability %q", rule.Name, rule.Capability)
		}
		if len(rule.Paths) == 0 {
			return r, fmt.Errorf("%s: no paths", rule.Name)
		}
		var paths []string
		for _, p := range rule.Paths {
			covered, err := rulePaths(p, named)
			if err != nil {
				return r, fmt.Errorf("%s: %w", rule.Name, err)
			}
			paths = append(paths, covered...)
		}
		slices.Sort(paths)
		paths = slices.Compact(paths)
		for _, m := range f.minions {
			if rule.Allow.allows(m) {
				continue
			}
			for _, p := range paths {
				d := m.prep.Check(p)
				if d.Root || d.Caps.Allows(want) {
					r.Violations = append(r.Violations, Violation{Rule: rule.Name, Minion: m.id, Path: p,
						Capabilities: d.Capabilities(), Policies: d.Policies(), Pattern: d.Pattern()})
				}
			}
		}
	}
	return r, nil
}

// rulePaths are the concrete paths a rule's path covers: itself when it
// is a plain path; for a Vault pattern (a trailing "*", "+" segments) the
// paths the fleet's policies name that it matches, plus one probe made of
// it ("+" and "*" as "_"), so that a rule broader than any named path is
// still tried. A "*" or "+" that Vault would take literally is an error:
// silently checking a path nobody has would report no violation.
func rulePaths(p string, named []string) ([]string, error) {
	if strings.TrimSpace(strings.TrimLeft(p, "/")) == "" {
		return nil, fmt.Errorf("path %q names no Vault path", p)
	}
	if !acl.IsPattern(p) {
		return []string{p}, nil
	}
	if _, err := acl.MatchPattern(p, ""); err != nil {
		return nil, fmt.Errorf("path %q: %w", p, err)
	}
	parts := strings.Split(strings.TrimSuffix(strings.TrimLeft(p, "/"), "*"), "/")
	for i, s := range parts {
		if s == "+" {
			parts[i] = "_"
		}
	}
	probe := strings.Join(parts, "/")
	if strings.HasSuffix(p, "*") {
		probe += "_"
	}
	out := []string{probe}
	for _, n := range named {
		if ok, _ := acl.MatchPattern(p, n); ok {
			out = append(out, n)
		}
	}
	return out, nil
}
