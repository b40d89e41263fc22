package lost

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// seen is what one look read: the entity, and the role's role ID.
type seen struct {
	// conn is the connection the candidate names (the one a binding wrote
	// through, or the pass's for the sweep's).
	conn   string
	entity *vault.Entity
	// role: the candidate's role, and its role ID ("" absent).
	mount, role, roleID string
	// owner is the binding the marker (or, without an entity, the role
	// ID) names; named: the marker names it.
	owner ownership.Owner
	named bool
}

// look reads what a candidate names (its entity; its role's role ID, and
// the entity its role's logins lead to when the entity is not named) and
// decides what to do: nothing, mark it lost, keep it, or collect it.
// Only objects this cluster's operator wrote are ever acted on: an entity
// whose marker names a binding of this cluster, a role whose role ID this
// cluster chose.
func (w *pass) look(cand lostnotice.Candidate) error {
	// Never beside the binding controller's own run on this entity: a
	// binding taking its lost objects back, and this look marking or
	// deleting them, each read and write alone.
	unlock := w.c.Notices.Lock(w.key, cand.Entity)
	defer unlock()
	s, err := w.read(cand)
	if err != nil || s == nil {
		return err
	}
	return w.judge(s)
}

// lookSwept is look for a sweep's candidate: a role is read alone (its
// role ID), and which entity its logins lead to comes from the sweep's
// LIST of the entities, not from a lookup. A role linked to an entity a
// live binding accounts for is that binding's; one linked to another
// entity is looked at with it (its marker may have been wiped: the role
// then tells); one whose alias is on none has no entity.
func (w *pass) lookSwept(cand lostnotice.Candidate) error {
	if cand.Entity != "" || w.st.aliases == nil {
		return w.look(cand)
	}
	mount, role := strings.Trim(cand.Mount, "/"), strings.ToLower(cand.Role)
	roleID, err := w.vc.ReadRoleID(w.ctx, mount, role)
	if err != nil {
		return fmt.Errorf("reading the role ID of AppRole %s/%s: %w", mount, role, err)
	}
	if roleID == "" || !ownership.ProveRoleID(roleID, w.c.ClusterID, ownership.RolePlace{Mount: mount, Role: role}).Cluster {
		return nil // gone, or not a role this cluster's operator made
	}
	acc, err := w.vc.MountAccessor(w.ctx, mount)
	if err != nil {
		return fmt.Errorf("reading the accessor of auth/%s: %w", mount, err)
	}
	entity, linked := w.st.aliases[aliasKey(acc, roleID)]
	switch {
	case linked && entity == "":
		return nil // a live binding's entity holds it
	case linked:
		cand.Entity = entity
		return w.look(cand)
	}
	return w.judge(&seen{conn: cand.Connection, mount: mount, role: role, roleID: roleID})
}

// lookAgain reads a lost minion afresh before its collection.
func (w *pass) lookAgain(m *lostMinion) error {
	cand := lostnotice.Candidate{Vault: w.key, Connection: w.connOf(m).Name, Entity: m.entity}
	for _, r := range m.roles {
		if r.name != "" {
			cand.Mount, cand.Role = r.mount, r.name
			break
		}
	}
	unlock := w.c.Notices.Lock(w.key, cand.Entity)
	defer unlock()
	s, err := w.read(cand)
	if err != nil {
		return err
	}
	if s == nil || (m.owner.UID != "" && !(s.named && s.owner.Same(m.owner))) {
		// Taken back (the marker rewritten), or gone from Vault.
		w.forget(lostKey(m.owner, cand.Mount, cand.Role), m)
		return nil
	}
	return w.judge(s)
}

