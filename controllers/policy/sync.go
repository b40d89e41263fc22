package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A template's ACL policies go through three stages, as a binding's role,
// entity and alias do: observe (read each name, through the policyReader),
// plan (planPolicies: pure, one action per name, decided by
// ownership.DecidePolicy) and execute (executePolicies: the writes and
// deletions). `minionvault plan` runs the first two and prints the
// actions, so the plan of the policies is what the template reconciler
// does, decided by the same code.

// policyPass is the result of syncing a set of names: each name whose sync
// succeeded is in exactly one of owned (written now or found as wanted,
// written also listed in written), deleted, notOwned (wanted, someone
// else's) and absent (not wanted, and not the template's in Vault); a
// name that failed is in none.
type policyPass struct {
	owned, notOwned, written, deleted, absent []string
}

// addDone files a name whose action is done (or needed no request).
func (p *policyPass) addDone(a policyAction) {
	switch a.kind {
	case ownership.PolicyKeep:
		p.owned = append(p.owned, a.name)
	case ownership.PolicyWrite:
		p.owned = append(p.owned, a.name)
		p.written = append(p.written, a.name)
	case ownership.PolicyDelete:
		p.deleted = append(p.deleted, a.name)
	case ownership.PolicyNotOwned:
		// Someone else's policy is the template's problem only when a
		// binding wants the name; otherwise the name is merely not ours.
		if a.wanted {
			p.notOwned = append(p.notOwned, a.name)
		} else {
			p.absent = append(p.absent, a.name)
		}
	case ownership.PolicyAbsent, ownership.PolicyBuiltin:
		// A built-in policy is nobody's: not the template's, and not
		// someone else's to report.
		p.absent = append(p.absent, a.name)
	}
}

// syncPolicies brings every name in desired (wanted, with its body) and in
// stale (owned before, no longer wanted) to what the template wants, a
// chunk of names at a time: each chunk is read, planned, then written and
// deleted, a few requests in flight at each stage, and the next chunk is
// read while one is written. A rollout of a policy per minion (as many
// names as bindings) so writes its first policy after the first, small
// chunk's reads, not after reading every name, and its reads and writes
// overlap instead of taking turns. The ownership header that every policy
// the operator writes starts with (ownership.PolicyOwner: the template
// and its cluster) is the record of what the template owns; it is written
// in the same request as the policy, so no crash can separate the two.
func syncPolicies(ctx context.Context, vc vault.Client, self ownership.PolicyOwner, adopt bool, desired map[string]string, stale []string, reader *policyReader) (policyPass, error) {
	w := policyWork{desired: desired, stale: stale}
	chunks := policyChunks(w.inOrder())
	var (
		pass policyPass
		err  error
	)
	// The read ahead stops when a chunk fails: nothing more is sent, and
	// no read outlives the sync (the caller prunes the reader after it).
	readCtx, stopReading := context.WithCancel(ctx)
	var ahead <-chan chunkRead
	if len(chunks) > 0 {
		ahead = readChunk(readCtx, vc, reader, chunks[0])
	}
	for i, chunk := range chunks {
		read := <-ahead
		ahead = nil
		if i+1 < len(chunks) && read.err == nil {
			ahead = readChunk(readCtx, vc, reader, chunks[i+1])
		}
		var done policyPass
		done, err = syncChunk(ctx, vc, self, adopt, w, chunk, read, reader)
		pass.add(done)
		if err != nil {
			break
		}
	}
	stopReading()
	if ahead != nil {
		<-ahead
	}
	for _, names := range []*[]string{&pass.notOwned, &pass.written, &pass.deleted} {
		slices.Sort(*names)
	}
	return pass, err
}

// policyChunk is how many names a sync reads before it writes: enough to
// keep policyWorkers busy, few enough that a chunk's reads take a few round
// trips. The first chunk is policyWorkers names: one round trip of reads
// before the first write.
const policyChunk = 16 * policyWorkers

