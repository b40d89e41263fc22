package outcome

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The operator's errors, and the one table (For) that turns any
// error into what a reconcile reports and whether it is retried. Every
// reconciler, the cleanup paths and the CLI's plan go through For,
// so a given failure means the same thing wherever it happens.
//
// Three classes, as in Flux: input that can never succeed stalls (no
// retry until something changes); waiting for something to appear
// requeues after a while; anything else is returned for backoff. Vault's
// own state (a mount missing, an object someone else holds, a truncated
// answer) is never "input": it is waited for or retried.

// WaitAfter is how soon a waiting object looks again on its own; the
// watches usually wake it sooner.
const WaitAfter = 2 * time.Minute

// ErrWaiting is something that must appear before the work can go on.
// Its kind says what, so that callers need not guess it from context.
type ErrWaiting struct {
	What WaitingFor
	Msg  string
	// Reason is the condition's Reason, when not ConnectionNotReady's
	// (a gated connection's: its own VaultUnavailable or AccessDenied).
	Reason string
	// Stall, when set, is the reason a VaultConnection reports for a wait
	// that only an edit of the connection ends (its configuration is not
	// allowed): the connection stalls, while its bindings and templates
	// wait on it as on any connection that cannot log in.
	Stall string
}

type WaitingFor int

const (
	WaitingForConnection WaitingFor = iota // the VaultConnection does not exist
	WaitingForCredential                   // a Secret (or key, or auth method) of the connection is missing
	WaitingForHealth                       // the connection's check fails (token refused, Vault sealed or unreachable)
)

func (e ErrWaiting) Error() string { return e.Msg }

// ofConnection: the wait ends when the VaultConnection is fixed.
func (e ErrWaiting) ofConnection() bool {
	return e.What == WaitingForConnection || e.What == WaitingForCredential || e.What == WaitingForHealth
}

func Waiting(what WaitingFor, format string, args ...any) error {
	return ErrWaiting{What: what, Msg: fmt.Sprintf(format, args...)}
}

func IsWaiting(err error) bool {
	var w ErrWaiting
	return errors.As(err, &w)
}

// StalledConnection is the reason a connection is stalled for, when err
// is a wait that only an edit of the connection ends.
func StalledConnection(err error) (reason string, ok bool) {
	var w ErrWaiting
	if errors.As(err, &w) && w.Stall != "" {
		return w.Stall, true
	}
	return "", false
}

// WaitingOn reports whether err is a wait for that.
func WaitingOn(err error, what WaitingFor) bool {
	var w ErrWaiting
	return errors.As(err, &w) && w.What == what
}

// ErrInvalidInput is a rendering that Vault cannot store (found before
// anything is written): it stalls like a refused write.
type ErrInvalidInput struct{ Err error }

func (e *ErrInvalidInput) Error() string { return e.Err.Error() }
func (e *ErrInvalidInput) Unwrap() error { return e.Err }

// errVaultState is Vault's state refusing the operator (a mount missing,
// an object vanishing between two requests): repaired by Vault or the next
// try, so it is retried with backoff like vault.Conflict.
type errVaultState struct {
	msg string
	Err error
}

func (e *errVaultState) Error() string {
	if e.Err != nil {
		return e.msg + ": " + e.Err.Error()
	}
	return e.msg
}

func (e *errVaultState) Unwrap() error { return e.Err }

// VaultState returns err when it is a Vault error, else a state error.
func VaultState(err error, msg string) error {
	if err != nil {
		return err
	}
	return &errVaultState{msg: msg}
}

// ErrRefused: Vault's objects are someone else's (or being released);
// nothing was written. The binding waits and checks again.
type ErrRefused struct {
	Reason, Msg string
}

func (e *ErrRefused) Error() string { return e.Msg }