// read makes a look's reads; nil when nothing there is this cluster's.
func (w *pass) read(cand lostnotice.Candidate) (*seen, error) {
	s := &seen{conn: cand.Connection, mount: strings.Trim(cand.Mount, "/"), role: strings.ToLower(cand.Role)}
	var err error
	if cand.Entity != "" {
		if s.entity, err = w.vc.ReadEntityByName(w.ctx, cand.Entity); err != nil {
			return nil, fmt.Errorf("reading entity %s: %w", cand.Entity, err)
		}
	}
	if s.role != "" {
		if s.roleID, err = w.vc.ReadRoleID(w.ctx, s.mount, s.role); err != nil {
			return nil, fmt.Errorf("reading the role ID of AppRole %s/%s: %w", s.mount, s.role, err)
		}
	}
	chosen := s.roleID != "" && ownership.ProveRoleID(s.roleID, w.c.ClusterID, ownership.RolePlace{Mount: s.mount, Role: s.role}).Cluster
	if s.entity == nil && chosen {
		// Whose login the role leads to: the entity holding its alias.
		acc, err := w.vc.MountAccessor(w.ctx, s.mount)
		if err != nil {
			return nil, fmt.Errorf("reading the accessor of auth/%s: %w", s.mount, err)
		}
		if acc != "" {
			if s.entity, err = w.vc.LookupEntityByAlias(w.ctx, s.roleID, acc); err != nil {
				return nil, fmt.Errorf("looking up the entity of AppRole %s/%s's role ID: %w", s.mount, s.role, err)
			}
		}
	}
	if s.entity == nil {
		if !chosen {
			return nil, nil // no role this cluster's operator made
		}
		return s, nil
	}
	o, ok := ownership.ParseMarker(s.entity.Metadata[ownership.MarkerKey])
	switch {
	case ok && o.Cluster == w.c.ClusterID:
		s.owner, s.named = o, true
		return s, nil
	case ok:
		return nil, nil // another cluster's: never touched
	case chosen && aliasOf(s.entity, s.roleID):
		// Its marker wiped or edited (a Salt master's sync_entities
		// replaced the metadata map), linked to a role this cluster made:
		// the minion's entity still, whose binding only the role ID can
		// tell (as a binding proves a wiped marker by its linked role).
		return s, nil
	}
	return nil, nil // unmarked: an administrator's, a Salt master's, a login's
}

// aliasOf: the entity holds an alias named roleID (on the role's mount:
// an alias name is a role ID, unique to its role).
func aliasOf(e *vault.Entity, roleID string) bool {
	return slices.ContainsFunc(e.Aliases, func(a vault.Alias) bool { return a.Name == roleID })
}

// judge decides on what a look read and acts.
func (w *pass) judge(s *seen) error {
	holder, back, err := w.holder(s)
	if err != nil {
		return err
	}
	key := lostKey(s.owner, s.mount, s.role)
	m := w.st.lost[key]
	if m == nil {
		m = &lostMinion{owner: s.owner}
	}
	if s.conn != "" && (m.conn == "" || s.conn != w.conn.Name) {
		m.conn = s.conn // a binding's deletion or a claimant names it
	}
	if holder == ownership.HolderGone && back != nil && !settledElsewhere(back, s.entity) {
		// The binding is back under its name (a restore): its reconcile
		// takes the objects back; marking them now would only be one more
		// write to undo.
		w.forget(key, m)
		return nil
	}
	f := ownership.LostFacts{Holder: holder, Window: w.c.Window, Now: w.now, Release: s.owner.UID != "" && w.release[s.owner.UID]}
	if e := s.entity; e != nil {
		m.entity = e.Name
	}
	if s.named {
		f.Retained = s.entity.Metadata[ownership.RetainedKey] != ""
		f.Lost, _ = ownership.LostSince(s.entity.Metadata)
	} else {
		// No marker names its binding, so none carries the mark (its entity
		// gone or wiped): the window runs from when this process found it.
		if m.since.IsZero() {
			m.since = w.now
		}
		f.Lost = m.since
	}
	if err := w.roles(s, m); err != nil {
		return err
	}
	v := ownership.DecideLost(f)
	switch v.Decision {
	case ownership.LostNone:
		w.forget(key, m)
		return nil
	case ownership.LostMark:
		return w.mark(key, m, s.entity, v.Until)
	case ownership.LostKeep:
		m.retained, m.until = f.Retained, v.Until
		w.keep(key, m)
		return nil
	}
	return w.collect(key, m, s, f.Release)
}

// holder is what the API server says of the binding that wrote the
// objects: asked past the cache unless the cache has it alive with its
// UID (a collection is never decided from the cache), with the binding
// created again under its name (another UID), if there is one. A role
// whose entity is gone names no binding: it is a gone binding's when no
// claimant of its minion ID is the one its role ID was chosen for, and the
// operator sees every binding.
func (w *pass) holder(s *seen) (ownership.HolderState, *v1alpha1.MinionBinding, error) {
	if !s.named {
		place := ownership.RolePlace{Mount: s.mount, Role: s.role}
		list := &v1alpha1.MinionBindingList{}
		if err := w.c.List(w.ctx, list, client.MatchingFields{watch.MinionIDIndex: s.role}, client.UnsafeDisableDeepCopy); err != nil {
			return 0, nil, err
		}
		proof := ownership.ProveRoleID(s.roleID, w.c.ClusterID, place)
		for i := range list.Items {
			b := &list.Items[i]
			if proof.For(ownership.Owner{Cluster: w.c.ClusterID, Namespace: b.Namespace, Name: b.Name}, false) {
				return ownership.HolderLive, nil, nil
			}
		}
		if !w.c.SeesAllBindings {
			return ownership.HolderUnknown, nil, nil
		}
		return ownership.HolderGone, nil, nil
	}
	b := &v1alpha1.MinionBinding{}
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: s.owner.Namespace, Name: s.owner.Name}, b); err == nil && string(b.UID) == s.owner.UID {
		if !b.DeletionTimestamp.IsZero() {
			return ownership.HolderDeleting, nil, nil
		}
		return ownership.HolderLive, nil, nil // the cache is enough to leave it alone
	}
	reader := w.c.APIReader
	if reader == nil {
		reader = w.c.Client
	}
	return lostnotice.HolderOf(w.ctx, reader, s.owner)
}

