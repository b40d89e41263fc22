package policy

import (
	"maps"
	"slices"
	"time"

	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
)

// policyWork is what one sync claimed: names to bring to a body, and
// names no binding wants (deleted when the template owns them).
type policyWork struct {
	desired map[string]string
	stale   []string
}

func (w policyWork) empty() bool { return len(w.desired) == 0 && len(w.stale) == 0 }

func (w policyWork) names() []string {
	return append(slices.Collect(maps.Keys(w.desired)), w.stale...)
}

// inOrder is the order a sync reads and plans the names in: the wanted in
// name order, then the stale ones that are not also wanted (a name is
// planned once).
func (w policyWork) inOrder() []string {
	names := slices.Sorted(maps.Keys(w.desired))
	for _, n := range w.stale {
		if _, ok := w.desired[n]; !ok {
			names = append(names, n)
		}
	}
	return names
}

// claim takes the template's dirty names that no other sync holds. They
// stay dirty until settle confirms them, so a claim that fails leaves them
// for the next one.
func (idx *policyIndex) claim(template string) policyWork {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templates[template]
	if tp == nil {
		return policyWork{}
	}
	w := policyWork{desired: map[string]string{}}
	for name := range tp.dirty {
		if tp.inFlight[name] {
			continue
		}
		tp.inFlight[name] = true
		if ref := tp.refs[name]; ref != nil {
			if body, ok, _ := ref.desired(); ok {
				w.desired[name] = body
				continue
			}
		}
		w.stale = append(w.stale, name)
	}
	slices.Sort(w.stale)
	return w
}

// settle records what a sync of claimed work found and did in Vault, and
// releases the claim. A name stays dirty unless Vault was seen in the state
// the index wants now: a failed name (no outcome) is retried by the next
// sync, and so is one whose wanted body changed while it was in flight.
func (idx *policyIndex) settle(template string, w policyWork, pass policyPass) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templateLocked(template)
	// The notOwned mark first: own and disown recount the name.
	for _, n := range pass.owned {
		delete(tp.notOwned, n)
		tp.own(n, w.desired[n])
	}
	for _, n := range slices.Concat(pass.deleted, pass.absent) {
		delete(tp.notOwned, n)
		tp.disown(n)
	}
	for _, n := range pass.notOwned {
		tp.notOwned[n] = true
		tp.disown(n)
	}
	switch {
	case len(pass.notOwned) > 0:
		tp.notOwnedSeen = time.Now()
		tp.notOwnedWait = min(max(2*tp.notOwnedWait, notOwnedFirst), outcome.WaitAfter)
	case len(tp.notOwned) == 0:
		tp.notOwnedWait = 0
	}
	tp.unreported.written = appendCounted(tp.unreported.written, pass.written)
	tp.unreported.deleted = appendCounted(tp.unreported.deleted, pass.deleted)
	for _, n := range w.names() {
		delete(tp.inFlight, n)
	}
	for _, n := range slices.Concat(pass.owned, pass.deleted, pass.absent, pass.notOwned) {
		if tp.confirmedLocked(n) {
			delete(tp.dirty, n)
		}
	}
}

// confirmedLocked: Vault was seen as the index wants the name now (or
// someone else's policy is there, which the status reports).
func (tp *templatePolicies) confirmedLocked(name string) bool {
	body, wanted := "", false
	if ref := tp.refs[name]; ref != nil {
		body, wanted, _ = ref.desired()
	}
	got, owned := tp.owned[name]
	switch {
	case wanted && tp.notOwned[name]:
		return true
	case wanted:
		return owned && got == body
	}
	return !owned
}
