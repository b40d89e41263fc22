package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"

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
// ownership header that every policy the operator writes starts with is
// the record of what the template owns; it is written in the same request
// as the policy, so no crash can separate the two. Policies without it (or
// with another template's) are never written (unless adopt) nor deleted.
func syncPolicy(ctx context.Context, vc vault.Client, template string, adopt bool, name, want string, wanted bool, pre prefetched) (policyOutcome, error) {
	log := ctrl.LoggerFrom(ctx)
	actual, found := pre.take(name)
	if !found {
		var err error
		if actual, found, err = vc.ReadPolicy(ctx, name); err != nil {
			return 0, fmt.Errorf("reading ACL policy %s: %w", name, err)
		}
	}
	owner, ours := policyOwner(actual)
	ours = found && ours && owner == template
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
	body := ownershipHeader(template) + want
	if found && !policyDiffers(body, actual) {
		return policyOwned, nil
	}
	log.Info("Writing ACL policy", "policy", name)
	if err := vc.WritePolicy(ctx, name, body); err != nil {
		return 0, fmt.Errorf("writing ACL policy %s: %w", name, err)
	}
	return policyWritten, nil
}

// policyPass is the result of syncing a set of names.
type policyPass struct {
	owned, notOwned, written, deleted []string
}

// syncPolicies runs syncPolicy for every name in desired (wanted) and in
// stale (owned before, no longer wanted), with a few requests in flight:
// a template with a policy per minion has as many as it has bindings.
func syncPolicies(ctx context.Context, vc vault.Client, template string, adopt bool, desired map[string]string, stale []string, pre prefetched) (policyPass, error) {
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
				out, err := syncPolicy(ctx, vc, template, adopt, j.name, j.want, j.wanted, pre)
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
		for _, name := range sortedKeys(desired) {
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
	if len(errs) > 0 {
		return pass, errs[0]
	}
	return pass, nil
}

// policyWorkers is how many policy requests one pass keeps in flight.
const policyWorkers = 4

// discoverOwned lists Vault's ACL policies and returns those whose header
// names the template, reading every policy whose owner is not known yet
// (known: owner by name, filled in as policies are read). It is the one way
// to find policies written before the operator started that no binding
// renders any more. Names in desired are not read here: the sync that
// follows reads each of them anyway (and finds its owner), so a restart
// costs one read per policy, not two.
func discoverOwned(ctx context.Context, vc vault.Client, template string, known *policyOwners, conn string, desired map[string]string) ([]string, error) {
	names, err := vc.ListPolicies(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing ACL policies: %w", err)
	}
	var out []string
	var unknown []string
	for _, n := range names {
		if _, ok := desired[strings.ToLower(n)]; ok || n == "root" {
			// root carries no header and cannot be read as a document.
			continue
		}
		if owner, ok := known.get(conn, n); ok {
			if owner == template {
				out = append(out, n)
			}
			continue
		}
		unknown = append(unknown, n)
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan string)
	for range policyWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				hcl, found, err := vc.ReadPolicy(ctx, n)
				mu.Lock()
				switch owner, ours := policyOwner(hcl); {
				case err != nil:
					errs = append(errs, fmt.Errorf("reading ACL policy %s: %w", n, err))
				case found && ours:
					known.set(conn, n, owner)
					known.keepBody(conn, n, hcl)
					if owner == template {
						out = append(out, n)
					}
				case found:
					known.set(conn, n, "")
				}
				mu.Unlock()
			}
		}()
	}
	for _, n := range unknown {
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
// template's header each ACL policy read so far carries ("" for none), so
// that the first full scans after a start read each policy in Vault once,
// not once per template or connection.
type policyOwners struct {
	mu sync.Mutex
	m  map[string]map[string]string
	// bodies are policies with a template's header that a discovery read
	// and no sync has used yet: the sync of the template they belong to
	// takes them instead of reading them again (after a start, templates
	// scan in any order, and one's discovery reads another's policies).
	bodies map[string]map[string]string
}

func (o *policyOwners) get(conn, name string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	owner, ok := o.m[conn][strings.ToLower(name)]
	return owner, ok
}

func (o *policyOwners) set(conn, name, owner string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	setIn(&o.m, conn, strings.ToLower(name), owner)
}

func (o *policyOwners) keepBody(conn, name, body string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	setIn(&o.bodies, conn, strings.ToLower(name), body)
}

// takeBody returns a body kept by a discovery, once.
func (o *policyOwners) takeBody(conn, name string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	name = strings.ToLower(name)
	body, ok := o.bodies[conn][name]
	if ok {
		delete(o.bodies[conn], name)
	}
	return body, ok
}

// forget drops what is known of a Vault (it changed).
func (o *policyOwners) forget(conn string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, conn)
	delete(o.bodies, conn)
}

// prefetched hands a sync the bodies a discovery read (nil: none).
type prefetched func(name string) (string, bool)

func (p prefetched) take(name string) (string, bool) {
	if p == nil {
		return "", false
	}
	return p(name)
}

func setIn(m *map[string]map[string]string, outer, inner, v string) {
	if *m == nil {
		*m = map[string]map[string]string{}
	}
	if (*m)[outer] == nil {
		(*m)[outer] = map[string]string{}
	}
	(*m)[outer][inner] = v
}
