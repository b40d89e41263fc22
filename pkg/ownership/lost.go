package ownership

import "time"

// The lifecycle of a minion's objects in Vault, after Kubernetes' own for
// a PersistentVolume whose claim is gone:
//
//   - bound: its binding exists and holds it;
//   - released: its binding was deleted and its finalizer ran: with
//     deletionPolicy Delete the objects are gone; with Retain they are
//     kept (RetainedKey) for that binding coming back, until an
//     administrator releases them;
//   - lost: its binding is gone and its finalizer never ran (stripped, its
//     namespace force-deleted, etcd restored): the objects are kept
//     (LostKey) for that binding coming back, for a restore window;
//   - collected: the window ended, or an administrator asked: the operator
//     deletes them as a deletion would (the role first, so that Vault
//     destroys its secret IDs; then the entity, so that the tokens of its
//     logins stop working), and only then may another binding create the
//     minion afresh.
//
// No claimant is ever handed a lost or retained minion's objects.

// LostFacts is what the operator read about a minion whose objects carry
// the owner marker of a binding of this cluster.
type LostFacts struct {
	// Holder is what the API server says of the binding the marker names.
	Holder HolderState
	// Retained: the entity is marked RetainedKey.
	Retained bool
	// Lost is the entity's LostKey (zero: not marked, or unreadable).
	Lost time.Time
	// Window is the restore window; Now the time of the decision.
	Window time.Duration
	Now    time.Time
	// Release: a cluster administrator asked for it to be collected now
	// (it is lost or retained).
	Release bool
}

// LostDecision is what the operator does with such a minion.
type LostDecision int

const (
	// LostNone: it is not lost (its binding exists, is being deleted, or
	// cannot be asked about): nothing to do.
	LostNone LostDecision = iota
	// LostMark: lost, not marked yet: write LostKey (now) into the entity;
	// the restore window starts.
	LostMark
	// LostKeep: lost or retained, kept for its binding (until Until when
	// lost; until an administrator releases it when retained).
	LostKeep
	// LostCollect: delete the minion's role, then its entity.
	LostCollect
)

func (d LostDecision) String() string {
	return [...]string{"none", "mark", "keep", "collect"}[d]
}

// LostVerdict is a LostDecision and, for LostKeep of a lost minion and
// LostMark, when the window ends.
type LostVerdict struct {
	Decision LostDecision
	Until    time.Time
}

// DecideLost says what to do with a minion whose binding may be gone.
// Only a holder the API server says is gone (no binding of that UID) is
// ever collected: one that exists, is being deleted, or cannot be asked
// about (another cluster, a binding the operator may not read) is left
// alone. A binding created again under the holder's name is another UID:
// the holder is gone, and the new binding takes the objects back at its
// next reconcile (rewriting the marker, which ends the loss); one that
// renders other objects never does, and they are collected.
func DecideLost(f LostFacts) LostVerdict {
	switch {
	case f.Holder != HolderGone:
		return LostVerdict{Decision: LostNone}
	case f.Release:
		return LostVerdict{Decision: LostCollect}
	case f.Retained:
		return LostVerdict{Decision: LostKeep}
	case f.Lost.IsZero():
		return LostVerdict{Decision: LostMark, Until: f.Now.Add(f.Window)}
	}
	until := f.Lost.Add(f.Window)
	if !f.Now.Before(until) {
		return LostVerdict{Decision: LostCollect, Until: until}
	}
	return LostVerdict{Decision: LostKeep, Until: until}
}
