package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// policyOutcome is what syncPolicy found or did for one ACL policy name.
type policyOutcome int

const (
	policyAbsent   policyOutcome = iota // not in Vault, and not wanted
	policyOwned                         // in Vault with this template's header, as wanted
	policyWritten                       // written now
	policyDeleted                       // deleted now (ours, no longer wanted)
	policyNotOwned                      // in Vault without our header (or another template's), left alone
)

// syncPolicy brings one ACL policy to what the template wants: want is its
// body when a binding renders it, and wanted false when none does. The
// ownership header that every policy the operator writes starts with
// (ownership.PolicyOwner: the template and its cluster) is the record of
// what the template owns; it is written in the same request as the policy,
// so no crash can separate the two. Policies without it (or with another
// template's, or another cluster's) are never written (unless adopt) nor
// deleted.
func syncPolicy(ctx context.Context, vc vault.Client, self ownership.PolicyOwner, adopt bool, name, want string, wanted bool, reader *policyReader) (policyOutcome, error) {
	log := ctrl.LoggerFrom(ctx)
	actual, found, err := reader.read(ctx, vc, name)
	if err != nil {
		return 0, fmt.Errorf("reading ACL policy %s: %w", name, err)
	}
	owner, ours := ownership.ParseHeader(actual)
	ours = found && ours && self.Owns(owner)
	switch {
	case !wanted && ours:
		log.Info("Deleting ACL policy no binding renders", "policy", name)
		if err := vc.DeletePolicy(ctx, name); err != nil {
			return 0, fmt.Errorf("deleting ACL policy %s: %w", name, err)
		}
		return policyDeleted, nil
	case !wanted && found:
		return policyNotOwned, nil
	case !wanted:
		return policyAbsent, nil
	case found && !ours && !adopt:
		return policyNotOwned, nil
	}
	body := self.Header() + want
	if found && !policyDiffers(body, actual) {
		return policyOwned, nil
	}
	log.Info("Writing ACL policy", "policy", name)
	if err := vc.WritePolicy(ctx, name, body); err != nil {
		return 0, fmt.Errorf("writing ACL policy %s: %w", name, err)
	}
	return policyWritten, nil
}

// policyPass is the result of syncing a set of names: each name whose sync
// succeeded is in exactly one of owned (written now or found as wanted,
// written also listed in written), deleted, notOwned (wanted, someone
// else's) and absent (not wanted, and not the template's in Vault); a
// name that failed is in none.
type policyPass struct {
	owned, notOwned, written, deleted, absent []string
}

// syncPolicies runs syncPolicy for every name in desired (wanted) and in
// stale (owned before, no longer wanted), with a few requests in flight:
// a template with a policy per minion has as many as it has bindings.
func syncPolicies(ctx context.Context, vc vault.Client, self ownership.PolicyOwner, adopt bool, desired map[string]string, stale []string, reader *policyReader) (policyPass, error) {
	type job struct {
		name, want string
		wanted     bool
	}
	jobs := make(chan job)
	var (
		mu   sync.Mutex
		pass policyPass
		errs []error
		wg   sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range policyWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				out, err := syncPolicy(ctx, vc, self, adopt, j.name, j.want, j.wanted, reader)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					cancel()
				}
				switch out {
				case policyOwned:
					pass.owned = append(pass.owned, j.name)
				case policyWritten:
					pass.owned = append(pass.owned, j.name)
					pass.written = append(pass.written, j.name)
				case policyDeleted:
					pass.deleted = append(pass.deleted, j.name)
				case policyNotOwned:
					if j.wanted {
						pass.notOwned = append(pass.notOwned, j.name)
					} else {
						pass.absent = append(pass.absent, j.name)
					}
				case policyAbsent:
					if err == nil {
						pass.absent = append(pass.absent, j.name)
					}
				}
				mu.Unlock()
			}
		}()
	}
	send := func(j job) bool {
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	func() {
		defer close(jobs)
		for _, name := range slices.Sorted(maps.Keys(desired)) {
			if !send(job{name: name, want: desired[name], wanted: true}) {
				return
			}
		}
		for _, name := range stale {
			if _, ok := desired[name]; !ok && !send(job{name: name}) {
				return
			}
		}
	}()
	wg.Wait()
	// The workers finish in any order: the lists that events, status and
	// plan name are sorted, the same for the same pass (owned and absent
	// only go into the index's sets, and at a full scan hold every policy).
	for _, names := range []*[]string{&pass.notOwned, &pass.written, &pass.deleted} {
		slices.Sort(*names)
	}
	if len(errs) > 0 {
		return pass, errs[0]
	}
	return pass, nil
}

// policyWorkers is how many policy requests one pass keeps in flight.
const policyWorkers = 4

// discoverOwned lists Vault's ACL policies and returns those whose header
// names self, reading every policy whose owner is not known yet
// (known: owner by name, filled in as policies are read). It is the one way
// to find policies written before the operator started that no binding
// renders any more. Names in desired are not read here: the sync that
// follows reads each of them anyway (and finds its owner), so a restart
// costs one read per policy, not two.
func discoverOwned(ctx context.Context, vc vault.Client, self ownership.PolicyOwner, reader *policyReader, desired map[string]string) ([]string, error) {
	names, err := vc.ListPolicies(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing ACL policies: %w", err)
	}
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
				if self.Owns(owner) {
					mu.Lock()
					out = append(out, n)
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range names {
		if _, ok := desired[strings.ToLower(n)]; ok || n == "root" {
			// root carries no header and cannot be read as a document.
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
}

type discoveredBody struct {
	hcl string
	at  time.Time
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
		v = &vaultPolicies{owners: map[string]ownership.PolicyOwner{}, bodies: map[string]discoveredBody{}}
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
// a body a discovery read handed to the sync that wants it. A nil reader
// reads straight from Vault (plans).
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
	if r == nil {
		return vc.ReadPolicy(ctx, name)
	}
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
			if time.Since(kb.at) < discoveredBodyTTL {
				r.owners.mu.Unlock()
				return policyRead{hcl: kb.hcl, found: true}, nil
			}
		}
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
			if discovery {
				r.v.bodies[name] = discoveredBody{hcl: hcl, at: time.Now()}
			}
		default:
			r.v.owners[name] = ownership.PolicyOwner{}
		}
		return policyRead{hcl: hcl, found: found}, nil
	})
	if err != nil {
		return policyRead{}, err
	}
	res := v.(policyRead)
	if shared && !discovery && !res.known {
		// A sync that joined a discovery's read has the body: nothing to
		// keep for it.
		r.owners.mu.Lock()
		delete(r.v.bodies, name)
		r.owners.mu.Unlock()
	}
	return res, nil
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
