package connection

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A failed check's error decides the connection's outcome and when it is
// checked again: a failure of Vault or of the credentials within seconds
// (the gate's schedule), a wait for what the connection names through the
// outcome table, a configuration only an edit fixes at the next check.
func TestFailedCheckOutcome(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		kind   outcome.OutcomeKind
		reason string
		next   checkAgain
	}{
		{"token refused", &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 403, Messages: []string{"permission denied"}},
			outcome.OutcomeFailed, v1alpha1.AccessDeniedReason, onRetrySchedule},
		{"sealed", &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 503, Messages: []string{"Vault is sealed"}},
			outcome.OutcomeFailed, v1alpha1.VaultUnavailableReason, onRetrySchedule},
		{"no answer", fmt.Errorf("connecting to Vault at http://vault: %w", context.DeadlineExceeded),
			outcome.OutcomeFailed, v1alpha1.VaultUnavailableReason, onRetrySchedule},
		{"sealed: no cluster ID", unsealed(vault.ServerInfo{Version: "1.21.4"}),
			outcome.OutcomeFailed, v1alpha1.VaultUnavailableReason, onRetrySchedule},
		{"a configuration the client refuses", fmt.Errorf("connecting to Vault at vault: %w: address \"vault\" is not an http or https URL", vault.ErrInvalid),
			outcome.OutcomeStalled, v1alpha1.ValidationFailedReason, onRetrySchedule},
		{"Secret missing", outcome.Waiting(outcome.WaitingForCredential, "Secret ops/vault-token does not exist"),
			outcome.OutcomeWaiting, v1alpha1.ConnectionNotReadyReason, afterWait},
		{"no auth method", outcome.Waiting(outcome.WaitingForCredential, `VaultConnection "vault" has no auth method`),
			outcome.OutcomeWaiting, v1alpha1.ConnectionNotReadyReason, afterWait},
		{"gone meanwhile", outcome.Waiting(outcome.WaitingForConnection, `VaultConnection "vault" does not exist`),
			outcome.OutcomeWaiting, v1alpha1.ConnectionNotReadyReason, afterWait},
		{"Secret outside the operator's namespace", outcome.ErrWaiting{What: outcome.WaitingForCredential, Stall: v1alpha1.SecretNamespaceNotAllowedReason, Msg: "not allowed"},
			outcome.OutcomeStalled, v1alpha1.SecretNamespaceNotAllowedReason, atInterval},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, next := failedCheck(tc.err)
			if o.Kind != tc.kind || o.Reason != tc.reason || !strings.HasSuffix(o.Message, tc.err.Error()) || next != tc.next {
				t.Errorf("failedCheck = %+v, %d; want kind %d, reason %s, the error's message, next %d", o, next, tc.kind, tc.reason, tc.next)
			}
		})
	}
}

// A connection waiting for its Secret looks again after the outcome
// table's wait, as bindings and templates do (its Secrets are watched, so
// it usually looks sooner), and says so in its conditions.
func TestAWaitingConnectionRequeuesAfterTheTablesWait(t *testing.T) {
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: 2}, Spec: v1alpha1.VaultConnectionSpec{Address: "http://vault"}}
	h := newHarness(t, conn)
	h.conns.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) {
		return nil, outcome.Waiting(outcome.WaitingForCredential, "Secret ops/vault-token does not exist")
	}
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.conns}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}})
	if err != nil || res.RequeueAfter != outcome.WaitAfter || outcome.WaitAfter != 2*time.Minute {
		t.Fatalf("reconcile: %+v, %v; want a requeue after %s (2m)", res, err, outcome.WaitAfter)
	}
	if h.conns.gated("vault", "") != nil {
		t.Errorf("a wait for a Secret closed the gate")
	}
	got := &v1alpha1.VaultConnection{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Name: "vault"}, got); err != nil {
		t.Fatal(err)
	}
	conds := got.Status.Conditions
	ready := apimeta.FindStatusCondition(conds, v1alpha1.ReadyCondition)
	reconciling := apimeta.FindStatusCondition(conds, v1alpha1.ReconcilingCondition)
	switch {
	case ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ConnectionNotReadyReason || ready.ObservedGeneration != 2:
		t.Errorf("Ready %+v; want False, ConnectionNotReady, generation 2", ready)
	case reconciling == nil || reconciling.Status != metav1.ConditionTrue:
		t.Errorf("Reconciling %+v; want True", reconciling)
	case apimeta.FindStatusCondition(conds, v1alpha1.StalledCondition) != nil:
		t.Errorf("Stalled present: %+v", conds)
	case got.Status.ObservedGeneration != 2 || got.Status.LastError == "":
		t.Errorf("status %+v; want observedGeneration 2 and the error", got.Status)
	}
}
