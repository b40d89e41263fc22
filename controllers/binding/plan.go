package binding

import (
	"strings"
	"time"

	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A binding's Vault objects are brought to what it renders in three steps,
// as CloudNativePG manages its roles (evaluateNextRoleActions, then
// applyRoleActions): observe reads everything once, planBinding decides
// with no side effect, execute applies the actions in order. `minionvault
// plan` runs the first two and prints the actions, so the plan is what the
// reconciler does, decided by the same code.

type actionKind string

const (
	actCreate actionKind = "create"
	actUpdate actionKind = "update"
	actDelete actionKind = "delete"
	// actTake makes an object the binding's: an entity gets the owner
	// marker; a role is linked to the binding's entity (the alias actions
	// that follow do it: a role's take itself makes no call).
	actTake actionKind = "take"
	// actRetain marks an entity left by deletionPolicy Retain as kept for
	// the binding (ownership.RetainedKey).
	actRetain actionKind = "retain"
)

type objectKind string

const (
	objEntity objectKind = "entity"
	objAlias  objectKind = "entity-alias"
	objRole   objectKind = "approle-role"
)

// vaultCall is the Vault request an action makes.
type vaultCall int

const (
	callNone vaultCall = iota
	callWriteEntity
	callDeleteEntity
	callCreateAlias
	callUpdateAlias
	callDeleteAlias
	callWriteRole
	callDeleteRole
)

// vaultAction is one step of a binding's plan.
type vaultAction struct {
	kind   actionKind
	object objectKind
	call   vaultCall
	// what names the object for events and logs, why says why it is
	// written.
	what, why string
	// drift: nothing changed on the binding's side since its last apply,
	// so this difference was made in Vault by someone else.
	drift bool
	// held: drift in detect-only mode, reported and not written.
	held bool
	// place is where the action applies: 0 the binding's current
	// placement, i > 0 the stale placement observed.places[i-1].
	place int

	mount, name string // role: mount and name; entity: name
	metadata    map[string]string
	params      map[string]any
	// before is what Vault holds now (shown by plan).
	before any
	// Alias fields. entityID "" on a create: the entity this plan creates
	// (the executor carries its ID forward).
	aliasID, aliasName, accessor, entityID string
	// roleID: a role created under the role ID its alias is named by.
	roleID string
}

// path is the Vault API path the action writes, as Vault's audit log names it.
func (a vaultAction) path() string {
	switch a.call {
	case callWriteEntity, callDeleteEntity:
		return "identity/entity/name/" + a.name
	case callCreateAlias:
		return "identity/entity-alias"
	case callUpdateAlias, callDeleteAlias:
		return "identity/entity-alias/id/" + a.aliasID
	}
	if a.object == objRole {
		return "auth/" + strings.Trim(a.mount, "/") + "/role/" + strings.ToLower(a.name)
	}
	return ""
}

// writes reports whether the action makes a Vault request.
func (a vaultAction) writes() bool { return a.call != callNone && !a.held }

// planMode is what the plan depends on besides Vault's state.
type planMode struct {
	// unchanged: the binding renders what it rendered at its last
	// successful apply; any difference now is drift.
	unchanged  bool
	detectOnly bool
	adopt      bool
	// window is the restore window of a lost holder, for the message of
	// a claimant that waits for it.
	window time.Duration
	// newRoleID is the role ID of a role created now (chosen by the
	// operator, so that the alias can be named by it before the role
	// exists).
	newRoleID string
}

// planBinding decides, with no side effect, what brings the observed
// Vault to what res renders: the entity, then the alias and role (a new
// role's alias first, so that a crash leaves only objects proven the
// binding's), then the removals at the stale placements. It returns
// ErrRefused when the objects are someone else's and errInvalidInput when
// the rendering cannot be stored: nothing may be written then.
func planBinding(res *render.Result, o *observed, mode planMode) (bindingPlan, error) {
	d, err := decide(o, mode.adopt, mode.window)
	if err != nil {
		return bindingPlan{}, err
	}
	desired, err := ownership.Metadata(entityMetadata(o.entity), res.EntityMetadata, o.proof.self)
	if err != nil {
		return bindingPlan{}, &outcome.ErrInvalidInput{Err: err}
	}
	p := &planner{mode: mode}
	if !p.entity(res.EntityName, d.entity, o, desired) {
		return bindingPlan{actions: p.actions, decided: d}, nil // detect-only, and nothing to link a role to
	}
	p.role(res, d.role.Decision, o, o.entity)
	plan := planRemovals(o.places, o.proof)
	plan.actions = append(p.actions, plan.actions...)
	plan.decided = d
	return plan, nil
}

// bindingPlan is the ordered actions, and the objects at stale placements
// left because Vault does not prove them the binding's (with why).
type bindingPlan struct {
	actions  []vaultAction
	notOwned []string
	// decided is what the plan decided for the entity and the role at
	// the current placement.
	decided decisions
	// newRoleID is the role ID a role created now gets.
	newRoleID string
}

// establishes: the plan creates or takes the binding's entity or role at
// its current placement (not only updates what it holds).
func (p bindingPlan) establishes() bool {
	for _, a := range p.actions {
		if a.place == 0 && a.object != objAlias && (a.kind == actCreate || a.kind == actTake) && !a.held {
			return true
		}
	}
	return false
}

// at returns the actions at one place (0: the current placement).
func (p bindingPlan) at(place int) []vaultAction {
	var out []vaultAction
	for _, a := range p.actions {
		if a.place == place {
			out = append(out, a)
		}
	}
	return out
}

type planner struct {
	mode    planMode
	actions []vaultAction
}

// add appends a, flagged as drift when nothing changed on the binding's
// side; it returns false when the action is held (detect-only).
func (p *planner) add(a vaultAction) bool {
	if p.mode.unchanged {
		a.drift = true
		a.held = p.mode.detectOnly
	}
	p.actions = append(p.actions, a)
	return !a.held
}

// entity plans the entity's create, take over or update; false when a
// create is held.
func (p *planner) entity(name string, v ownership.Verdict, o *observed, desired map[string]string) bool {
	a := vaultAction{object: objEntity, call: callWriteEntity, what: "entity " + name, name: name, metadata: desired}
	switch {
	case v.Decision == ownership.Create:
		a.kind, a.why = actCreate, "entity does not exist"
		return p.add(a)
	case v.Decision == ownership.Take && !o.entityProven:
		a.kind, a.why, a.before = actTake, "taken over from "+o.entityClaim.Describe(), o.entity.Metadata
		if o.linkedRole && o.entityClaim.Holder != ownership.HolderSelf {
			// Another writer removed the proof (a Salt master replaced the
			// metadata map): writing it back is a correction like any
			// other, reported and counted as drift. It is never held, even
			// in detect-only mode: without it the minion is nobody's.
			a.why = "its owner marker was removed or edited; the role linked to it proves it this binding's"
			a.drift = true
		}
		p.actions = append(p.actions, a)
	default:
		if differs, why := metadataDiffers(desired, o.entity.Metadata); differs {
			a.kind, a.why, a.before = actUpdate, why, o.entity.Metadata
			p.add(a)
		}
	}
	return true
}

// role plans the role: created under a new role ID with its alias named
// by it first, or taken over, linked and brought to the rendering. entity
// is the binding's entity as it will be before the role's actions (nil:
// created by this plan).
func (p *planner) role(res *render.Result, d ownership.Decision, o *observed, entity *vault.Entity) {
	mount, name := res.AppRole.Mount, res.AppRole.RoleName
	what := "AppRole " + mount + "/" + name
	params := roleParams(res.AppRole.Params)
	entityID := ""
	if entity != nil {
		entityID = entity.ID
	}
	if d == ownership.Create {
		params["role_id"] = p.mode.newRoleID
		role := vaultAction{kind: actCreate, object: objRole, call: callWriteRole, what: what, why: "role does not exist",
			mount: mount, name: name, params: params, roleID: p.mode.newRoleID}
		if p.mode.unchanged && p.mode.detectOnly {
			p.add(role)
			return
		}
		// A role deleted by hand comes back with a new role ID, like a
		// role Vault re-created: the entity's alias on the mount is renamed.
		alias := vaultAction{kind: actCreate, object: objAlias, what: "entity alias " + p.mode.newRoleID, why: "linking the new role",
			aliasName: p.mode.newRoleID, accessor: o.accessor, entityID: entityID}
		if onMount := aliasOn(entity, o.accessor); onMount != nil {
			alias.kind, alias.call, alias.aliasID, alias.before = actUpdate, callUpdateAlias, onMount.ID, onMount.Name
		} else {
			alias.call = callCreateAlias
		}
		p.actions = append(p.actions, alias)
		p.add(role)
		return
	}
	if d == ownership.Take {
		p.actions = append(p.actions, vaultAction{kind: actTake, object: objRole, what: what, why: "linked to the binding's entity", mount: mount, name: name})
	}
	p.alias(mount, o, entity, entityID)
	if o.roleKnown {
		return
	}
	if differs, why := roleDiffers(res.AppRole.Params, o.role); differs {
		p.add(vaultAction{kind: actUpdate, object: objRole, call: callWriteRole, what: what, why: why,
			mount: mount, name: name, params: params, before: shownParams(o.role, params)})
	}
}

// alias links the entity to the role's logins: an alias named by the role
// ID on the mount. Vault keeps one alias per entity and mount, and one per
// name and mount: the entity's alias on the mount is renamed when the role
// was re-created; when a minion's login got an alias of that name on an
// entity Vault made up for it, our stale alias goes and that one is moved
// here (a create of an existing name moves it).
func (p *planner) alias(mount string, o *observed, entity *vault.Entity, entityID string) {
	onMount := aliasOn(entity, o.accessor)
	a := vaultAction{object: objAlias, what: "entity alias " + o.roleID, aliasName: o.roleID, accessor: o.accessor, entityID: entityID}
	switch {
	case onMount != nil && onMount.Name == o.roleID:
	case onMount != nil && o.aliasHolder != nil:
		drop := a
		drop.kind, drop.call, drop.aliasID, drop.before = actDelete, callDeleteAlias, onMount.ID, onMount.Name
		drop.why = "a login holds the alias " + o.roleID + " on another entity; the entity's alias " + onMount.Name + " is stale"
		if p.add(drop) {
			a.kind, a.call, a.why = actCreate, callCreateAlias, "moving the login's alias to the minion's entity"
			p.actions = append(p.actions, a)
		}
	case onMount != nil:
		a.kind, a.call, a.aliasID, a.before = actUpdate, callUpdateAlias, onMount.ID, onMount.Name
		a.why = "the entity's alias on " + mount + " is " + onMount.Name + "; the role's ID is now " + o.roleID + " (the role was re-created)"
		p.add(a)
	default:
		a.kind, a.call, a.why = actCreate, callCreateAlias, "the entity has no alias on "+mount
		p.add(a)
	}
}

// shownParams are the role's current values of the parameters written
// (Vault returns many more).
func shownParams(actual, params map[string]any) map[string]any {
	if actual == nil {
		return nil
	}
	out := map[string]any{}
	for k := range params {
		if v, ok := actual[k]; ok {
			out[k] = v
		}
	}
	return out
}

// aliasOn returns the entity's alias on the mount with accessor, if any
// (Vault keeps at most one per entity and mount).
func aliasOn(e *vault.Entity, accessor string) *vault.Alias {
	if e == nil || accessor == "" {
		return nil
	}
	for i, a := range e.Aliases {
		if a.MountAccessor == accessor {
			return &e.Aliases[i]
		}
	}
	return nil
}
