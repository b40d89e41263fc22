package policy

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// policyIndex is the template controllers' memory of what every binding
// renders as ACL policies, so that a binding's change costs work in
// proportion to that binding, not to the fleet: per policy name a count of
// the bindings rendering each body, per binding the names it renders. It is
// built by a template's full scan (after a start, a template change, every
// interval) and kept current by binding deltas in between.
//
// Every method takes the index's own lock: callers hold none and touch no
// field. The methods of a template's part (templatePolicies) run under
// it, inside the index's own, so that a reconcile's pass takes the lock
// once to begin and once to end (begin, end). What the index believes is in Vault changes only in settle, from
// the outcome of a Vault read, write or delete that succeeded. A name whose
// wanted state is not confirmed in Vault is dirty until a sync confirms
// it, so a failed write is retried by the next sync of the template,
// whichever controller runs it, and the template is not Ready meanwhile.
type policyIndex struct {
	mu        sync.Mutex
	templates map[string]*templatePolicies
	bindings  map[types.NamespacedName]bindingPolicies
}

// bindingPolicies is what one binding contributes to the index.
type bindingPolicies struct {
	template string
	member   bool              // refers to the template and is not being deleted
	docs     map[string]string // policy name (lowercased, as Vault stores it) -> body
}

// templatePolicies is one template's part of the index.
type templatePolicies struct {
	// scanLock is held for writing by a full scan and for reading by deltas
	// and retries, so that no delta interleaves with a scan of the template.
	scanLock sync.RWMutex

	// Guarded by policyIndex.mu from here on.
	built      bool
	compiled   *render.Compiled // what the last scan rendered with
	lastScan   time.Time
	discovered bool   // Vault's policies were listed for this template since the start
	identity   string // the connection's Vault identity when they were
	vaultKey   string // where policyOwners keeps what is known of that Vault
	// compared is the last reconcile request whose full compare began: a
	// scan for it marked every name dirty after the request was seen, and
	// their reads ask Vault anew (readAgain). The request is handled once
	// no name is dirty any more (handledRequest).
	compared string
	members  int // bindings that refer to the template
	refs     map[string]*policyRef
	// owned are the policies in Vault with this template's header, each
	// with the body last confirmed there (unknownBody: found by a
	// discovery and not compared yet).
	owned    map[string]string
	notOwned map[string]bool // wanted, but someone else's
	// notOwnedSeen is when a sync last found a name someone else's, and
	// notOwnedWait how long after that recheckNotOwned looks again: from
	// notOwnedFirst, doubling up to waitAfter while they stay someone
	// else's (an owner that lets go, such as another cluster's template
	// after a handover, does so within seconds).
	notOwnedSeen time.Time
	notOwnedWait time.Duration
	// dirty names wait for a sync: their wanted state changed, or the
	// last attempt failed. inFlight names are claimed by a sync under way.
	dirty    map[string]bool
	inFlight map[string]bool
	digest   [16]byte // XOR of sha256(name)[:16] over owned
	// content is the XOR of sha256(name, body)[:16] over owned: what
	// status.policies.contentDigest shows, for a new process to presume.
	content [16]byte
	// tallies are the status's counts, kept current by recount.
	tallies tallies
	// verifiedTick is the last tick (time / slotLen) whose slot of names
	// was compared with Vault (verifySlots); 0 before the first full
	// comparison.
	verifiedTick int64
	slotLen      time.Duration
	// What syncs wrote and deleted since the template's last status
	// reconcile: reported there as one event each, not one per binding (a
	// burst of 10,000 new bindings is not 10,000 events).
	unreported policyPass
}

// unknownBody marks an owned policy whose body was not compared: no
// rendered body equals it, so a wanted name with it is still to check.
const unknownBody = "\x00unknown"

// policyRef counts, per body, the bindings that render a policy name. More
// than one body is a template error (a name must determine its body).
type policyRef struct {
	bodies map[string]int
	from   map[string]types.NamespacedName // one binding per body, for messages
}

