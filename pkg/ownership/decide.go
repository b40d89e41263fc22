package ownership

import (
	"fmt"
	"time"
)

// Decision is what the operator may do with one Vault object of a binding.
type Decision int

const (
	// Create: the object does not exist; create it (an entity with the
	// marker, a role with a role ID that proves it the binding's).
	Create Decision = iota
	// Keep: the object is the binding's, proven.
	Keep
	// Take: the object becomes the binding's now, keeping what it holds:
	// an entity gets the marker written (the binding's earlier
	// incarnation's, the previous release's, one whose marker was wiped
	// while its role proves it ours, or an adopted one); a role gets
	// linked to the binding's entity (its alias renamed or moved to the
	// role's role ID).
	Take
	// Wait: the holder of the minion in this cluster is being deleted
	// (its finalizer is removing the objects), or it is lost and its
	// objects are kept for it until its restore window ends (then the
	// operator collects them, and the minion ID is free).
	Wait
	// Refuse: the object is someone else's; nothing is written.
	Refuse
)

func (d Decision) String() string {
	return [...]string{"create", "keep", "take", "wait", "refuse"}[d]
}

// Reason is why a decision is Wait or Refuse.
type Reason int

const (
	ReasonNone Reason = iota
	// ReasonNotOwned: nothing of the operator's marks the object.
	ReasonNotOwned
	// ReasonConflict: another binding (of this cluster or another) holds
	// it.
	ReasonConflict
	// ReasonDuplicate: another binding that claims the minion ID comes
	// first.
	ReasonDuplicate
	// ReasonReleasing: its holder is being deleted.
	ReasonReleasing
	// ReasonRetained: its holder was deleted with deletionPolicy Retain;
	// it is kept for that binding.
	ReasonRetained
	// ReasonLost: its holder is gone without its deletion having run; it
	// is kept for that binding coming back until its restore window ends.
	ReasonLost
)

// Verdict is a decision and, for Wait and Refuse, why.
type Verdict struct {
	Decision
	Reason Reason
	Why    string
	// Until is when a Wait for a lost holder ends (zero: not known yet,
	// the loss is not marked in Vault).
	Until time.Time
}

func refuse(r Reason, format string, args ...any) Verdict {
	return Verdict{Decision: Refuse, Reason: r, Why: fmt.Sprintf(format, args...)}
}

// HolderState is what the API server says of the binding a claim names,
// when it is in this cluster.
type HolderState int

const (
	// HolderUnknown: not looked up (another cluster, an owner that cannot
	// be named, or no claim).
	HolderUnknown HolderState = iota
	// HolderLive: it exists with the claim's UID.
	HolderLive
	// HolderDeleting: it exists and is being deleted.
	HolderDeleting
	// HolderGone: no binding of that name and UID exists any more.
	HolderGone
)

// Rivals is what the cluster says of the other bindings that claim the
// minion ID (the admission gate's claim order).
type Rivals struct {
	// Ahead names the claimant that comes first in the claim order, when
	// it is not this binding and has written nothing yet: this binding
	// may then only keep or take back what Vault proves its own (it is
	// the binding the objects were written for, coming back).
	Ahead *Owner
	// Others are the other claimants.
	Others []Owner
}

// named returns the claimant with o's namespace and name in o's cluster:
// the binding o was, created again.
func (r Rivals) named(o Owner) (Owner, bool) {
	for _, c := range r.Others {
		if c.SameName(o) {
			return c, true
		}
	}
	return Owner{}, false
}

func (r Rivals) aheadVerdict(what string) Verdict {
	return refuse(ReasonDuplicate, "%s: MinionBinding %s/%s claims the minion ID first", what, r.Ahead.Namespace, r.Ahead.Name)
}

// EntityFacts is what the controller read about the entity a binding
// renders.
type EntityFacts struct {
	Name  string
	Claim Claim
	// ProvenByStatus: the entity is unmarked and its ID is the one the
	// operator's previous release recorded in the binding's status (which
	// only the operator may write): that release's own entity.
	ProvenByStatus bool
	// LinkedRole: the entity holds the alias of the binding's role, whose
	// role ID proves it the binding's: a marker wiped or edited by hand is
	// the binding's own entity still.
	LinkedRole bool
	// Holder: for a claim naming another binding of this cluster.
	Holder HolderState
	// Adopt: the template's adoptMinions rule.
	Adopt  bool
	Rivals Rivals
	// Window is the restore window of a lost holder (LostKey).
	Window time.Duration
}

