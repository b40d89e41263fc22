package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// policyIndex is the template controller's memory of what every binding
// renders as ACL policies, so that a binding's change costs work in
// proportion to that binding, not to the fleet: per policy name a count of
// the bindings rendering each body, per binding the names it renders. It is
// built by a template's full scan (after a start, a template change, every
// interval) and kept current by binding deltas in between.
type policyIndex struct {
	mu        sync.Mutex
	templates map[string]*templateIndex
	bindings  map[types.NamespacedName]bindingDocs
}

// bindingDocs is what one binding contributes.
type bindingDocs struct {
	template string
	member   bool              // refers to the template and is not being deleted
	docs     map[string]string // policy name (lowercased, as Vault stores it) -> body
}

// templateIndex is one template's part.
type templateIndex struct {
	// scan is held for writing by a full scan and for reading by deltas, so
	// that a delta never interleaves with a scan of the same template.
	scan sync.RWMutex

	// Guarded by policyIndex.mu from here on.
	built      bool
	compiled   *render.Compiled // what the last scan rendered with
	lastScan   time.Time
	discovered bool   // Vault's policies were listed for this template since the start
	identity   string // the connection's Vault identity when they were
	vaultKey   string // where policyOwners keeps what is known of that Vault
	// handledRequest is the last reconcile request a full scan handled.
	handledRequest string
	members        int // bindings that refer to the template
	refs           map[string]*policyRef
	owned          map[string]bool // in Vault with this template's header
	notOwned       map[string]bool // wanted, but someone else's
	digest         [16]byte        // XOR of sha256(name)[:16] over owned
	// What binding deltas wrote and deleted since the template's last
	// reconcile: reported there as one event each, not one per binding
	// (a burst of 10,000 new bindings is not 10,000 events).
	unreported policyPass
}

// policyRef counts, per body, the bindings that render a policy name. More
// than one body is a template error (a name must determine its body).
type policyRef struct {
	bodies map[string]int
	from   map[string]types.NamespacedName // one binding per body, for messages
}

func (p *policyRef) count() int {
	n := 0
	for _, c := range p.bodies {
		n += c
	}
	return n
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
	return &policyIndex{templates: map[string]*templateIndex{}, bindings: map[types.NamespacedName]bindingDocs{}}
}

// template returns the index of a template, creating it.
func (x *policyIndex) template(name string) *templateIndex {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.templateLocked(name)
}

func (x *policyIndex) templateLocked(name string) *templateIndex {
	ti := x.templates[name]
	if ti == nil {
		ti = &templateIndex{refs: map[string]*policyRef{}, owned: map[string]bool{}, notOwned: map[string]bool{}}
		x.templates[name] = ti
	}
	return ti
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

// set replaces a binding's contribution and returns the policy names whose
// desired state changed (a first or last binding, a new body), per
// template. Templates that are not built are left alone: their next scan
// renders every binding.
func (x *policyIndex) set(key types.NamespacedName, next bindingDocs) map[string][]string {
	x.mu.Lock()
	defer x.mu.Unlock()
	prev, had := x.bindings[key]
	touched := map[string][]string{}
	same := had && prev.template == next.template
	if had && prev.template != "" {
		if ti := x.templates[prev.template]; ti != nil && ti.built && prev.member {
			ti.members--
		}
		for name, body := range prev.docs {
			if b, ok := next.docs[name]; same && ok && b == body {
				continue
			}
			x.adjustLocked(prev.template, key, name, body, -1, touched)
		}
	}
	if next.template == "" {
		delete(x.bindings, key)
		return touched
	}
	if ti := x.templates[next.template]; ti != nil && ti.built && next.member {
		ti.members++
	}
	for name, body := range next.docs {
		if b, ok := prev.docs[name]; same && ok && b == body {
			continue
		}
		x.adjustLocked(next.template, key, name, body, +1, touched)
	}
	x.bindings[key] = next
	return touched
}

// adjustLocked counts one binding in or out of a policy body, and notes the
// name when its desired state changes.
func (x *policyIndex) adjustLocked(template string, key types.NamespacedName, name, body string, delta int, touched map[string][]string) {
	ti := x.templates[template]
	if ti == nil || !ti.built {
		return
	}
	ref := ti.refs[name]
	if ref == nil {
		if delta < 0 {
			return
		}
		ref = &policyRef{bodies: map[string]int{}, from: map[string]types.NamespacedName{}}
		ti.refs[name] = ref
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
	}
	if len(ref.bodies) == 0 {
		delete(ti.refs, name)
	}
}

// rebuild replaces a template's bindings with a full scan's.
func (x *policyIndex) rebuild(template string, compiled *render.Compiled, scanned map[types.NamespacedName]bindingDocs) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for key, b := range x.bindings {
		if b.template == template {
			delete(x.bindings, key)
		}
	}
	ti := x.templateLocked(template)
	ti.refs = map[string]*policyRef{}
	ti.members = 0
	for key, b := range scanned {
		x.bindings[key] = b
		if b.member {
			ti.members++
		}
		for name, body := range b.docs {
			ref := ti.refs[name]
			if ref == nil {
				ref = &policyRef{bodies: map[string]int{}, from: map[string]types.NamespacedName{}}
				ti.refs[name] = ref
			}
			ref.bodies[body]++
			ref.from[body] = key
		}
	}
	ti.built, ti.compiled, ti.lastScan = true, compiled, time.Now()
}