// desired returns the body to write, or ok false when no binding renders
// the name or bindings disagree (conflict true).
func (p *policyRef) desired() (body string, ok, conflict bool) {
	switch len(p.bodies) {
	case 0:
		return "", false, false
	case 1:
		for b := range p.bodies {
			return b, true, false
		}
	}
	return "", false, true
}

func newPolicyIndex() *policyIndex {
	return &policyIndex{templates: map[string]*templatePolicies{}, bindings: map[types.NamespacedName]bindingPolicies{}}
}

// templateLocked returns the part of a template, creating it.
func (idx *policyIndex) templateLocked(name string) *templatePolicies {
	tp := idx.templates[name]
	if tp == nil {
		tp = &templatePolicies{refs: map[string]*policyRef{}, owned: map[string]string{}, notOwned: map[string]bool{},
			dirty: map[string]bool{}, inFlight: map[string]bool{}}
		idx.templates[name] = tp
	}
	return tp
}

func (idx *policyIndex) part(template string) *templatePolicies {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	return idx.templateLocked(template)
}

// holdForScan keeps deltas and retries of the template out until release.
func (idx *policyIndex) holdForScan(template string) (release func()) {
	tp := idx.part(template)
	tp.scanLock.Lock()
	return tp.scanLock.Unlock
}

// holdForDelta keeps a full scan of the template out until release.
func (idx *policyIndex) holdForDelta(template string) (release func()) {
	tp := idx.part(template)
	tp.scanLock.RLock()
	return tp.scanLock.RUnlock
}

// docsOf turns a render result into name -> body (names lowercased: Vault
// stores policy names in lower case).
func docsOf(res *render.Result) map[string]string {
	if res == nil || len(res.PolicyDocuments) == 0 {
		return nil
	}
	out := make(map[string]string, len(res.PolicyDocuments))
	for _, d := range res.PolicyDocuments {
		out[strings.ToLower(d.Name)] = d.HCL
	}
	return out
}

// built reports whether a full scan of the template rebuilt its part:
// before that, a delta has nothing to count into.
func (idx *policyIndex) built(template string) bool {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templates[template]
	return tp != nil && tp.built
}

// templateOf returns the template a binding was last counted into.
func (idx *policyIndex) templateOf(key types.NamespacedName) string {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	return idx.bindings[key].template
}

// set replaces a binding's contribution and returns the policy names whose
// desired state changed (a first or last binding, a new body), per
// template; they are dirty until a sync confirms them. Templates that are
// not built are left alone: their next scan renders every binding.
func (idx *policyIndex) set(key types.NamespacedName, next bindingPolicies) map[string][]string {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	prev, had := idx.bindings[key]
	touched := map[string][]string{}
	same := had && prev.template == next.template
	if had && prev.template != "" {
		if tp := idx.templates[prev.template]; tp != nil && tp.built && prev.member {
			tp.members--
		}
		for name, body := range prev.docs {
			if b, ok := next.docs[name]; same && ok && b == body {
				continue
			}
			idx.adjustLocked(prev.template, key, name, body, -1, touched)
		}
	}
	if next.template == "" {
		delete(idx.bindings, key)
		return touched
	}
	if tp := idx.templates[next.template]; tp != nil && tp.built && next.member {
		tp.members++
	}
	for name, body := range next.docs {
		if b, ok := prev.docs[name]; same && ok && b == body {
			continue
		}
		idx.adjustLocked(next.template, key, name, body, +1, touched)
	}
	idx.bindings[key] = next
	return touched
}

// adjustLocked counts one binding in or out of a policy body, and marks the
// name dirty when its desired state changes.
func (idx *policyIndex) adjustLocked(template string, key types.NamespacedName, name, body string, delta int, touched map[string][]string) {
	tp := idx.templates[template]
	if tp == nil || !tp.built {
		return
	}
	ref := tp.refs[name]
	if ref == nil {
		if delta < 0 {
			return
		}
		ref = &policyRef{bodies: map[string]int{}, from: map[string]types.NamespacedName{}}
		tp.refs[name] = ref
	}
	before, beforeOK, _ := ref.desired()
	ref.bodies[body] += delta
	if delta > 0 {
		ref.from[body] = key
	}
	if ref.bodies[body] <= 0 {
		delete(ref.bodies, body)
		delete(ref.from, body)
	}
	if after, afterOK, _ := ref.desired(); after != before || afterOK != beforeOK {
		touched[template] = append(touched[template], name)
		tp.dirty[name] = true
	}
	if len(ref.bodies) == 0 {
		delete(tp.refs, name)
	}
	tp.recount(name)
}

