package controllers

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

// The operator's errors, and the one table (outcomeFor) that turns any
// error into what a reconcile reports and whether it is retried. Every
// reconciler, the cleanup paths and the CLI's plan go through outcomeFor,
// so a given failure means the same thing wherever it happens.
//
// Three classes, as in Flux: input that can never succeed stalls (no
// retry until something changes); waiting for something to appear
// requeues after a while; anything else is returned for backoff. Vault's
// own state (a mount missing, an object someone else holds, a truncated
// answer) is never "input": it is waited for or retried.

// waitAfter is how soon a waiting object looks again on its own; the
// watches usually wake it sooner.
const waitAfter = 2 * time.Minute

// errWaiting is something that must appear before the work can go on.
// Its kind says what, so that callers need not guess it from context.
type errWaiting struct {
	what waitingFor
	msg  string
	// reason is the condition's reason, when not ConnectionNotReady's
	// (a gated connection's: its own VaultUnavailable or AccessDenied).
	reason string
	// stall, when set, is the reason a VaultConnection reports for a wait
	// that only an edit of the connection ends (its configuration is not
	// allowed): the connection stalls, while its bindings and templates
	// wait on it as on any connection that cannot log in.
	stall string
}

type waitingFor int

const (
	waitingForConnection waitingFor = iota // the VaultConnection does not exist
	waitingForCredential                   // a Secret (or key, or auth method) of the connection is missing
	waitingForConfigMap                    // a ConfigMap of the parameter stack is missing
	waitingForHealth                       // the connection's check fails (token refused, Vault sealed or unreachable)
)

func (e errWaiting) Error() string { return e.msg }

func waiting(what waitingFor, format string, args ...any) error {
	return errWaiting{what: what, msg: fmt.Sprintf(format, args...)}
}

func isWaiting(err error) bool {
	var w errWaiting
	return errors.As(err, &w)
}

// stalledConnection is the reason a connection is stalled for, when err
// is a wait that only an edit of the connection ends.
func stalledConnection(err error) (reason string, ok bool) {
	var w errWaiting
	if errors.As(err, &w) && w.stall != "" {
		return w.stall, true
	}
	return "", false
}

// waitingOn reports whether err is a wait for that.
func waitingOn(err error, what waitingFor) bool {
	var w errWaiting
	return errors.As(err, &w) && w.what == what
}

// errInvalidInput is a rendering that Vault cannot store (found before
// anything is written): it stalls like a refused write.
type errInvalidInput struct{ err error }

func (e *errInvalidInput) Error() string { return e.err.Error() }
func (e *errInvalidInput) Unwrap() error { return e.err }

// errVaultState is Vault's state refusing the operator (a mount missing,
// an object vanishing between two requests): repaired by Vault or the next
// try, so it is retried with backoff like vault.Conflict.
type errVaultState struct {
	msg string
	err error
}

func (e *errVaultState) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *errVaultState) Unwrap() error { return e.err }

// vaultState returns err when it is a Vault error, else a state error.
func vaultState(err error, msg string) error {
	if err != nil {
		return err
	}
	return &errVaultState{msg: msg}
}

// errRefused: Vault's objects are someone else's (or being released);
// nothing was written. The binding waits and checks again.
type errRefused struct {
	reason, msg string
}

func (e *errRefused) Error() string { return e.msg }

// outcomeFor is the one mapping from an error to an outcome. nil is Ready
// (the caller fills in what was done). The outcome's kind decides what
// Reconcile returns (resultFor): Stalled a terminal error, Waiting a
// requeue, Failed the error itself for backoff.
func outcomeFor(err error) outcome {
	if err == nil {
		return outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason}
	}
	var (
		taken *errRefused
		bad   *errInvalidInput
		wait  errWaiting
	)
	if v, ok := admission.AsVerdict(err); ok {
		kind := outcomeStalled
		if v.Kind == admission.Waiting {
			kind = outcomeWaiting
		}
		return outcome{kind: kind, reason: v.Reason, message: v.Message}
	}
	switch {
	case errors.As(err, &taken):
		// Someone else's objects in Vault: nothing was written; look again
		// later (a holder's deletion wakes the binding sooner).
		return outcome{kind: outcomeWaiting, reason: taken.reason, message: taken.msg}
	case errors.As(err, &bad):
		return outcome{kind: outcomeStalled, reason: v1alpha1.ValidationFailedReason, message: err.Error()}
	case errors.As(err, &wait):
		reason := v1alpha1.ConnectionNotReadyReason
		switch {
		case wait.reason != "":
			reason = wait.reason
		case wait.what == waitingForConfigMap:
			reason = v1alpha1.RenderFailedReason
		}
		return outcome{kind: outcomeWaiting, reason: reason, message: err.Error()}
	}
	switch classify(err) {
	case vault.ClassInvalid:
		if !refusedRequest(err) {
			// An answer that could not be read (a truncated body, a 2xx
			// that is not JSON) says nothing about the input: retry.
			break
		}
		// Vault refused what we sent: retrying the same write cannot help
		// until the binding or template changes.
		return outcome{kind: outcomeStalled, reason: v1alpha1.ValidationFailedReason, message: "Vault refused the write: " + err.Error()}
	case vault.ClassConflict:
		return outcome{kind: outcomeFailed, reason: v1alpha1.VaultConflictReason, message: err.Error()}
	case vault.ClassDenied:
		return outcome{kind: outcomeFailed, reason: v1alpha1.AccessDeniedReason, message: err.Error()}
	}
	return outcome{kind: outcomeFailed, reason: v1alpha1.VaultUnavailableReason, message: err.Error()}
}

// classify is vault.Classify, plus the operator's own view of Vault's
// state, of the API server and of a cancelled reconcile: none of them is
// the binding's fault.
func classify(err error) vault.Class {
	var st *errVaultState
	switch {
	case errors.As(err, &st):
		return vault.ClassConflict
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), isAPIError(err):
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

func isAPIError(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st)
}
