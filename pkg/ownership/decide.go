package ownership

import "fmt"

// Decision is what the operator may do with one Vault object of a binding.
type Decision int

const (
	// Create: the object does not exist; create it (an entity with the
	// marker, a role with the role ID of the binding's alias).
	Create Decision = iota
	// Keep: the object is the binding's, proven.
	Keep
	// Take: the object becomes the binding's now: an entity gets the
	// marker written (the previous release's own entity, an adopted one, or
	// one whose holder in this cluster is gone); a role gets linked to the
	// binding's entity (its alias renamed or moved to the role's role ID).
	Take
	// Wait: the holder of the minion in this cluster is being deleted; its
	// finalizer is removing the objects.
	Wait
	// Refuse: the object is someone else's; nothing is written.
	Refuse
)

func (d Decision) String() string {
	return [...]string{"create", "keep", "take", "wait", "refuse"}[d]
}

// HolderState is what the API server says of the binding a marker names,
// when it is in this cluster.
type HolderState int

const (
	// HolderUnknown: not looked up (another cluster, or no marker).
	HolderUnknown HolderState = iota
	// HolderLive: it exists with the marker's UID.
	HolderLive
	// HolderDeleting: it exists and is being deleted.
	HolderDeleting
	// HolderGone: no binding of that name and UID exists any more.
	HolderGone
)

// EntityFacts is what the controller read about the entity a binding
// renders.
type EntityFacts struct {
	Name  string
	Claim Claim
	// ProvenByStatus: the entity is unmarked and its ID is the one the
	// operator's previous release recorded in the binding's status (which
	// only the operator may write): that release's own entity.
	ProvenByStatus bool
	// Holder: for a marker naming another binding of this cluster.
	Holder HolderState
	// Adopt: the template's adoptMinions rule.
	Adopt bool
}

// DecideEntity says what may be done with the binding's entity, and why
// when the answer is Wait or Refuse.
func DecideEntity(f EntityFacts) (Decision, string) {
	switch f.Claim.Holder {
	case HolderNone:
		return Create, ""
	case HolderSelf:
		return Keep, ""
	case HolderUnmarked:
		if f.ProvenByStatus || f.Adopt {
			return Take, ""
		}
		return Refuse, fmt.Sprintf("entity %s exists in Vault and was not created by the operator for this MinionBinding (it has no %s marker); set adoptMinions on the MinionTemplate to take it over", f.Name, MarkerKey)
	}
	return decideOther(f.Holder, fmt.Sprintf("entity %s", f.Name), f.Claim)
}

// decideOther handles an object held by another binding: in this cluster a
// holder that is gone hands over, one being deleted is waited for; anything
// else (a live holder, another cluster, an unreadable marker) refuses.
func decideOther(h HolderState, what string, c Claim) (Decision, string) {
	switch h {
	case HolderGone:
		return Take, ""
	case HolderDeleting:
		return Wait, fmt.Sprintf("%s belongs to %s, which is being deleted", what, c.Describe())
	}
	return Refuse, fmt.Sprintf("%s belongs to %s", what, c.Describe())
}

// RoleFacts is what the controller read about the binding's AppRole role
// (named by the minion ID) on the rendered mount.
type RoleFacts struct {
	Mount, Name string
	Exists      bool
	// RoleID is the role's role ID, when it exists.
	RoleID string
	// Alias: who holds the entity alias named RoleID on the mount (the
	// link from a login with this role to an entity): HolderSelf when it
	// is on an entity marked for this binding.
	Alias Claim
	// Holder: for an alias on another binding's entity in this cluster.
	Holder HolderState
	// SlotHeld: the binding's entity has an alias on the mount already,
	// named otherwise: the binding held a role of this name there, which
	// was deleted and created again since (by hand, or re-created by a
	// restore). The minion ID is the binding's: the role is re-linked.
	SlotHeld bool
	// ProvenByStatus: the role ID is the one the operator's previous
	// release recorded in the binding's status.
	ProvenByStatus bool
	Adopt          bool
}

// DecideRole says what may be done with the binding's role: a role is the
// binding's only while it is linked to the binding's marked entity, or when
// it is created now.
func DecideRole(f RoleFacts) (Decision, string) {
	if !f.Exists {
		return Create, ""
	}
	what := fmt.Sprintf("AppRole role %s/%s", f.Mount, f.Name)
	switch f.Alias.Holder {
	case HolderSelf:
		return Keep, ""
	case HolderOther:
		return decideOther(f.Holder, what+" (its role ID's entity alias)", f.Alias)
	}
	// Nobody's login links the role, or only an unmarked entity (a login
	// made it up, or a Salt master).
	if f.SlotHeld || f.ProvenByStatus || f.Adopt {
		return Take, ""
	}
	return Refuse, fmt.Sprintf("%s exists in Vault and is not linked to an entity of this MinionBinding; set adoptMinions on the MinionTemplate to take it over", what)
}

// Deletable says whether an object may be deleted for a binding being
// deleted or moved: only what is proven its own.
func Deletable(c Claim, provenByStatus bool) bool {
	return c.Holder == HolderSelf || (c.Holder == HolderUnmarked && provenByStatus)
}
