package outcome

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

// TestFor is the error → outcome table: which failures stall (no
// retry until the input changes), which wait, which back off.
func TestFor(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("writing role: %w", err) }
	tests := []struct {
		name   string
		err    error
		kind   OutcomeKind
		reason string
	}{
		{"nil", nil, OutcomeReady, v1alpha1.SucceededReason},
		{"admission stall", &admission.Verdict{Kind: admission.Stalled, Reason: v1alpha1.PolicyNotAllowedReason, Message: "x"}, OutcomeStalled, v1alpha1.PolicyNotAllowedReason},
		{"admission wait", &admission.Verdict{Kind: admission.Waiting, Reason: v1alpha1.TemplateNotFoundReason, Message: "x"}, OutcomeWaiting, v1alpha1.TemplateNotFoundReason},
		{"minion held elsewhere", &ErrRefused{Reason: v1alpha1.MinionIDConflictReason, Msg: "x"}, OutcomeWaiting, v1alpha1.MinionIDConflictReason},
		{"unstorable render", &ErrInvalidInput{Err: errors.New("64 keys")}, OutcomeStalled, v1alpha1.ValidationFailedReason},
		{"connection missing", Waiting(WaitingForConnection, "x"), OutcomeWaiting, v1alpha1.ConnectionNotReadyReason},
		{"credential missing", wrapped(Waiting(WaitingForCredential, "x")), OutcomeWaiting, v1alpha1.ConnectionNotReadyReason},
		{"connection's check failing", wrapped(ErrWaiting{What: WaitingForHealth, Reason: v1alpha1.AccessDeniedReason, Msg: "x"}), OutcomeWaiting, v1alpha1.AccessDeniedReason},
		{"refused before sending", wrapped(fmt.Errorf("bad name: %w", vault.ErrInvalid)), OutcomeStalled, v1alpha1.ValidationFailedReason},
		{"Vault 400", wrapped(&vault.Error{Op: "write x", StatusCode: 400, Messages: []string{"invalid token_ttl"}}), OutcomeStalled, v1alpha1.ValidationFailedReason},
		{"Vault state 400", wrapped(&vault.Error{Op: "write x", StatusCode: 400, Messages: []string{"entity name is already in use"}}), OutcomeFailed, v1alpha1.VaultConflictReason},
		{"mount missing", &errVaultState{msg: "auth/x is not enabled"}, OutcomeFailed, v1alpha1.VaultConflictReason},
		{"403", wrapped(&vault.Error{Op: "write x", StatusCode: 403}), OutcomeFailed, v1alpha1.AccessDeniedReason},
		{"login refused", &vault.Error{Op: vault.OpLogin + " approle", StatusCode: 400}, OutcomeFailed, v1alpha1.AccessDeniedReason},
		{"500", wrapped(&vault.Error{Op: "write x", StatusCode: 500}), OutcomeFailed, v1alpha1.VaultUnavailableReason},
		{"429", wrapped(&vault.Error{Op: "write x", StatusCode: 429}), OutcomeFailed, v1alpha1.VaultUnavailableReason},
		{"unreachable", wrapped(&vault.Error{Op: "write x", Err: errors.New("connection refused")}), OutcomeFailed, v1alpha1.VaultUnavailableReason},
		// A 200 whose body cannot be decoded says nothing about the input.
		{"truncated answer", wrapped(&vault.Error{Op: "read x", StatusCode: 200, Err: io.ErrUnexpectedEOF}), OutcomeFailed, v1alpha1.VaultUnavailableReason},
		{"API server", apierrors.NewServiceUnavailable("etcd"), OutcomeFailed, v1alpha1.VaultUnavailableReason},
		{"API conflict", apierrors.NewConflict(schema.GroupResource{Resource: "minionbindings"}, "b", errors.New("x")), OutcomeFailed, v1alpha1.VaultUnavailableReason},
		{"cancelled", wrapped(context.Canceled), OutcomeFailed, v1alpha1.VaultUnavailableReason},
		{"anything else", errors.New("surprise"), OutcomeFailed, v1alpha1.VaultUnavailableReason},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := For(tc.err)
			if o.Kind != tc.kind || o.Reason != tc.reason {
				t.Errorf("For(%v) = %d %s, want %d %s", tc.err, o.Kind, o.Reason, tc.kind, tc.reason)
			}
			if tc.err != nil && o.Message == "" {
				t.Error("no message")
			}
			// The connection tells these, not each waiting binding.
			ofConnection := map[string]bool{"connection missing": true, "credential missing": true, "connection's check failing": true}
			if o.OfConnection != ofConnection[tc.name] {
				t.Errorf("OfConnection %v, want %v", o.OfConnection, ofConnection[tc.name])
			}
		})
	}
}

