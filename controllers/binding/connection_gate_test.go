package binding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

var errRevoked = &vault.Error{Op: "read auth/token/lookup-self", StatusCode: 403, Messages: []string{"permission denied"}}

// A revoked operator token is found once, by the first binding that fails
// and checks the connection; the other bindings then wait on the
// connection without a Vault request, and go on once its check passes.
func TestDeadTokenGatesTheConnection(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	const n = 20
	for i := 1; i < n; i++ {
		objs = append(objs, &v1alpha1.MinionBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: fmt.Sprintf("m%02d", i), UID: types.UID(fmt.Sprintf("uid-m%02d", i)), Generation: 1, CreationTimestamp: metav1.Now()},
			Spec:       v1alpha1.MinionBindingSpec{MinionID: fmt.Sprintf("m%02d", i), TemplateRef: v1alpha1.MinionTemplateReference{Name: "t"}, Pillar: rawDoc(map[string]any{"roles": []string{"web"}})},
		})
	}
	h := newHarness(t, objs...)
	names := []string{"web01"}
	for i := 1; i < n; i++ {
		names = append(names, fmt.Sprintf("m%02d", i))
	}
	for _, name := range names {
		h.reconcile("salt", name)
	}

	// The token is revoked: every request is refused, the check too. The
	// connection controller is told, once.
	var woken []string
	h.r.Connections.OnClosed(func(name string) { woken = append(woken, name) })
	h.events()
	h.v.ResetCalls()
	h.v.FailNext("*", errRevoked)
	h.v.FailNext("*", errRevoked)
	for _, name := range names {
		h.reconcile("salt", name)
		b := h.get("salt", name)
		ready := outcome.ReadyOf(b)
		if ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.AccessDeniedReason || !strings.Contains(ready.Message, `VaultConnection "vault" cannot be used`) {
			t.Fatalf("%s: Ready %+v", name, ready)
		}
	}
	if calls := h.v.Calls("*"); calls != 2 {
		t.Errorf("%d bindings with a revoked token made %d Vault requests, want 2 (the first one's and its check)", n, calls)
	}
	if !slices.Equal(woken, []string{"vault"}) {
		t.Errorf("the connection controller was woken for %v, want [vault]", woken)
	}
	// The connection tells it (connection.Reconciler.events); an event per
	// waiting binding would be 10,000 at fleet size, more than client-go
	// queues.
	if ev := h.events(); ev != "" {
		t.Errorf("events of bindings waiting on the connection: %q", ev)
	}

	// The connection's check passes again (a new token): the bindings go on.
	ctx := context.Background()
	if err := h.r.Connections.Probe(ctx, "vault", func(vc vault.Client) error { return vc.CheckToken(ctx) }); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		h.reconcile("salt", name)
		if ready := outcome.ReadyOf(h.get("salt", name)); ready.Status != metav1.ConditionTrue {
			t.Fatalf("%s after the check passed: %+v", name, ready)
		}
	}
}

// A refusal of one path (the operator's policy lacks it) is the binding's
// own: the connection's check passes, nothing is gated, the binding fails
// with AccessDenied and retries with backoff.
func TestAPathRefusalIsNotTheConnections(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	h.v.FailNext("ReadRole", &vault.Error{Op: "read auth/salt-minions/role/web01", StatusCode: 403, Messages: []string{"permission denied"}})
	_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "salt", Name: "web01"}})
	if err == nil || !vault.Denied(err) {
		t.Fatalf("reconcile: %v, want the refusal for backoff", err)
	}
	if ready := outcome.ReadyOf(h.get("salt", "web01")); ready.Reason != v1alpha1.AccessDeniedReason {
		t.Errorf("Ready %+v", ready)
	}
	if _, _, gerr := h.r.Connections.Get(context.Background(), "vault"); gerr != nil {
		t.Errorf("the connection is gated: %v", gerr)
	}
	h.reconcile("salt", "web01")
	if ready := outcome.ReadyOf(h.get("salt", "web01")); ready.Status != metav1.ConditionTrue {
		t.Errorf("the next reconcile: %+v", ready)
	}
}

// A check that passed before a binding sent its requests says nothing of
// them: the token may have been revoked in between. The binding's refusal
// is checked again and the binding waits on the connection, at once, not
// after its own retries (with a pass standing for a second, 1,000 bindings
// made 145 refused requests in the first second after a revocation).
func TestAPassBeforeTheRequestsDoesNotExcuseThem(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	h.reconcile("salt", "web01")
	ctx := context.Background()
	if err := h.r.Connections.Probe(ctx, "vault", func(vc vault.Client) error { return vc.CheckToken(ctx) }); err != nil {
		t.Fatal(err)
	}
	// Revoked right after the pass; the binding is asked at once.
	h.v.ResetCalls()
	h.v.FailNext("*", errRevoked)
	h.v.FailNext("*", errRevoked)
	h.r.checks.forget(types.NamespacedName{Namespace: "salt", Name: "web01"})
	h.reconcile("salt", "web01")
	ready := outcome.ReadyOf(h.get("salt", "web01"))
	if ready.Reason != v1alpha1.AccessDeniedReason || !strings.Contains(ready.Message, `VaultConnection "vault" cannot be used`) {
		t.Errorf("Ready %+v, want the connection's wait", ready)
	}
	if calls := h.v.Calls("*"); calls != 2 {
		t.Errorf("%d Vault requests, want 2 (the binding's and the check)", calls)
	}
}