// policyChunks splits names into the chunks a sync reads and writes.
func policyChunks(names []string) [][]string {
	var chunks [][]string
	for size := policyWorkers; len(names) > 0; size = policyChunk {
		n := min(size, len(names))
		chunks = append(chunks, names[:n:n])
		names = names[n:]
	}
	return chunks
}

// chunkRead is what the reads of one chunk found, and the error that
// stopped them.
type chunkRead struct {
	observed map[string]observedPolicy
	err      error
}

// readChunk reads the names of chunk in the background.
func readChunk(ctx context.Context, vc vault.Client, reader *policyReader, chunk []string) <-chan chunkRead {
	out := make(chan chunkRead, 1)
	go func() {
		observed, err := observePolicies(ctx, vc, reader, chunk)
		out <- chunkRead{observed: observed, err: err}
	}()
	return out
}

// syncChunk plans the names of w in chunk from what their reads found,
// and executes the plan.
func syncChunk(ctx context.Context, vc vault.Client, self ownership.PolicyOwner, adopt bool, w policyWork, chunk []string, read chunkRead, reader *policyReader) (policyPass, error) {
	actions := planNames(w, chunk, read.observed, self, adopt)
	if read.err != nil {
		// A failed read ends the pass as a failed write does (Vault is
		// unreachable, or the token lacks a right): nothing more is sent,
		// and what was read is recorded, so that only the names not
		// confirmed stay dirty for the next sync.
		actions = slices.DeleteFunc(actions, policyAction.sendsRequest)
	}
	pass, err := executePolicies(ctx, vc, actions, reader)
	if read.err != nil {
		return pass, read.err
	}
	return pass, err
}

// add appends another pass's names.
func (p *policyPass) add(o policyPass) {
	p.owned = append(p.owned, o.owned...)
	p.notOwned = append(p.notOwned, o.notOwned...)
	p.written = append(p.written, o.written...)
	p.deleted = append(p.deleted, o.deleted...)
	p.absent = append(p.absent, o.absent...)
}

// observedPolicy is what a read found of one name in Vault.
type observedPolicy struct {
	hcl   string
	found bool
}

// observePolicies reads names through the reader (a body a discovery
// kept is taken instead of a request), policyWorkers at a time. At the
// first error it stops and returns what it read so far with that error.
func observePolicies(ctx context.Context, vc vault.Client, reader *policyReader, names []string) (map[string]observedPolicy, error) {
	var mu sync.Mutex
	observed := make(map[string]observedPolicy, len(names))
	err := inParallel(ctx, names, cancelInFlight, func(ctx context.Context, name string) error {
		hcl, found, err := reader.read(ctx, vc, name)
		if err != nil {
			return fmt.Errorf("reading ACL policy %s: %w", name, err)
		}
		mu.Lock()
		observed[name] = observedPolicy{hcl: hcl, found: found}
		mu.Unlock()
		return nil
	})
	return observed, err
}

// executePolicies makes the actions' requests, policyWorkers at a time,
// and returns what was done: every action that needs no request, and
// those whose request succeeded. The first failure stops it and is
// returned; the requests in flight are answered, not cancelled (see
// finishInFlight).
func executePolicies(ctx context.Context, vc vault.Client, actions []policyAction, reader *policyReader) (policyPass, error) {
	var (
		pass  policyPass
		calls []policyAction
		mu    sync.Mutex
	)
	for _, a := range actions {
		if a.sendsRequest() {
			calls = append(calls, a)
		} else {
			pass.addDone(a)
		}
	}
	err := inParallel(ctx, calls, finishInFlight, func(ctx context.Context, a policyAction) error {
		// From now on no read of the name that began before may stand for
		// it: the write can land whatever the client hears (an answer lost
		// on the way back is an error here and a change in Vault).
		reader.sendingChange(a.name)
		if err := a.execute(ctx, vc); err != nil {
			return err
		}
		mu.Lock()
		pass.addDone(a)
		mu.Unlock()
		return nil
	})
	// The workers finish in any order: the lists that events, status and
	// plan name are sorted, the same for the same pass (owned and absent
	// only go into the index's sets, and at a full scan hold every policy).
	for _, names := range []*[]string{&pass.notOwned, &pass.written, &pass.deleted} {
		slices.Sort(*names)
	}
	return pass, err
}