// A deletion held up is DeletionBlocked whatever holds it up, never
// stalled (it must not wedge): it fails for backoff, or waits.
func TestDeletionOutcomes(t *testing.T) {
	refused := &vault.Error{Op: "delete x", StatusCode: 400, Messages: []string{"invalid"}} // would stall a write
	tests := []struct {
		name string
		o    Outcome
		kind OutcomeKind
		msg  string
	}{
		{"Vault refuses", DeletionBlocked("deleting Vault objects", refused), OutcomeFailed, "deleting Vault objects: " + refused.Error()},
		{"Vault unreachable", DeletionBlocked("deleting ACL policies", errors.New("connection refused")), OutcomeFailed, "deleting ACL policies: connection refused"},
		{"a Secret missing", DeletionWaiting("waiting to delete the Vault objects", Waiting(WaitingForCredential, "Secret a/b does not exist")),
			OutcomeWaiting, "waiting to delete the Vault objects: Secret a/b does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.o.Kind != tc.kind || tc.o.Reason != v1alpha1.DeletionBlockedReason || tc.o.Message != tc.msg || tc.o.OfConnection {
				t.Errorf("%+v, want kind %d, DeletionBlocked, %q", tc.o, tc.kind, tc.msg)
			}
		})
	}
	if res, err := ResultFor(DeletionWaiting("waiting", errors.New("x")), nil, 0); res.RequeueAfter != WaitAfter || err != nil {
		t.Errorf("a waiting deletion: %+v, %v; want a requeue after %s", res, err, WaitAfter)
	}
}

// TestResultFor: what controller-runtime is told for each outcome.
func TestResultFor(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		o           Outcome
		err         error
		wantAfter   time.Duration
		wantErr     bool
		wantTerminl bool
	}{
		{"ready", Outcome{Kind: OutcomeReady}, nil, time.Hour, false, false},
		{"stalled", Outcome{Kind: OutcomeStalled, Message: "bad"}, &ErrInvalidInput{Err: boom}, 0, true, true},
		{"stalled without error", Outcome{Kind: OutcomeStalled, Message: "bad"}, nil, 0, true, true},
		{"waiting", Outcome{Kind: OutcomeWaiting}, Waiting(WaitingForConnection, "x"), WaitAfter, false, false},
		{"waiting, looked at sooner", Outcome{Kind: OutcomeWaiting}, nil, 5 * time.Second, false, false},
		{"failed", Outcome{Kind: OutcomeFailed}, boom, 0, true, false},
		{"suspended", Outcome{Kind: OutcomeSuspended}, nil, time.Hour, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := time.Hour
			if tc.wantAfter > 0 && tc.wantAfter < WaitAfter {
				next = tc.wantAfter
			}
			res, err := ResultFor(tc.o, tc.err, next)
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
		o                           Outcome
		ready                       metav1.ConditionStatus
		reconciling, stalledPresent bool
	}{
		{Outcome{Kind: OutcomeReady, Reason: v1alpha1.SucceededReason}, metav1.ConditionTrue, false, false},
		{Outcome{Kind: OutcomeStalled, Reason: v1alpha1.RenderFailedReason, Message: "m"}, metav1.ConditionFalse, false, true},
		{Outcome{Kind: OutcomeWaiting, Reason: v1alpha1.TemplateNotFoundReason, Message: "m"}, metav1.ConditionFalse, true, false},
		{Outcome{Kind: OutcomeFailed, Reason: v1alpha1.VaultUnavailableReason, Message: "m"}, metav1.ConditionFalse, true, false},
		{Outcome{Kind: OutcomeSuspended}, metav1.ConditionFalse, false, false},
	}
	for _, tc := range tests {
		// From the opposite state, so every transition is exercised.
		b := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
		SetConditions(b, Outcome{Kind: OutcomeStalled, Reason: "X", Message: "x"})
		SetConditions(b, Outcome{Kind: OutcomeFailed, Reason: "Y", Message: "y"})
		SetConditions(b, tc.o)
		ready := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
		if ready == nil || ready.Status != tc.ready || ready.ObservedGeneration != 3 {
			t.Errorf("%d: Ready %+v", tc.o.Kind, ready)
		}
		if got := meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ReconcilingCondition); got != tc.reconciling {
			t.Errorf("%d: Reconciling %v", tc.o.Kind, got)
		}
		if got := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.StalledCondition) != nil; got != tc.stalledPresent {
			t.Errorf("%d: Stalled present %v", tc.o.Kind, got)
		}
	}
}
