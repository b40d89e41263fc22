package lost

import (
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// vaultState is what the collector keeps of one Vault. Reconciles of one
// Vault never run at once (one key); notices arrive from other goroutines.
type vaultState struct {
	mu sync.Mutex
	// pending are candidates noticed, looked at in the next reconcile.
	pending []lostnotice.Candidate
	// queue is the sweep's: objects no live binding accounts for, read one
	// at a time, spacing apart, from nextRead on.
	queue    []lostnotice.Candidate
	spacing  time.Duration
	nextRead time.Time
	// nextSweep is when the next sweep lists the Vault (zero: at once).
	nextSweep time.Time
	// roles are the role names of each mount the last sweep listed that
	// no live binding accounts for: where a lost entity's role is looked
	// for by its alias. Its keys are the AppRole mounts the operator
	// writes to in this Vault: a lost entity's alias on any other mount is
	// a login's, and no role there is ever collected.
	roles map[string][]string
	// aliases is which entity holds each alias (aliasKey: mount accessor
	// and name), from the last sweep's LIST of the entities ("": one a
	// live binding accounts for; nil: not listed): a role is looked at
	// with the entity its logins lead to, and one whose role ID names no
	// alias has no entity.
	aliases map[string]string
	// lost are the lost and retained minions found, by lostKey.
	lost map[string]*lostMinion
	// asked are the UIDs a collection was asked for and already handled.
	asked map[string]bool
	// denied are the LISTs the operator's policy refused, said once.
	denied map[string]bool
	// reported are the connections whose gauges count lost or retained
	// minions of this Vault.
	reported map[string]bool
}

func newVaultState() *vaultState {
	return &vaultState{lost: map[string]*lostMinion{}, asked: map[string]bool{}, roles: map[string][]string{}}
}

// add queues a noticed candidate; false when it is queued already.
func (st *vaultState) add(c lostnotice.Candidate) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if slices.Contains(st.pending, c) {
		return false
	}
	st.pending = append(st.pending, c)
	return true
}

// takePending empties the noticed candidates.
func (st *vaultState) takePending() []lostnotice.Candidate {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.pending
	st.pending = nil
	return out
}

// next is when the Vault's next step is due, as a requeue from now.
func (st *vaultState) next(now time.Time) time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.pending) > 0 {
		return time.Millisecond
	}
	at := st.nextSweep
	if len(st.queue) > 0 && st.nextRead.Before(at) {
		at = st.nextRead
	}
	for _, m := range st.lost {
		if !m.until.IsZero() && m.until.Before(at) {
			at = m.until
		}
	}
	return max(at.Sub(now), time.Millisecond)
}

// lostMinion is one lost (or retained) minion's objects in a Vault.
type lostMinion struct {
	// owner is the binding the marker names (zero for a role whose
	// entity is gone: its role ID names no binding).
	owner ownership.Owner
	// conn is the VaultConnection it was written through, when a deletion
	// or a claimant said so: its events are told there.
	conn   string
	entity string
	// roles are its AppRole roles: found by name (the binding's minion ID)
	// or by the alias of its entity (name "" until found).
	roles []roleRef
	// since is when this process first found it, for a minion no marker
	// names (its window runs from then: it has no marker to carry LostKey);
	// a marked one's window runs from its entity's LostKey. until is when
	// its window ends (zero: retained, kept until an administrator asks).
	since, until time.Time
	retained     bool
}

// roleRef is an AppRole role of a lost minion.
type roleRef struct {
	mount, name, roleID string
}

// lostKey keys a lost minion: its binding's UID, or its role's place.
func lostKey(owner ownership.Owner, mount, role string) string {
	if owner.UID != "" {
		return "uid:" + owner.UID
	}
	return "role:" + strings.Trim(mount, "/") + "/" + strings.ToLower(role)
}

// collectUIDs are the UIDs a connection's CollectAnnotation names.
func collectUIDs(conn *v1alpha1.VaultConnection) []string {
	var out []string
	for _, f := range strings.Split(conn.Annotations[v1alpha1.CollectAnnotation], ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// addRole records a role of the minion once.
func (m *lostMinion) addRole(r roleRef) {
	for i, have := range m.roles {
		if strings.EqualFold(have.mount, r.mount) && (have.roleID == r.roleID && r.roleID != "" || have.name != "" && have.name == r.name) {
			if m.roles[i].name == "" {
				m.roles[i].name = r.name
			}
			return
		}
	}
	m.roles = append(m.roles, r)
}

// minionIDs are the role names: the minion IDs whose claimants wait.
func (m *lostMinion) minionIDs() []string {
	var out []string
	for _, r := range m.roles {
		if r.name != "" && !slices.Contains(out, r.name) {
			out = append(out, r.name)
		}
	}
	return out
}

// describe names the minion for events and logs.
func (m *lostMinion) describe() string {
	var parts []string
	for _, r := range m.roles {
		if r.name != "" {
			parts = append(parts, "AppRole "+r.mount+"/"+r.name)
		}
	}
	if m.entity != "" {
		parts = append(parts, "entity "+m.entity)
	}
	return strings.Join(parts, ", ")
}

// related is the gone binding, for its events' related object (nil when
// no marker names it): each lost minion its own series of events.
func (m *lostMinion) related() runtime.Object {
	if m.owner.UID == "" {
		return nil
	}
	return &v1alpha1.MinionBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MinionBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: m.owner.Namespace, Name: m.owner.Name, UID: types.UID(m.owner.UID)},
	}
}

// whose names its binding for events, as a claimant's message does.
func (m *lostMinion) whose() string {
	if m.owner.UID == "" {
		return ownership.UnnamedGone
	}
	return m.owner.String()
}
