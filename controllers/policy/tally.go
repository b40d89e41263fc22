package policy

import (
	"maps"
	"slices"

	"github.com/minionvault/minion-vault-operator/internal/admission"
)

// nameTally is one policy name's part in the counts a template's status
// shows (templateSummary): wanted and not confirmed in Vault with its body
// (missing), owned and no longer wanted (stale), rendered with two bodies
// (conflict). A conflict is never missing (no body is wanted), and is
// stale too when the template owns the name.
type nameTally uint8

const (
	tallyMissing nameTally = 1 << iota
	tallyStale
	tallyConflict
)

// tallies are the names whose tally is not zero, and how many are
// missing and stale: kept current one name at a time (recount) as the
// index changes, so that the status of a template with a policy per
// minion (10,000 names) is derived from them, not from a walk of every
// name at each status refresh (once a second while bindings converge).
type tallies struct {
	of             map[string]nameTally
	missing, stale int
	// conflicts repeats the conflict flags of of: a refresh builds their
	// messages from it without walking of, which holds every name still
	// to write while a fleet converges.
	conflicts map[string]bool
}

// tallyOf is what the index says of name now.
func (tp *templatePolicies) tallyOf(name string) nameTally {
	body, wanted, conflict := "", false, false
	if ref := tp.refs[name]; ref != nil {
		body, wanted, conflict = ref.desired()
	}
	got, owned := tp.owned[name]
	var t nameTally
	if wanted && !tp.notOwned[name] && (!owned || got != body) {
		t |= tallyMissing
	}
	if owned && !wanted {
		t |= tallyStale
	}
	if conflict {
		t |= tallyConflict
	}
	return t
}

// recount brings name's tally to what the index says of it now; every
// change of a name's refs, owned body or notOwned mark is followed by one.
func (tp *templatePolicies) recount(name string) {
	ts := &tp.tallies
	before, after := ts.of[name], tp.tallyOf(name)
	if before == after {
		return
	}
	ts.add(name, before, -1)
	ts.add(name, after, +1)
	if after == 0 {
		delete(ts.of, name)
	} else {
		if ts.of == nil {
			ts.of = map[string]nameTally{}
		}
		ts.of[name] = after
	}
}

func (ts *tallies) add(name string, t nameTally, sign int) {
	if t&tallyMissing != 0 {
		ts.missing += sign
	}
	if t&tallyStale != 0 {
		ts.stale += sign
	}
	if t&tallyConflict != 0 {
		if sign > 0 {
			if ts.conflicts == nil {
				ts.conflicts = map[string]bool{}
			}
			ts.conflicts[name] = true
		} else {
			delete(ts.conflicts, name)
		}
	}
}

// retally counts every name again: after a full scan replaced the refs
// (a walk the scan makes anyway).
func (tp *templatePolicies) retally() {
	tp.tallies = tallies{}
	for name := range tp.refs {
		tp.recount(name)
	}
	for name := range tp.owned {
		if _, ok := tp.refs[name]; !ok {
			tp.recount(name)
		}
	}
}

// conflictMessages are the messages of the names rendered with two
// bodies, by name, each naming one binding per body.
func (tp *templatePolicies) conflictMessages() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(tp.tallies.conflicts)) {
		ref := tp.refs[name]
		var from []string
		for _, b := range slices.Sorted(maps.Keys(ref.bodies)) {
			from = append(from, ref.from[b].String())
		}
		out = append(out, admission.PolicyConflict(name, from...).Message)
	}
	return out
}
