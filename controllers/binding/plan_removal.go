package binding

import (
	"fmt"
	"maps"
	"time"

	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// placeObserved is what was read at a placement the binding no longer
// needs (left by a switch, or all of them when it is deleted). The record
// may have been edited by the tenant: what it names is only where to look.
type placeObserved struct {
	place ownership.Placement
	// roleStale, entityStale: the placement's role or entity is not the
	// current one (a mount switch keeps the entity, a rename the role).
	roleStale, entityStale bool
	roleName               string
	// accessor is the old mount's, "" when nothing is mounted there any
	// more (then no role or alias of it is left either).
	accessor string
	entity   *vault.Entity // the old entity (entityStale only)
	roleID   string        // the old role's (roleStale only)
	// roleProven: the old role's role ID proves it the binding's.
	roleProven bool
	// retain: the place is left in Vault (deletionPolicy Retain); only
	// its entity was read, at, to mark it retained.
	retain bool
	at     time.Time
	// roleHolder is the entity holding the alias named roleID, looked up
	// when the entities read do not link the role.
	roleHolder *vault.Entity
	// current is the binding's current entity as observed (same Vault
	// only): a mount switch leaves the old role's alias on it.
	current *vault.Entity
}

// linked: the old role's alias is on one of the entities, proven the
// binding's: the role is the binding's to delete.
func (po placeObserved) linked(pr proof, entities ...*vault.Entity) bool {
	for _, e := range entities {
		if po.holdsAlias(e) && pr.deletable(e, po.roleProven) {
			return true
		}
	}
	return false
}

// holdsAlias: the entity holds the old role's alias.
func (po placeObserved) holdsAlias(e *vault.Entity) bool {
	a := aliasOn(e, po.accessor)
	return a != nil && po.roleID != "" && a.Name == po.roleID
}

// planRemovals plans the removals at every stale placement observed; an
// action's place is its placement's index in places, plus one.
func planRemovals(places []placeObserved, pr proof) bindingPlan {
	var plan bindingPlan
	for i, po := range places {
		actions, notOwned := planRemoval(po, pr)
		for _, a := range actions {
			a.place = i + 1
			plan.actions = append(plan.actions, a)
		}
		plan.notOwned = append(plan.notOwned, notOwned...)
	}
	return plan
}

// planRetain marks the entity of a place left by deletionPolicy Retain,
// when Vault proves it the binding's and it is not marked yet: only the
// binding coming back under its name is handed it then.
func planRetain(po placeObserved, pr proof) []vaultAction {
	e := po.entity
	if !po.entityStale || e == nil || e.Metadata[ownership.RetainedKey] != "" || !pr.deletable(e, false) {
		return nil
	}
	md := maps.Clone(e.Metadata)
	md[ownership.RetainedKey] = po.at.UTC().Format(time.RFC3339)
	return []vaultAction{{kind: actRetain, object: objEntity, call: callWriteEntity, what: "entity " + po.place.Entity,
		why: "retained (deletionPolicy Retain): kept for this binding", name: po.place.Entity, metadata: md, before: e.Metadata}}
}

// planRemoval decides what to delete at a stale placement: the role first
// (its role ID proves it, or the alias of the entity deleted after it),
// then the entity, each only when Vault proves it the binding's; or, when
// the entity stays (a mount switch), its alias on the old mount. Objects
// not proven are left and named in notOwned, with why.
func planRemoval(po placeObserved, pr proof) (actions []vaultAction, notOwned []string) {
	p := po.place
	if po.retain {
		return planRetain(po, pr), nil
	}
	if po.roleStale && po.accessor != "" && po.roleID != "" {
		what := "AppRole " + p.Mount + "/" + po.roleName
		if po.roleProven || po.linked(pr, po.entity, po.current) || pr.deletable(po.roleHolder, false) {
			actions = append(actions, vaultAction{kind: actDelete, object: objRole, call: callDeleteRole, what: what,
				why: "no longer rendered", mount: p.Mount, name: po.roleName})
		} else {
			notOwned = append(notOwned, what+" (not linked to an entity of this binding)")
		}
	}
	e := po.entity
	switch {
	case po.entityStale && e == nil:
	case po.entityStale && pr.deletable(e, po.roleProven && po.holdsAlias(e)):
		actions = append(actions, vaultAction{kind: actDelete, object: objEntity, call: callDeleteEntity, what: "entity " + p.Entity,
			why: "no longer rendered", name: p.Entity, before: e.Metadata})
	case po.entityStale:
		notOwned = append(notOwned, fmt.Sprintf("entity %s (it belongs to %s)", p.Entity, pr.claim(e).Describe()))
	case po.roleStale && po.accessor != "":
		if a := aliasOn(po.current, po.accessor); a != nil {
			actions = append(actions, vaultAction{kind: actDelete, object: objAlias, call: callDeleteAlias, what: "entity alias " + a.Name,
				why: "the entity's alias on the old AppRole mount " + p.Mount, aliasID: a.ID, before: a.Name})
		}
	}
	return actions, notOwned
}