// rebuild replaces a template's bindings with a full scan's. A verifying
// scan marks every name it wants or owns dirty, so that each is compared
// with Vault; any other scan (the template changed, the interval's)
// marks only the names whose wanted state differs from what Vault was
// confirmed to hold, so that a rollout that leaves a policy as it was
// does not read it: each name is compared with Vault once per interval
// in its slot (verifyDue).
func (idx *policyIndex) rebuild(template string, compiled *render.Compiled, scanned map[types.NamespacedName]bindingPolicies, verify bool) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	for key, b := range idx.bindings {
		if b.template == template {
			delete(idx.bindings, key)
		}
	}
	tp := idx.templateLocked(template)
	tp.refs = map[string]*policyRef{}
	tp.members = 0
	for key, b := range scanned {
		idx.bindings[key] = b
		if b.member {
			tp.members++
		}
		for name, body := range b.docs {
			ref := tp.refs[name]
			if ref == nil {
				ref = &policyRef{bodies: map[string]int{}, from: map[string]types.NamespacedName{}}
				tp.refs[name] = ref
			}
			ref.bodies[body]++
			ref.from[body] = key
		}
	}
	for name := range tp.refs {
		if verify || !tp.confirmedLocked(name) {
			tp.dirty[name] = true
		}
	}
	for name := range tp.owned {
		if verify || !tp.confirmedLocked(name) {
			tp.dirty[name] = true
		}
	}
	tp.retally()
	tp.built, tp.compiled, tp.lastScan = true, compiled, time.Now()
}

// wanted returns what a template wants written (conflicting names left
// out).
func (idx *policyIndex) wanted(template string) map[string]string {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templates[template]
	if tp == nil {
		return nil
	}
	out := make(map[string]string, len(tp.refs))
	for name, ref := range tp.refs {
		if body, ok, _ := ref.desired(); ok {
			out[name] = body
		}
	}
	return out
}

// ownedNames returns the names the template is known to own in Vault.
func (idx *policyIndex) ownedNames(template string) []string {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templates[template]
	if tp == nil {
		return nil
	}
	return slices.Collect(maps.Keys(tp.owned))
}

// discoveredOwned records policies a discovery found with the template's
// header: owned, their bodies not compared, so dirty.
func (idx *policyIndex) discoveredOwned(template string, found []string) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templateLocked(template)
	for _, n := range found {
		if _, ok := tp.owned[n]; !ok {
			tp.own(n, unknownBody)
		}
		tp.dirty[n] = true
	}
	tp.discovered = true
}

// discovered reports whether the template's Vault was listed since the
// start (or since it changed).
func (idx *policyIndex) discovered(template string) bool {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	return idx.templateLocked(template).discovered
}

// VaultKey is where policyOwners keeps what is known of the template's
// Vault.
func (idx *policyIndex) vaultKey(template string) string {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	return idx.templateLocked(template).vaultKey
}

// forget drops a deleted template.
func (idx *policyIndex) forget(template string) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	delete(idx.templates, template)
}

// own records name as in Vault with the template's header and body.
func (tp *templatePolicies) own(name, body string) {
	old, was := tp.owned[name]
	if !was {
		tp.flipDigest(name)
	} else {
		flipContent(&tp.content, name, old)
	}
	flipContent(&tp.content, name, body)
	tp.owned[name] = body
	tp.recount(name)
}

// disown records name as not the template's in Vault.
func (tp *templatePolicies) disown(name string) {
	if old, was := tp.owned[name]; was {
		tp.flipDigest(name)
		flipContent(&tp.content, name, old)
		delete(tp.owned, name)
	}
	tp.recount(name)
}