// DecideEntity says what may be done with the binding's entity.
func DecideEntity(f EntityFacts) Verdict {
	what := "entity " + f.Name
	c := f.Claim
	switch {
	case c.Holder == HolderNone && f.Rivals.Ahead != nil:
		return f.Rivals.aheadVerdict(what)
	case c.Holder == HolderNone:
		return Verdict{Decision: Create}
	case c.Holder == HolderSelf && c.Previous:
		return Verdict{Decision: Take}
	case c.Holder == HolderSelf:
		return Verdict{Decision: Keep}
	case c.Holder == HolderUnmarked && (f.ProvenByStatus || f.LinkedRole),
		edited(c) && f.LinkedRole:
		// Its marker was wiped or edited; status or the role proves it ours.
		return Verdict{Decision: Take}
	case c.Holder == HolderUnmarked && f.Rivals.Ahead != nil:
		return f.Rivals.aheadVerdict(what)
	case c.Holder == HolderUnmarked && f.Adopt:
		return Verdict{Decision: Take}
	case c.Holder == HolderUnmarked:
		return refuse(ReasonNotOwned, "%s exists in Vault and was not created by the operator for this MinionBinding (it has no %s marker); set adoptMinions on the MinionTemplate to take it over", what, MarkerKey)
	}
	return decideOther(f.Holder, what, c, f.Rivals, f.Window)
}

// decideOther handles an object held by another binding: in this cluster
// a holder being deleted is waited for, and one that is gone without its
// deletion is lost: its objects are kept for it (the binding it was,
// coming back under its name, takes them with their credentials) until
// its restore window ends, and then the operator collects them; objects
// retained for it are kept until an administrator releases them. No
// claimant is ever handed another binding's objects: it waits, and
// creates the minion afresh once they are gone. Anything else (a live
// holder, another cluster, an owner that cannot be named) refuses.
func decideOther(h HolderState, what string, c Claim, r Rivals, window time.Duration) Verdict {
	switch h {
	case HolderGone:
		if back, ok := r.named(c.Other); ok {
			return refuse(ReasonDuplicate, "%s belongs to %s, which was created again as MinionBinding %s/%s (uid %s): it keeps the minion",
				what, c.Describe(), back.Namespace, back.Name, back.UID)
		}
		if c.Retained {
			return refuse(ReasonRetained, "%s was retained in Vault for %s when it was deleted (deletionPolicy Retain): it is kept for that MinionBinding "+
				"coming back under its name, until a cluster administrator releases it (docs/operations.md#lost-and-retained-minions)", what, c.Describe())
		}
		if r.Ahead != nil {
			return r.aheadVerdict(what)
		}
		return lostVerdict(what, c, window)
	case HolderDeleting:
		return Verdict{Decision: Wait, Reason: ReasonReleasing, Why: fmt.Sprintf("%s belongs to %s, which is being deleted", what, c.Describe())}
	}
	return refuse(ReasonConflict, "%s belongs to %s", what, c.Describe())
}

// lostVerdict is the wait of a claimant for a lost holder's objects.
func lostVerdict(what string, c Claim, window time.Duration) Verdict {
	v := Verdict{Decision: Wait, Reason: ReasonLost}
	gone := fmt.Sprintf("%s belongs to %s, which is gone without its deletion having run (lost)", what, c.Describe())
	if c.Lost.IsZero() {
		v.Why = fmt.Sprintf("%s: it is kept for that MinionBinding coming back under its name for %s from when the operator records the loss, then collected", gone, window)
		return v
	}
	v.Until = c.Lost.Add(window)
	v.Why = fmt.Sprintf("%s since %s: it is kept for that MinionBinding coming back under its name until %s, then collected",
		gone, LostValue(c.Lost), LostValue(v.Until))
	return v
}