// execute makes the action's request.
func (a policyAction) execute(ctx context.Context, vc vault.Client) error {
	log := ctrl.LoggerFrom(ctx)
	switch a.kind {
	case ownership.PolicyWrite:
		log.Info("Writing ACL policy", "policy", a.name)
		if err := vc.WritePolicy(ctx, a.name, a.body); err != nil {
			return fmt.Errorf("writing ACL policy %s: %w", a.name, err)
		}
	case ownership.PolicyDelete:
		log.Info("Deleting ACL policy no binding renders", "policy", a.name)
		if err := vc.DeletePolicy(ctx, a.name); err != nil {
			return fmt.Errorf("deleting ACL policy %s: %w", a.name, err)
		}
	}
	return nil
}

// policyWorkers is how many policy requests one pass keeps in flight.
const policyWorkers = 4

// inFlight says what the first failure of a parallel pass does to the
// calls still in flight.
type inFlight bool

const (
	// cancelInFlight: reads, whose answers are of no use to a pass that
	// failed.
	cancelInFlight inFlight = true
	// finishInFlight: writes and deletes. A request the client gives up on
	// may still reach Vault (it was sent, or a proxy holds it) and land
	// after the next sync has read the name: that sync then writes the
	// same body again, or worse, an older write lands over a newer one.
	// Waiting for the answer (bounded by the connection's timeout) tells
	// whether it landed, so no write of a pass outlives it.
	finishInFlight inFlight = false
)

// inParallel calls do for each item, policyWorkers at a time, in the
// items' order. At the first error it hands out no more items, cancels the
// calls in flight or lets them finish (onError) and returns that error once
// they are done.
func inParallel[T any](ctx context.Context, items []T, onError inFlight, do func(context.Context, T) error) error {
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	if onError == cancelInFlight {
		ctx = stop
	}
	jobs := make(chan T)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range policyWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range jobs {
				if stop.Err() != nil {
					// Handed out as the pass failed (a select picks
					// either of two ready cases): not called.
					continue
				}
				if err := do(ctx, it); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
	func() {
		defer close(jobs)
		for _, it := range items {
			select {
			case jobs <- it:
			case <-stop.Done():
				return
			}
		}
	}()
	wg.Wait()
	return first
}

// discoverOwned lists Vault's ACL policies and returns those whose header
// names self, reading every policy whose owner is not known yet
// (known: owner by name, filled in as policies are read). It is the one way
// to find policies written before the operator started that no binding
// renders any more. Names in desired are not read here: the sync that
// follows reads each of them anyway (and finds its owner), so a restart
// costs one read per policy, not two.
func discoverOwned(ctx context.Context, vc vault.Client, self ownership.PolicyOwner, reader *policyReader, desired map[string]string) ([]string, error) {
	return discoverHeaders(ctx, vc, self.Owns, reader, desired)
}

// discoverHeaders is discoverOwned for any test of the owner: a plan that
// is not told the cluster looks for the template's policies of every
// cluster, to learn it from their headers.
func discoverHeaders(ctx context.Context, vc vault.Client, match func(ownership.PolicyOwner) bool, reader *policyReader, desired map[string]string) ([]string, error) {
	names, err := listPolicies(ctx, vc)
	if err != nil {
		return nil, err
	}
	return headersIn(ctx, vc, match, reader, names, desired)
}

func listPolicies(ctx context.Context, vc vault.Client) ([]string, error) {
	names, err := vc.ListPolicies(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing ACL policies: %w", err)
	}
	return names, nil
}

// headersIn is discoverHeaders over names already listed.
func headersIn(ctx context.Context, vc vault.Client, match func(ownership.PolicyOwner) bool, reader *policyReader, names []string, desired map[string]string) ([]string, error) {
	var (
		mu   sync.Mutex
		out  []string
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan string)
	for range policyWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				owner, found, err := reader.owner(ctx, vc, n)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("reading ACL policy %s: %w", n, err))
					mu.Unlock()
					continue
				}
				if !found {
					continue
				}
				if match(owner) {
					mu.Lock()
					out = append(out, n)
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range names {
		if _, ok := desired[strings.ToLower(n)]; ok || acl.IsBuiltin(n) {
			// A built-in policy (root, default, Vault 2's
			// default-ceiling, ...) is never the template's, whatever
			// header an administrator gave it: not read, so never
			// discovered as owned, so never deleted. root carries no
			// header and cannot be read as a document anyway.
			continue
		}
		next <- n
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return out, nil
}

// policyOwners remembers, per Vault (cluster and namespace), which
// owner's header each ACL policy read so far carries (zero for none), so
// that the first full scans after a start read each policy in Vault once,
// not once per template or connection: templates scan in parallel and in
// any order, and one's discovery reads the others' policies.
type policyOwners struct {
	mu     sync.Mutex
	vaults map[string]*vaultPolicies
}

// vaultPolicies is what is known of one Vault's policies.
type vaultPolicies struct {
	owners map[string]ownership.PolicyOwner // by lowercased name
	// bodies are policies with a template's header that a discovery read
	// and no sync has used yet: the sync of the template they belong to
	// takes them instead of reading them again. They are used only while
	// fresh (the scans after a start), then dropped.
	bodies map[string]discoveredBody
	reads  singleflight.Group
	// changes counts, by name, the writes and deletes sent: a read (a
	// discovery's kept body, or one a sync joined) made before the last of
	// them is not what Vault holds now, and a sync reads again.
	changes map[string]uint64
}

type discoveredBody struct {
	hcl    string
	at     time.Time
	change uint64 // changes[name] when it was read
}

// discoveredBodyTTL bounds how old a body a sync may take instead of reading it.
const discoveredBodyTTL = 2 * time.Minute

func (o *policyOwners) vault(key string) *vaultPolicies {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.vaults == nil {
		o.vaults = map[string]*vaultPolicies{}
	}
	v := o.vaults[key]
	if v == nil {
		v = &vaultPolicies{owners: map[string]ownership.PolicyOwner{}, bodies: map[string]discoveredBody{}, changes: map[string]uint64{}}
		o.vaults[key] = v
	}
	return v
}

// forget drops what is known of a Vault (it changed).
func (o *policyOwners) forget(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.vaults, key)
}

