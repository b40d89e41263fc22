package lost

import (
	"fmt"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// collect deletes a lost minion's objects as a deletion would: each role
// first (Vault destroys its secret IDs with it: the Salt master can issue
// none any more), then the entity (Vault deletes its aliases with it, and
// refuses every token of its logins). Each is read right before (the look
// that decided this read them) and deleted only while still proven the
// lost binding's: a role whose role ID was chosen for that binding's name
// or whose logins lead to its entity, an entity whose marker still names
// it. The per-minion ACL policies went when the binding did: its template
// deletes the policies no binding renders. Then the claimants are woken:
// the first of them creates the minion afresh.
func (w *pass) collect(key string, m *lostMinion, s *seen, released bool) error {
	log := ctrl.LoggerFrom(w.ctx).WithValues("binding", m.whose())
	var deleted []string
	for i, r := range m.roles {
		if r.name == "" {
			name, err := w.findRole(r)
			if err != nil {
				return err
			}
			if name == "" {
				continue // its role is gone, or was re-created (another role ID): not this minion's
			}
			m.roles[i].name, r.name = name, name
		}
		roleID, err := w.vc.ReadRoleID(w.ctx, r.mount, r.name)
		if err != nil {
			return fmt.Errorf("reading the role ID of AppRole %s/%s: %w", r.mount, r.name, err)
		}
		if roleID == "" || (roleID != r.roleID && !w.linked(s, r.mount, r.name, roleID)) {
			continue
		}
		log.Info("Collecting a lost minion's AppRole role", "mount", r.mount, "role", r.name)
		if err := w.vc.DeleteRole(w.ctx, r.mount, r.name); err != nil {
			return fmt.Errorf("deleting AppRole %s/%s: %w", r.mount, r.name, err)
		}
		deleted = append(deleted, "AppRole "+r.mount+"/"+r.name)
	}
	if s.entity != nil {
		log.Info("Collecting a lost minion's entity", "entity", s.entity.Name)
		if err := w.vc.DeleteEntityByName(w.ctx, s.entity.Name); err != nil {
			return fmt.Errorf("deleting entity %s: %w", s.entity.Name, err)
		}
		deleted = append(deleted, "entity "+s.entity.Name)
	}
	why := fmt.Sprintf("its restore window ended at %s", ownership.LostValue(m.until))
	reason := "window"
	switch {
	case released:
		why, reason = "a cluster administrator asked ("+v1alpha1.CollectAnnotation+")", "released"
		w.st.asked[m.owner.UID] = true
	case m.retained:
		why = "it was retained"
	}
	delete(w.st.lost, key)
	w.c.gauge(w)
	conn := w.connOf(m)
	if asker := w.here[w.asker[m.owner.UID]]; released && asker != nil {
		conn = asker // said where it was asked for
	}
	w.c.Metrics.LostCollected(conn.Name, reason)
	if len(deleted) == 0 {
		deleted = []string{"nothing left"}
	}
	outcome.EmitRelated(w.c.Recorder, conn, m.related(), "Normal", "MinionCollected", "Collect",
		"deleted the lost minion of %s, %s: %s; its secret IDs no longer log in and the tokens of its logins stop working",
		m.whose(), why, strings.Join(deleted, ", "))
	w.wake(m)
	return nil
}

// findRole finds the name of a lost minion's role from its role ID (an
// alias names the role ID only): among the mount's roles no live binding
// accounts for, the one with that role ID. A role ID the operator chose
// names its role by itself (roles); one Vault chose (a Salt master
// re-created the role) is read role by role, which only a collection does.
func (w *pass) findRole(r roleRef) (string, error) {
	names := w.st.roles[r.mount]
	if names == nil {
		listed, err := w.vc.ListRoles(w.ctx, r.mount)
		if err != nil {
			return "", fmt.Errorf("listing the roles of auth/%s: %w", r.mount, err)
		}
		names = listed
	}
	for _, n := range names {
		id, err := w.vc.ReadRoleID(w.ctx, r.mount, n)
		if err != nil {
			return "", fmt.Errorf("reading the role ID of AppRole %s/%s: %w", r.mount, n, err)
		}
		if id == r.roleID {
			return n, nil
		}
	}
	return "", nil
}