// RoleFacts is what the controller read about the binding's AppRole role
// (named by the minion ID) on the rendered mount.
type RoleFacts struct {
	Mount, Name string
	Exists      bool
	// RoleID is the role's role ID, when it exists.
	RoleID string
	// ID is whose the role ID says the role is (RoleIDProof): HolderSelf,
	// HolderOther (a claimant's, another cluster's, or a gone binding's of
	// this cluster), or HolderUnmarked when the operator did not choose it
	// (Vault did, for a Salt master or an administrator, or the operator's
	// previous release did): then its alias tells.
	ID       Claim
	IDHolder HolderState
	// Alias: who holds the entity alias named RoleID on the mount (the
	// link from a login with this role to an entity): HolderSelf when it
	// is on an entity marked for this binding.
	Alias Claim
	// Holder: for an alias on another binding's entity in this cluster.
	Holder HolderState
	// SlotHeld: the binding's entity has an alias on the mount already,
	// named otherwise: the binding held a role of this name there, which
	// was deleted and created again since (by hand, or by a Salt master).
	// The minion ID is the binding's: the role is re-linked.
	SlotHeld bool
	// ProvenByStatus: the role ID is the one the operator's previous
	// release recorded in the binding's status.
	ProvenByStatus bool
	Adopt          bool
	Rivals         Rivals
	// Window is the restore window of a lost holder (LostKey).
	Window time.Duration
}

// DecideRole says what may be done with the binding's role: a role is the
// binding's when its role ID proves it, when it is linked to the binding's
// marked entity, or when it is created now.
func DecideRole(f RoleFacts) Verdict {
	if !f.Exists {
		return Verdict{Decision: Create}
	}
	what := fmt.Sprintf("AppRole role %s/%s", f.Mount, f.Name)
	switch f.ID.Holder {
	case HolderSelf:
		return Verdict{Decision: Keep}
	case HolderOther:
		return decideOther(f.IDHolder, what, f.ID, f.Rivals, f.Window)
	}
	switch f.Alias.Holder {
	case HolderSelf:
		return Verdict{Decision: Keep}
	case HolderOther:
		return decideOther(f.Holder, what+" (its role ID's entity alias)", f.Alias, f.Rivals, f.Window)
	}
	// Nobody's login links the role, or only an unmarked entity (a login
	// made it up, or a Salt master).
	switch {
	case f.SlotHeld || f.ProvenByStatus:
		return Verdict{Decision: Take}
	case f.Rivals.Ahead != nil:
		return f.Rivals.aheadVerdict(what)
	case f.Adopt:
		return Verdict{Decision: Take}
	}
	return refuse(ReasonNotOwned, "%s exists in Vault and is not linked to an entity of this MinionBinding; set adoptMinions on the MinionTemplate to take it over", what)
}

// Deletable says whether an entity may be deleted for a binding being
// deleted or moved: only what is proven its own (its marker, or for an
// entity whose marker is missing or edited, status or the binding's role
// linked to it).
func Deletable(c Claim, provenByStatus, linkedRole bool) bool {
	switch c.Holder {
	case HolderSelf:
		return true
	case HolderUnmarked:
		return provenByStatus || linkedRole
	case HolderOther:
		return edited(c) && linkedRole
	}
	return false
}

// edited: a marker that cannot be read (edited by hand).
func edited(c Claim) bool {
	return c.Holder == HolderOther && c.Other.UID == "" && (c.Unnamed == "" || c.Unnamed == UnnamedEdited)
}

// RoleClaim is whose a role is by its role ID, as seen by self: its own,
// a candidate's (the other claimants of the minion ID in this cluster),
// another binding's of this cluster that is no candidate, another
// cluster's, or unmarked when the operator did not choose the role ID.
// byName: a plan of manifests, which knows no cluster, takes a role ID
// chosen for the binding's namespace and name as its own.
func RoleClaim(p RoleIDProof, self Owner, byName bool, candidates []Owner) Claim {
	switch {
	case !p.Chosen:
		return Claim{Holder: HolderUnmarked}
	case p.For(self, byName):
		return Claim{Holder: HolderSelf}
	case !p.Cluster && !byName:
		return Claim{Holder: HolderOther, Unnamed: UnnamedForeign}
	}
	for _, c := range candidates {
		if p.Cluster && p.For(c, false) {
			return Claim{Holder: HolderOther, Other: c}
		}
	}
	return Claim{Holder: HolderOther, Unnamed: UnnamedGone}
}
