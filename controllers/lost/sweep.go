package lost

import (
	"fmt"
	"slices"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The sweep finds what nothing wakes: a lost holder with no claimant,
// lost while no operator ran. Once per interval it lists the Vault's
// entities and the roles of the AppRole mounts the operator writes to (a
// LIST each), leaves out every object a live binding's status accounts
// for (status is the operator's own record: a tenant cannot make the sweep
// skip or collect anything with it; it could only make the operator look
// again), and reads the rest one at a time, spread over the interval: a
// fleet with nothing lost costs the lists and a read per object nobody
// accounts for (an administrator's, a Salt master's, another cluster's),
// and no write.

// startSweep lists the Vault and queues what no live binding accounts
// for; urgent reads them all at once (an administrator's collection of a
// minion not found yet), not spread over the interval.
func (w *pass) startSweep(urgent bool) error {
	acc, mounts, err := w.accounted()
	if err != nil {
		return err
	}
	var queue []lostnotice.Candidate
	var entities []vault.Entity
	listed, err := w.list("identity/entity/id", func() error {
		var err error
		entities, err = w.vc.ListEntities(w.ctx)
		return err
	})
	if err != nil {
		return err
	}
	// Which entity each alias (a role's role ID, on its mount) is on: a
	// role's look needs no lookup of its logins' entity.
	aliases := map[string]string{}
	for _, e := range entities {
		accounted := acc.entities[strings.ToLower(e.Name)]
		for _, a := range e.Aliases {
			if accounted {
				aliases[aliasKey(a.MountAccessor, a.Name)] = "" // a live binding's
			} else {
				aliases[aliasKey(a.MountAccessor, a.Name)] = e.Name
			}
		}
		if !accounted {
			queue = append(queue, lostnotice.Candidate{Vault: w.key, Connection: w.conn.Name, Entity: e.Name})
		}
	}
	roles := map[string][]string{}
	for _, m := range mounts {
		roles[m] = []string{}
		var names []string
		if _, err := w.list("auth/"+m+"/role", func() error {
			var err error
			names, err = w.vc.ListRoles(w.ctx, m)
			return err
		}); err != nil {
			return err
		}
		for _, n := range names {
			if !acc.roles[m+"/"+strings.ToLower(n)] {
				roles[m] = append(roles[m], strings.ToLower(n))
				queue = append(queue, lostnotice.Candidate{Vault: w.key, Connection: w.conn.Name, Mount: m, Role: strings.ToLower(n)})
			}
		}
	}
	w.st.roles = roles
	w.st.aliases = nil
	if listed {
		w.st.aliases = aliases
	}
	w.st.queue = queue
	w.st.spacing = w.c.Interval / time.Duration(len(queue)+1)
	if urgent {
		w.st.spacing = 0
	}
	w.st.nextRead = w.now
	w.st.nextSweep = w.now.Add(outcome.Jitter(w.c.Interval))
	ctrl.LoggerFrom(w.ctx).V(1).Info("Sweeping for lost minions", "entities", len(entities), "mounts", mounts, "toRead", len(queue), "spacing", w.st.spacing.String())
	return nil
}

func aliasKey(accessor, name string) string { return accessor + "\x00" + name }

// list is a LIST the sweep makes; one the operator's policy does not
// allow is said once and leaves that part out (the claimants and the
// deletions still find lost minions).
// It reports whether the LIST was made.
func (w *pass) list(path string, f func() error) (bool, error) {
	err := f()
	switch {
	case err == nil:
		return true, nil
	case vault.Denied(err):
		if !w.st.deniedOnce(path) {
			outcome.Emit(w.c.Recorder, w.conn, "Warning", v1alpha1.AccessDeniedReason, "Sweep",
				"the sweep for lost minions may not LIST %s (%v): give the operator's Vault policy the list capability there (config/vault/operator-policy.hcl)", path, err)
		}
		return false, nil
	}
	return false, fmt.Errorf("listing %s: %w", path, err)
}

// accounting is what live bindings of this Vault account for, by their
// status: entity names and mount/role names, lowercased.
type accounting struct {
	entities, roles map[string]bool
}

// accounted reads, from the informer cache, what the Vault's live
// bindings hold, and the AppRole mounts the operator writes to there
// (their templates' and their status's).
func (w *pass) accounted() (accounting, []string, error) {
	acc := accounting{entities: map[string]bool{}, roles: map[string]bool{}}
	here := w.here // the connections that report this Vault
	var mounts []string
	addMount := func(m string) {
		if m = strings.Trim(m, "/"); m != "" && !slices.Contains(mounts, m) {
			mounts = append(mounts, m)
		}
	}
	tpls := &v1alpha1.MinionTemplateList{}
	if err := w.c.List(w.ctx, tpls); err != nil {
		return acc, nil, err
	}
	for _, t := range tpls.Items {
		if here[t.Spec.ConnectionRef.Name] != nil {
			addMount(t.Spec.EffectiveAppRoleMount())
		}
	}
	list := &v1alpha1.MinionBindingList{}
	if err := w.c.List(w.ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return acc, nil, err
	}
	for i := range list.Items {
		b := &list.Items[i]
		st := b.Status
		if here[st.Connection] == nil {
			continue
		}
		if st.Entity != nil && st.Entity.Name != "" {
			acc.entities[strings.ToLower(st.Entity.Name)] = true
		}
		if st.AppRole != nil && st.AppRole.Mount != "" {
			addMount(st.AppRole.Mount)
			if st.AppRole.RoleID != "" {
				acc.roles[strings.Trim(st.AppRole.Mount, "/")+"/"+watch.MinionIDKey(b.Spec.MinionID)] = true
			}
		}
	}
	slices.Sort(mounts)
	return acc, mounts, nil
}

// deniedOnce reports whether a refused LIST of path was said already,
// and remembers it.
func (st *vaultState) deniedOnce(path string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.denied == nil {
		st.denied = map[string]bool{}
	}
	said := st.denied[path]
	st.denied[path] = true
	return said
}