// reader reads policies of the Vault key through what is known of it.
func (o *policyOwners) reader(key string) *policyReader {
	return &policyReader{owners: o, v: o.vault(key)}
}

// policyReader reads a Vault's policies for syncs and discoveries: one
// request for concurrent reads of a name, the owner of each recorded, and
// a body a discovery read handed to the sync that wants it.
type policyReader struct {
	owners *policyOwners
	v      *vaultPolicies
}

// owner returns the owner whose header the policy carries (zero for
// none, found false when it does not exist): recorded if it was read
// before, otherwise read, and its body kept for the owner's sync.
func (r *policyReader) owner(ctx context.Context, vc vault.Client, name string) (owner ownership.PolicyOwner, found bool, err error) {
	res, err := r.readOnce(ctx, vc, name, true)
	if err != nil || !res.found {
		return ownership.PolicyOwner{}, false, err
	}
	owner, _ = ownership.ParseHeader(res.hcl)
	if res.known {
		owner = res.owner
	}
	return owner, true, nil
}

// read returns the policy's text, for a sync: a body a discovery kept is
// taken instead of reading it again, if it is fresh.
func (r *policyReader) read(ctx context.Context, vc vault.Client, name string) (string, bool, error) {
	res, err := r.readOnce(ctx, vc, name, false)
	if err == nil && res.known {
		// Joined a discovery's call that answered from what was recorded,
		// without the text: ask again.
		res, err = r.readOnce(ctx, vc, name, false)
	}
	return res.hcl, res.found, err
}

type policyRead struct {
	hcl          string
	found, known bool
	change       uint64                // changes[name] when the read began
	owner        ownership.PolicyOwner // when known: recorded before, hcl not read
}