// desiredOf returns the wanted state of names: body and whether a single
// body is wanted.
func (x *policyIndex) desiredOf(template, name string) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ti := x.templates[template]
	if ti == nil || ti.refs[name] == nil {
		return "", false
	}
	body, ok, _ := ti.refs[name].desired()
	return body, ok
}

// snapshot returns what a template wants written (conflicting names left
// out) and the names it owns.
func (x *policyIndex) snapshot(template string) (desired map[string]string, owned []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ti := x.templates[template]
	if ti == nil {
		return nil, nil
	}
	desired = make(map[string]string, len(ti.refs))
	for name, ref := range ti.refs {
		if body, ok, _ := ref.desired(); ok {
			desired[name] = body
		}
	}
	return desired, slices.Collect(maps.Keys(ti.owned))
}

// observe records what syncPolicy found for names.
func (x *policyIndex) observe(template string, pass policyPass) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ti := x.templateLocked(template)
	for _, n := range pass.owned {
		ti.setOwned(n, true)
		delete(ti.notOwned, n)
	}
	for _, n := range pass.deleted {
		ti.setOwned(n, false)
		delete(ti.notOwned, n)
	}
	for _, n := range pass.notOwned {
		ti.setOwned(n, false)
		ti.notOwned[n] = true
	}
}

// noteDelta keeps what a binding delta wrote and deleted for the
// template's next report, a bounded number of names and the counts.
func (x *policyIndex) noteDelta(template string, pass policyPass) {
	x.mu.Lock()
	defer x.mu.Unlock()
	u := &x.templateLocked(template).unreported
	u.written = appendCounted(u.written, pass.written)
	u.deleted = appendCounted(u.deleted, pass.deleted)
}

// takeUnreported returns and clears what noteDelta kept.
func (x *policyIndex) takeUnreported(template string) (written, deleted []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ti := x.templateLocked(template)
	written, deleted = ti.unreported.written, ti.unreported.deleted
	ti.unreported = policyPass{}
	return written, deleted
}

// appendCounted appends names to a report list, keeping at most
// reportNames of them and "and N more" for the rest.
func appendCounted(list, names []string) []string {
	if len(names) == 0 {
		return list
	}
	more := 0
	if n := len(list); n > 0 {
		if _, err := fmt.Sscanf(list[n-1], "and %d more", &more); err == nil {
			list = list[:n-1]
		}
	}
	for _, n := range names {
		if len(list) < reportNames {
			list = append(list, n)
		} else {
			more++
		}
	}
	if more > 0 {
		list = append(list, fmt.Sprintf("and %d more", more))
	}
	return list
}

// reportNames is how many policy names one event names.
const reportNames = 20

// resetOwned replaces a template's owned set with a full scan's view.
func (x *policyIndex) resetOwned(template string, owned []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ti := x.templateLocked(template)
	ti.owned, ti.notOwned, ti.digest = map[string]bool{}, map[string]bool{}, [16]byte{}
	for _, n := range owned {
		ti.setOwned(n, true)
	}
}

func (ti *templateIndex) setOwned(name string, owned bool) {
	if ti.owned[name] == owned {
		return
	}
	if owned {
		ti.owned[name] = true
	} else {
		delete(ti.owned, name)
	}
	sum := sha256.Sum256([]byte(name))
	for i := range ti.digest {
		ti.digest[i] ^= sum[i]
	}
}

// templateSummary is what a template's status shows of the index.
type templateSummary struct {
	built     bool
	members   int
	owned     int
	digest    string
	conflicts []string // messages
	notOwned  []string
}

func (x *policyIndex) summary(template string) templateSummary {
	x.mu.Lock()
	defer x.mu.Unlock()
	ti := x.templates[template]
	if ti == nil {
		return templateSummary{}
	}
	s := templateSummary{built: ti.built, members: ti.members, owned: len(ti.owned), notOwned: slices.Sorted(maps.Keys(ti.notOwned))}
	if len(ti.owned) > 0 {
		s.digest = hex.EncodeToString(ti.digest[:])
	}
	for _, name := range slices.Sorted(maps.Keys(ti.refs)) {
		ref := ti.refs[name]
		if _, _, conflict := ref.desired(); conflict {
			var from []string
			for _, b := range slices.Sorted(maps.Keys(ref.bodies)) {
				from = append(from, ref.from[b].String())
			}
			s.conflicts = append(s.conflicts, fmt.Sprintf("policy %q renders differently for MinionBindings %s", name, strings.Join(from, " and ")))
		}
	}
	return s
}

// forget drops a deleted template.
func (x *policyIndex) forget(template string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.templates, template)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PolicySetDigest is status.policies.digest of a set of policy names: the
// XOR of the first 16 bytes of each name's SHA-256, in hex ("" for none).
// The index keeps it up to date one name at a time.
func PolicySetDigest(names []string) string {
	if len(names) == 0 {
		return ""
	}
	var d [16]byte
	for _, n := range names {
		sum := sha256.Sum256([]byte(n))
		for i := range d {
			d[i] ^= sum[i]
		}
	}
	return hex.EncodeToString(d[:])
}
