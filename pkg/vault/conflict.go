package vault

import (
	"errors"
	"net/http"
	"strings"
)

// conflictMessages are the parts of Vault's 400 answers that describe
// Vault's current state rather than the request: the same request succeeds
// once the state is repaired (an alias moved or renamed, a mount enabled
// again, an entity re-created). They come from Vault 1.21's identity store
// (vault/identity_store_aliases.go, identity_store_entities.go) and the
// router, and OpenBao's policy store; conflict_test.go holds them
// verbatim.
var conflictMessages = []string{
	"already exists",                // alias for requested entity and mount accessor; alias with combination of mount accessor and name
	"already has an alias",          // an alias cannot be moved to (or renamed on) an entity that has one on the mount
	"already in use",                // entity name is already in use
	"invalid mount accessor",        // the mount was disabled (and perhaps enabled again with a new accessor)
	"not associated with an entity", // the canonical_id or the alias's entity is gone
	"invalid alias id",              // the alias was deleted meanwhile
	"invalid canonical id",          // the entity was deleted meanwhile
	"entity not found",              // idem ("entity not found from id")
	// OpenBao: the policy was written with cas_required, and a write
	// without cas is refused until an administrator clears it (openbao
	// v2.6.2 vault/policy/policy_store.go setPolicyInternal; the operator
	// sends no cas). Untested against a real server.
	"check-and-set parameter required",
}

// Conflict reports whether Vault refused a request because of its current
// state, not because of what was sent: an HTTP 400 whose message is one of
// conflictMessages, or a 404 "no handler for route" (the auth mount is not
// enabled). Such a refusal is repaired, or retried with backoff:
// it is never a reason to stop trying (Stalled), which is only for input
// that cannot succeed.
func Conflict(err error) bool {
	var ve *Error
	if !errors.As(err, &ve) || strings.HasPrefix(ve.Op, OpLogin+" ") {
		return false
	}
	if ve.StatusCode == http.StatusNotFound {
		for _, m := range ve.Messages {
			if strings.Contains(m, "no handler for route") {
				return true
			}
		}
		return false
	}
	if ve.StatusCode != http.StatusBadRequest {
		return false
	}
	for _, m := range ve.Messages {
		m = strings.ToLower(m)
		for _, c := range conflictMessages {
			if strings.Contains(m, c) {
				return true
			}
		}
	}
	return false
}

// Class is what a controller does about an error from Vault.
type Class int

const (
	// ClassTransient: Vault unreachable, 5xx, 429, 412: retry with backoff.
	ClassTransient Class = iota
	// ClassDenied: the operator's credentials or policy (401, 403, a
	// failed login): retry with backoff, and on a change of the Secret.
	ClassDenied
	// ClassConflict: Vault's state refuses the request (see Conflict):
	// repair, or retry with backoff.
	ClassConflict
	// ClassInvalid: the request itself is refused (ErrInvalid before
	// sending, or any other 4xx): only a change of the input helps.
	ClassInvalid
)

func (c Class) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassDenied:
		return "denied"
	case ClassConflict:
		return "conflict"
	}
	return "invalid"
}

// Classify sorts an error of a Client into a Class.
func Classify(err error) Class {
	switch {
	case errors.Is(err, ErrInvalid):
		return ClassInvalid
	case Denied(err):
		return ClassDenied
	case Conflict(err):
		return ClassConflict
	case Transient(err):
		return ClassTransient
	}
	return ClassInvalid
}