// readOnce is one read of a name at a time, whichever asks: what was kept or
// recorded is consulted inside it, so that a discovery and a sync walking
// the same names never read one twice, in whatever order they meet.
func (r *policyReader) readOnce(ctx context.Context, vc vault.Client, name string, discovery bool) (policyRead, error) {
	name = strings.ToLower(name)
	v, err, shared := r.v.reads.Do(name, func() (any, error) {
		r.owners.mu.Lock()
		if discovery {
			if owner, ok := r.v.owners[name]; ok {
				r.owners.mu.Unlock()
				return policyRead{found: true, known: true, owner: owner}, nil
			}
		} else if kb, ok := r.v.bodies[name]; ok {
			delete(r.v.bodies, name)
			if time.Since(kb.at) < discoveredBodyTTL && kb.change == r.v.changes[name] {
				r.owners.mu.Unlock()
				return policyRead{hcl: kb.hcl, found: true, change: kb.change}, nil
			}
		}
		change := r.v.changes[name]
		r.owners.mu.Unlock()
		hcl, found, err := vc.ReadPolicy(ctx, name)
		if err != nil {
			return policyRead{}, err
		}
		owner, ours := ownership.ParseHeader(hcl)
		r.owners.mu.Lock()
		defer r.owners.mu.Unlock()
		switch {
		case !found:
			delete(r.v.owners, name)
		case ours:
			r.v.owners[name] = owner
			if discovery && change == r.v.changes[name] {
				r.v.bodies[name] = discoveredBody{hcl: hcl, at: time.Now(), change: change}
			}
		default:
			r.v.owners[name] = ownership.PolicyOwner{}
		}
		return policyRead{hcl: hcl, found: found, change: change}, nil
	})
	if err != nil {
		return policyRead{}, err
	}
	res := v.(policyRead)
	if !discovery && !res.known && res.change != r.changesOf(name) {
		// Read before a write of the name was sent (a discovery's read
		// that this sync joined): read what Vault holds now.
		change := r.changesOf(name)
		hcl, found, err := vc.ReadPolicy(ctx, name)
		if err != nil {
			return policyRead{}, err
		}
		return policyRead{hcl: hcl, found: found, change: change}, nil
	}
	if shared && !discovery && !res.known {
		// A sync that joined a discovery's read has the body: nothing to
		// keep for it.
		r.owners.mu.Lock()
		delete(r.v.bodies, name)
		r.owners.mu.Unlock()
	}
	return res, nil
}

// sendingChange notes that a write or delete of name is being sent (a nil
// reader, a plan's, keeps nothing).
func (r *policyReader) sendingChange(name string) {
	if r == nil {
		return
	}
	r.readAgain([]string{name})
}

// readAgain makes the next read of each name ask Vault: no read that
// began before stands for it, neither a body a discovery kept (another
// template's first scan may have read it minutes ago) nor a read in
// flight that a sync would join. A reconcile request asks for Vault as
// it is now, not as the process last saw it.
func (r *policyReader) readAgain(names []string) {
	r.owners.mu.Lock()
	defer r.owners.mu.Unlock()
	for _, name := range names {
		name = strings.ToLower(name)
		r.v.changes[name]++
		delete(r.v.bodies, name)
	}
}

func (r *policyReader) changesOf(name string) uint64 {
	r.owners.mu.Lock()
	defer r.owners.mu.Unlock()
	return r.v.changes[name]
}

// set records that name carries owner's header (written or seen).
func (r *policyReader) set(name string, owner ownership.PolicyOwner) {
	r.owners.mu.Lock()
	defer r.owners.mu.Unlock()
	r.v.owners[strings.ToLower(name)] = owner
}

// prune drops the bodies no sync took while they were fresh.
func (r *policyReader) prune() {
	r.owners.mu.Lock()
	defer r.owners.mu.Unlock()
	for n, kb := range r.v.bodies {
		if time.Since(kb.at) >= discoveredBodyTTL {
			delete(r.v.bodies, n)
		}
	}
}