// For is the one mapping from an error to an outcome. nil is Ready
// (the caller fills in what was done). The outcome's kind decides what
// Reconcile returns (resultFor): Stalled a terminal error, Waiting a
// requeue, Failed the error itself for backoff.
func For(err error) Outcome {
	if err == nil {
		return Outcome{Kind: OutcomeReady, Reason: v1alpha1.SucceededReason}
	}
	var (
		taken *ErrRefused
		bad   *ErrInvalidInput
		wait  ErrWaiting
	)
	if v, ok := admission.AsVerdict(err); ok {
		kind := OutcomeStalled
		if v.Kind == admission.Waiting {
			kind = OutcomeWaiting
		}
		return Outcome{Kind: kind, Reason: v.Reason, Message: v.Message}
	}
	switch {
	case errors.As(err, &taken):
		// Someone else's objects in Vault: nothing was written; look again
		// later (a holder's deletion wakes the binding sooner).
		return Outcome{Kind: OutcomeWaiting, Reason: taken.Reason, Message: taken.Msg}
	case errors.As(err, &bad):
		return Outcome{Kind: OutcomeStalled, Reason: v1alpha1.ValidationFailedReason, Message: err.Error()}
	case errors.As(err, &wait):
		reason := v1alpha1.ConnectionNotReadyReason
		if wait.Reason != "" {
			reason = wait.Reason
		}
		return Outcome{Kind: OutcomeWaiting, Reason: reason, Message: err.Error(), OfConnection: wait.ofConnection()}
	}
	switch Classify(err) {
	case vault.ClassInvalid:
		if !refusedRequest(err) {
			// An answer that could not be read (a truncated body, a 2xx
			// that is not JSON) says nothing about the input: retry.
			break
		}
		// Vault refused what we sent: retrying the same write cannot help
		// until the binding or template changes.
		return Outcome{Kind: OutcomeStalled, Reason: v1alpha1.ValidationFailedReason, Message: "Vault refused the write: " + err.Error()}
	case vault.ClassConflict:
		return Outcome{Kind: OutcomeFailed, Reason: v1alpha1.VaultConflictReason, Message: err.Error()}
	case vault.ClassDenied:
		return Outcome{Kind: OutcomeFailed, Reason: v1alpha1.AccessDeniedReason, Message: err.Error()}
	}
	return Outcome{Kind: OutcomeFailed, Reason: v1alpha1.VaultUnavailableReason, Message: err.Error()}
}

// DeletionBlocked is the outcome of a deletion that err holds up (the
// finalizer stays), whatever err is: reason DeletionBlocked, never
// stalled, since a deletion must not wedge. It fails: the caller returns
// err for backoff (ResultFor).
func DeletionBlocked(op string, err error) Outcome {
	return Outcome{Kind: OutcomeFailed, Reason: v1alpha1.DeletionBlockedReason, Message: op + ": " + err.Error()}
}

// DeletionWaiting is DeletionBlocked for a deletion that waits for
// something to appear (a connection's Secret): it looks again after
// WaitAfter (ResultFor), and the watches usually wake it sooner.
func DeletionWaiting(op string, err error) Outcome {
	return Outcome{Kind: OutcomeWaiting, Reason: v1alpha1.DeletionBlockedReason, Message: op + ": " + err.Error()}
}

// Classify is vault.Classify, plus the operator's own view of Vault's
// state, of the API server and of a cancelled reconcile: none of them is
// the binding's fault.
func Classify(err error) vault.Class {
	var st *errVaultState
	switch {
	case errors.As(err, &st):
		return vault.ClassConflict
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), IsAPIError(err):
		return vault.ClassTransient
	}
	return vault.Classify(err)
}

// refusedRequest: the request itself was refused, before sending
// (vault.ErrInvalid) or by Vault with a 4xx. Only such an error may stall.
func refusedRequest(err error) bool {
	if errors.Is(err, vault.ErrInvalid) {
		return true
	}
	var ve *vault.Error
	return errors.As(err, &ve) && ve.StatusCode >= 400 && ve.StatusCode < 500
}

func IsAPIError(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st)
}
