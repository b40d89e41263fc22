package binding

import (
	"context"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A binding of such a connection waits (ConnectionNotReady, requeued after
// waitAfter, not stalled and not retried with backoff), and turns Ready
// once the reference is moved.
func TestBindingWaitsOnSecretNamespace(t *testing.T) {
	ctx := context.Background()
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	objs[1] = testkit.NSConnection(testkit.OtherNamespace, "", false)
	objs[1].(*v1alpha1.VaultConnection).Status.ClusterID = testVaultID
	h := newHarness(t, append(objs, testkit.NSSecret(testkit.OpNamespace, "vault-token"))...)
	h.r.Connections = &connection.Connections{Client: h.c, SecretNamespace: testkit.OpNamespace,
		Cache: &vault.Cache{New: func(context.Context, vault.Config, vault.Observer) (vault.Client, error) { return h.v, nil }}}

	res := h.reconcile("salt", "web01")
	ready := apimeta.FindStatusCondition(h.get("salt", "web01").Status.Conditions, v1alpha1.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ConnectionNotReadyReason ||
		!strings.Contains(ready.Message, "operator reads Secrets only in namespace") {
		t.Fatalf("Ready %+v", ready)
	}
	if res.RequeueAfter < time.Minute {
		t.Errorf("requeue after %s: hot", res.RequeueAfter)
	}

	conn := &v1alpha1.VaultConnection{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "vault"}, conn); err != nil {
		t.Fatal(err)
	}
	conn.Spec.Auth.Token.SecretRef.Namespace = testkit.OpNamespace
	if err := h.c.Update(ctx, conn); err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "web01")
	if c := apimeta.FindStatusCondition(h.get("salt", "web01").Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("after the move: Ready %+v", c)
	}
}