// settledElsewhere: the binding created again under the lost one's name
// is Ready for its spec with another entity than e: it renders other
// objects now and will never take these back, so they are lost after all.
func settledElsewhere(back *v1alpha1.MinionBinding, e *vault.Entity) bool {
	ready := apimeta.FindStatusCondition(back.Status.Conditions, v1alpha1.ReadyCondition)
	settled := ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == back.Generation
	return settled && back.Status.Entity != nil && (e == nil || !strings.EqualFold(back.Status.Entity.Name, e.Name))
}

// roles records the lost minion's roles: the look's own (when its role ID
// is the one the entity's alias names, or was chosen for the binding's
// name), and those its entity's aliases name on the mounts the sweep
// listed (found by their role ID, which names its role among them).
func (w *pass) roles(s *seen, m *lostMinion) error {
	if s.role != "" && s.roleID != "" && w.linked(s, s.mount, s.role, s.roleID) {
		m.addRole(roleRef{mount: s.mount, name: s.role, roleID: s.roleID})
	}
	if s.entity == nil {
		return nil
	}
	for _, a := range s.entity.Aliases {
		mount, err := w.mountPath(a.MountAccessor)
		if err != nil {
			return err
		}
		if _, managed := w.st.roles[mount]; mount == "" || !managed {
			continue // not an AppRole mount the operator writes to: a login's
		}
		ref := roleRef{mount: mount, roleID: a.Name}
		for _, n := range w.st.roles[mount] {
			if ownership.ProveRoleID(a.Name, w.c.ClusterID, ownership.RolePlace{Mount: mount, Role: n}).For(s.owner, false) {
				ref.name = n
				break
			}
		}
		m.addRole(ref)
	}
	return nil
}

// linked: the role (with roleID) is the lost minion's: its role ID was
// chosen for the binding's name, or its logins lead to the entity.
func (w *pass) linked(s *seen, mount, role, roleID string) bool {
	proof := ownership.ProveRoleID(roleID, w.c.ClusterID, ownership.RolePlace{Mount: mount, Role: role})
	if !s.named {
		return proof.Cluster
	}
	if proof.For(s.owner, false) {
		return true
	}
	for _, a := range s.entity.Aliases {
		if a.Name == roleID {
			return true
		}
	}
	return false
}

// mark writes LostKey into the entity: the restore window starts now.
func (w *pass) mark(key string, m *lostMinion, e *vault.Entity, until time.Time) error {
	md := maps.Clone(e.Metadata)
	md[ownership.LostKey] = ownership.LostValue(w.now)
	ctrl.LoggerFrom(w.ctx).Info("Marking a lost minion's entity", "binding", m.whose(), "entity", e.Name)
	if _, err := w.vc.WriteEntityByName(w.ctx, e.Name, md); err != nil {
		return fmt.Errorf("marking entity %s lost: %w", e.Name, err)
	}
	m.until, m.retained = until, false
	w.keep(key, m)
	conn := w.connOf(m)
	outcome.EmitRelated(w.c.Recorder, conn, m.related(), "Warning", "MinionLost", "Sweep",
		"%s is gone without its deletion having run: its %s are kept in Vault for it coming back under its name until %s, then deleted; "+
			"to delete them now: kubectl annotate vaultconnection %s %s=%s",
		m.whose(), m.describe(), ownership.LostValue(until), conn.Name, v1alpha1.CollectAnnotation, m.owner.UID)
	w.wake(m)
	return nil
}

// keep records a lost or retained minion kept for its binding.
func (w *pass) keep(key string, m *lostMinion) {
	if _, known := w.st.lost[key]; !known {
		w.st.lost[key] = m
		w.c.gauge(w)
	}
}

// forget drops a minion that is not lost (any more): taken back, or gone.
func (w *pass) forget(key string, m *lostMinion) {
	if _, known := w.st.lost[key]; known {
		delete(w.st.lost, key)
		w.c.gauge(w)
		w.wake(m)
	}
}

// wake enqueues the claimants of the minion's IDs.
func (w *pass) wake(m *lostMinion) {
	for _, id := range m.minionIDs() {
		w.c.Notices.Wake(id)
	}
}
