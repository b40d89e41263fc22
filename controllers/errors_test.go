package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// TestOutcomeFor is the error → outcome table: which failures stall (no
// retry until the input changes), which wait, which back off.
func TestOutcomeFor(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("writing role: %w", err) }
	tests := []struct {
		name   string
		err    error
		kind   outcomeKind
		reason string
	}{
		{"nil", nil, outcomeReady, v1alpha1.SucceededReason},
		{"admission stall", &admission.Verdict{Kind: admission.Stalled, Reason: v1alpha1.PolicyNotAllowedReason, Message: "x"}, outcomeStalled, v1alpha1.PolicyNotAllowedReason},
		{"admission wait", &admission.Verdict{Kind: admission.Waiting, Reason: v1alpha1.TemplateNotFoundReason, Message: "x"}, outcomeWaiting, v1alpha1.TemplateNotFoundReason},
		{"minion held elsewhere", &errRefused{reason: v1alpha1.MinionIDConflictReason, msg: "x"}, outcomeWaiting, v1alpha1.MinionIDConflictReason},
		{"unstorable render", &errInvalidInput{err: errors.New("64 keys")}, outcomeStalled, v1alpha1.ValidationFailedReason},
		{"connection missing", waiting(waitingForConnection, "x"), outcomeWaiting, v1alpha1.ConnectionNotReadyReason},
		{"credential missing", wrapped(waiting(waitingForCredential, "x")), outcomeWaiting, v1alpha1.ConnectionNotReadyReason},
		{"ConfigMap missing", waiting(waitingForConfigMap, "x"), outcomeWaiting, v1alpha1.RenderFailedReason},
		{"refused before sending", wrapped(fmt.Errorf("bad name: %w", vault.ErrInvalid)), outcomeStalled, v1alpha1.ValidationFailedReason},
		{"Vault 400", wrapped(&vault.Error{Op: "write x", StatusCode: 400, Messages: []string{"invalid token_ttl"}}), outcomeStalled, v1alpha1.ValidationFailedReason},
		{"Vault state 400", wrapped(&vault.Error{Op: "write x", StatusCode: 400, Messages: []string{"entity name is already in use"}}), outcomeFailed, v1alpha1.VaultConflictReason},
		{"mount missing", &errVaultState{msg: "auth/x is not enabled"}, outcomeFailed, v1alpha1.VaultConflictReason},
		{"403", wrapped(&vault.Error{Op: "write x", StatusCode: 403}), outcomeFailed, v1alpha1.AccessDeniedReason},
		{"login refused", &vault.Error{Op: vault.OpLogin + " approle", StatusCode: 400}, outcomeFailed, v1alpha1.AccessDeniedReason},
		{"500", wrapped(&vault.Error{Op: "write x", StatusCode: 500}), outcomeFailed, v1alpha1.VaultUnavailableReason},
		{"429", wrapped(&vault.Error{Op: "write x", StatusCode: 429}), outcomeFailed, v1alpha1.VaultUnavailableReason},
		{"unreachable", wrapped(&vault.Error{Op: "write x", Err: errors.New("connection refused")}), outcomeFailed, v1alpha1.VaultUnavailableReason},
		// A 200 whose body cannot be decoded says nothing about the input.
		{"truncated answer", wrapped(&vault.Error{Op: "read x", StatusCode: 200, Err: io.ErrUnexpectedEOF}), outcomeFailed, v1alpha1.VaultUnavailableReason},
		{"API server", apierrors.NewServiceUnavailable("etcd"), outcomeFailed, v1alpha1.VaultUnavailableReason},
		{"API conflict", apierrors.NewConflict(schema.GroupResource{Resource: "minionbindings"}, "b", errors.New("x")), outcomeFailed, v1alpha1.VaultUnavailableReason},
		{"cancelled", wrapped(context.Canceled), outcomeFailed, v1alpha1.VaultUnavailableReason},
		{"anything else", errors.New("surprise"), outcomeFailed, v1alpha1.VaultUnavailableReason},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := outcomeFor(tc.err)
			if o.kind != tc.kind || o.reason != tc.reason {
				t.Errorf("outcomeFor(%v) = %d %s, want %d %s", tc.err, o.kind, o.reason, tc.kind, tc.reason)
			}
			if tc.err != nil && o.message == "" {
				t.Error("no message")
			}
		})
	}
}

// TestResultFor: what controller-runtime is told for each outcome.
func TestResultFor(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		o           outcome
		err         error
		wantAfter   time.Duration
		wantErr     bool
		wantTerminl bool
	}{
		{"ready", outcome{kind: outcomeReady}, nil, time.Hour, false, false},
		{"stalled", outcome{kind: outcomeStalled, message: "bad"}, &errInvalidInput{err: boom}, 0, true, true},
		{"stalled without error", outcome{kind: outcomeStalled, message: "bad"}, nil, 0, true, true},
		{"waiting", outcome{kind: outcomeWaiting}, waiting(waitingForConnection, "x"), waitAfter, false, false},
		{"waiting, looked at sooner", outcome{kind: outcomeWaiting}, nil, 5 * time.Second, false, false},
		{"failed", outcome{kind: outcomeFailed}, boom, 0, true, false},
		{"suspended", outcome{kind: outcomeSuspended}, nil, time.Hour, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := time.Hour
			if tc.wantAfter > 0 && tc.wantAfter < waitAfter {
				next = tc.wantAfter
			}
			res, err := resultFor(tc.o, tc.err, next)
			if res.RequeueAfter != tc.wantAfter || (err != nil) != tc.wantErr || errors.Is(err, reconcile.TerminalError(nil)) != tc.wantTerminl {
				t.Errorf("resultFor = %+v, %v", res, err)
			}
		})
	}
}

// TestConditionsOfOutcomes: the conditions each outcome leaves (kstatus:
// Ready always, Reconciling and Stalled only while true).
func TestConditionsOfOutcomes(t *testing.T) {
	tests := []struct {
		o                           outcome
		ready                       metav1.ConditionStatus
		reconciling, stalledPresent bool
	}{
		{outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason}, metav1.ConditionTrue, false, false},
		{outcome{kind: outcomeStalled, reason: v1alpha1.RenderFailedReason, message: "m"}, metav1.ConditionFalse, false, true},
		{outcome{kind: outcomeWaiting, reason: v1alpha1.TemplateNotFoundReason, message: "m"}, metav1.ConditionFalse, true, false},
		{outcome{kind: outcomeFailed, reason: v1alpha1.VaultUnavailableReason, message: "m"}, metav1.ConditionFalse, true, false},
		{outcome{kind: outcomeSuspended}, metav1.ConditionFalse, false, false},
	}
	for _, tc := range tests {
		// From the opposite state, so every transition is exercised.
		b := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
		setConditions(b, outcome{kind: outcomeStalled, reason: "X", message: "x"})
		setConditions(b, outcome{kind: outcomeFailed, reason: "Y", message: "y"})
		setConditions(b, tc.o)
		ready := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
		if ready == nil || ready.Status != tc.ready || ready.ObservedGeneration != 3 {
			t.Errorf("%d: Ready %+v", tc.o.kind, ready)
		}
		if got := meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ReconcilingCondition); got != tc.reconciling {
			t.Errorf("%d: Reconciling %v", tc.o.kind, got)
		}
		if got := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.StalledCondition) != nil; got != tc.stalledPresent {
			t.Errorf("%d: Stalled present %v", tc.o.kind, got)
		}
	}
}
