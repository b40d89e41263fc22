package policy

import (
	"hash/fnv"
	"time"

	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// scanRequest is what decides whether a template's full scan is due.
type scanRequest struct {
	compiled *render.Compiled
	identity string // the connection's Vault identity ("" unknown)
	vaultKey string // see Reconciler.templateVault
	asked    string // the template's reconcile request annotation
	handled  string // the request its status says was handled
	interval time.Duration
}

// scanKind is the full scan a template's reconcile makes.
type scanKind int

const (
	noScan scanKind = iota
	// renderScan: the template changed, or once per interval. Every
	// binding is rendered again; only the names whose wanted state is not
	// what Vault was confirmed to hold are synced (each name's comparison
	// with Vault comes in its slot, verifyDue).
	renderScan
	// verifyScan: after a start, a new Vault, or a reconcile request.
	// Every name is compared with Vault (after a start, unless status
	// lets the index presume them, presume).
	verifyScan
)

// scanDue records the template's Vault and says which full scan is due,
// why (log values), and the key of what was known of a Vault that is no
// longer the template's ("" if none).
func (tp *templatePolicies) scanDue(rq scanRequest, now time.Time) (scan scanKind, why []any, forget string) {
	if tp.identity != rq.identity {
		// Another Vault, or the same one re-initialised or restored: what
		// was found there is no longer known.
		forget, tp.discovered = tp.vaultKey, false
	}
	// The key also changes when the connection's cluster becomes known:
	// the same Vault, nothing to discover again.
	tp.identity, tp.vaultKey = rq.identity, rq.vaultKey
	// A request's compare begins once: the passes after it retry what it
	// left dirty, and the status that reports it handled may not be in
	// the cache yet when the next reconcile (a status refresh) reads it.
	requested := rq.asked != "" && rq.asked != rq.handled && rq.asked != tp.compared
	why = []any{"vault", rq.vaultKey, "built", tp.built, "discovered", tp.discovered, "compiledChanged", tp.compiled != rq.compiled, "requested", requested}
	if requested {
		// Vault's policies are listed again, for any with the template's
		// header that the index does not know of (written by hand, or
		// restored from a snapshot): the template owns them too.
		tp.discovered = false
	}
	switch {
	case !tp.built || !tp.discovered || requested:
		scan = verifyScan
	case tp.compiled != rq.compiled || now.Sub(tp.lastScan) >= rq.interval-rq.interval/10:
		scan = renderScan
	}
	return scan, why, forget
}

// untilScan is the time left until the template's next full scan.
func (tp *templatePolicies) untilScan(interval time.Duration, now time.Time) time.Duration {
	return interval - now.Sub(tp.lastScan)
}

// A template's policies are compared with Vault once per interval each,
// spread over it: the names are cut into verifySlots slots by a hash of
// the name, and every interval/verifySlots the next slot's names are
// marked dirty and read. A template with a policy per minion thus costs
// Vault a steady trickle (10,000 policies, one hour: 167 reads a minute),
// not 10,000 reads at once every hour; and a new operator process that
// status lets presume the policies (presume) continues the trickle
// instead of reading every policy at its start.

// verifySlots is how many slots an interval is cut into (slotsOf).
const verifySlots = 60

// slotOf is the slot of slots a policy name is compared with Vault in.
func slotOf(name string, slots int64) int64 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int64(h.Sum32()) % slots
}

// slotsOf cuts an interval into slots: verifySlots of them, each at least
// a second long (an interval under a minute has fewer).
func slotsOf(interval time.Duration) (length time.Duration, slots int64) {
	length = max(interval/verifySlots, time.Second)
	return length, max(int64(interval/length), 1)
}

// verifyDue marks dirty the template's names whose slot came since the
// last call (at most one interval's worth), and returns how many. The
// first call only starts the clock: a full comparison (the first scan)
// or a presumption covers the time before.
func (tp *templatePolicies) verifyDue(now time.Time, interval time.Duration) int {
	slotLen, slots := slotsOf(interval)
	tick := now.UnixNano() / int64(slotLen)
	if tp.verifiedTick == 0 || tp.slotLen != slotLen {
		tp.verifiedTick, tp.slotLen = tick, slotLen
		return 0
	}
	due := map[int64]bool{}
	for t := tp.verifiedTick + 1; t <= tick && int64(len(due)) < slots; t++ {
		due[t%slots] = true
	}
	tp.verifiedTick = tick
	if len(due) == 0 {
		return 0
	}
	marked := 0
	mark := func(name string) {
		if !tp.dirty[name] && due[slotOf(name, slots)] {
			tp.dirty[name] = true
			marked++
		}
	}
	for name := range tp.refs {
		mark(name)
	}
	for name := range tp.owned {
		mark(name)
	}
	return marked
}

// untilSlot is the time until the template's next slot is due (0: the
// template has no policy to compare, or its clock has not started).
func (tp *templatePolicies) untilSlot(now time.Time) time.Duration {
	if tp.verifiedTick == 0 || len(tp.refs)+len(tp.owned) == 0 {
		return 0
	}
	next := time.Unix(0, (tp.verifiedTick+1)*int64(tp.slotLen))
	return max(next.Sub(now), time.Millisecond)
}

// notOwnedFirst is the first wait before names found someone else's are
// looked at again.
const notOwnedFirst = 5 * time.Second

// recheckNotOwned marks the names found someone else's dirty again when
// their wait is over (untilRecheck): their owner (another template,
// another cluster, an administrator) may have deleted them since, and
// nothing else would tell.
func (tp *templatePolicies) recheckNotOwned(now time.Time) {
	if len(tp.notOwned) == 0 || now.Sub(tp.notOwnedSeen) < tp.notOwnedWait {
		return
	}
	for n := range tp.notOwned {
		tp.dirty[n] = true
	}
}

// untilRecheck is the time until names found someone else's are looked at
// again (0: there are none).
func (tp *templatePolicies) untilRecheck(now time.Time) time.Duration {
	if len(tp.notOwned) == 0 {
		return 0
	}
	return max(tp.notOwnedWait-now.Sub(tp.notOwnedSeen), time.Second)
}
