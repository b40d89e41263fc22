package binding

import (
	"context"
	"errors"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A binding's reconcile request is handled by a reconcile that compared
// every object with Vault and brought them to the rendering, or that
// refused the binding for a reason only a change clears; never by one
// that failed, waited, or took Vault as it last saw it.
func TestHandlesRequest(t *testing.T) {
	ready := outcome.Outcome{Kind: outcome.OutcomeReady, Reason: v1alpha1.SucceededReason}
	tests := []struct {
		name     string
		outcome  outcome.Outcome
		compared bool
		err      error
		want     bool
	}{
		{"compared and in sync or repaired", ready, true, nil, true},
		{"compared, drift only detected (detect-only)", outcome.Outcome{Kind: outcome.OutcomeReady, Reason: "DriftDetected"}, true, nil, true},
		{"Ready as last checked, Vault not read", ready, false, nil, false},
		{"suspended", outcome.Outcome{Kind: outcome.OutcomeSuspended}, false, nil, false},
		{"Vault's objects are someone else's", outcome.Outcome{Kind: outcome.OutcomeWaiting, Reason: v1alpha1.NotOwnedReason}, true,
			&outcome.ErrRefused{Reason: v1alpha1.NotOwnedReason, Msg: "not ours"}, true},
		{"refused at admission (stalled)", outcome.Outcome{Kind: outcome.OutcomeStalled, Reason: v1alpha1.DuplicateMinionIDReason}, false,
			&admission.Verdict{Kind: admission.Stalled, Reason: v1alpha1.DuplicateMinionIDReason, Message: "bound by another"}, true},
		{"Vault unavailable", outcome.Outcome{Kind: outcome.OutcomeFailed, Reason: v1alpha1.VaultUnavailableReason}, true,
			&vault.Error{Op: "read auth/salt-minions/role/web01", StatusCode: 503}, false},
		{"waiting for the connection", outcome.Outcome{Kind: outcome.OutcomeWaiting, Reason: v1alpha1.ConnectionNotReadyReason}, false,
			outcome.Waiting(outcome.WaitingForConnection, "no connection"), false},
		{"waiting for the template", outcome.Outcome{Kind: outcome.OutcomeWaiting, Reason: v1alpha1.TemplateNotFoundReason}, false,
			&admission.Verdict{Kind: admission.Waiting, Reason: v1alpha1.TemplateNotFoundReason, Message: "no template"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := handlesRequest(tc.outcome, tc.compared, tc.err); got != tc.want {
				t.Errorf("handlesRequest = %v, want %v", got, tc.want)
			}
		})
	}
}

// A request reads the role the process knows as it last wrote it (a
// drift check not due yet), so a role deleted by hand since is created
// again before the request is reported handled; a request whose reconcile
// fails stays open until one succeeds.
func TestARequestReadsWhatTheProcessKnows(t *testing.T) {
	h, reads, _, _ := scheduleHarness(t)
	ctx := context.Background()
	request := func(v string) {
		t.Helper()
		b := h.get("salt", "web01")
		patch := client.MergeFrom(b.DeepCopy())
		b.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: v}
		if err := h.c.Patch(ctx, b, patch); err != nil {
			t.Fatal(err)
		}
	}
	handled := func(step, want string) {
		t.Helper()
		if got := h.get("salt", "web01").Status.LastHandledReconcileAt; got != want {
			t.Errorf("%s: lastHandledReconcileAt %q, want %q", step, got, want)
		}
	}
	h.reconcile("salt", "web01")
	if err := h.v.DeleteRole(ctx, "salt-minions", "web01"); err != nil {
		t.Fatal(err)
	}
	reads.take()
	h.reconcile("salt", "web01")
	if role, _, _ := reads.take(); role != 0 {
		t.Fatalf("the set-up: a reconcile before the check is due read the role %d times, want none", role)
	}

	request("r1")
	h.reconcile("salt", "web01")
	if role, roleID, entity := reads.take(); role != 1 || entity != 1 {
		t.Errorf("a request read the role %d, its role ID %d and the entity %d times, want each (the role ID of a role found)", role, roleID, entity)
	}
	if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r == nil {
		t.Error("a request left the role deleted by hand missing")
	}
	handled("the role created again", "r1")

	request("r2")
	h.v.FailNext("ReadEntityByName", errors.New("connection reset"))
	if _, err := h.r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "salt", Name: "web01"}}); err == nil {
		t.Fatal("a reconcile whose entity read failed succeeded")
	}
	handled("a failed read", "r1")
	reads.take()
	h.reconcile("salt", "web01")
	if role, roleID, entity := reads.take(); role != 1 || roleID != 1 || entity != 1 {
		t.Errorf("the retry read the role %d, its role ID %d and the entity %d times, want 1 each", role, roleID, entity)
	}
	handled("the retry", "r2")
}
