package connection

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// TestASealedVaultIsCheckedAgainWithinSeconds: the check of a connection
// whose Vault node is sealed (a standby restarted, as in an HA cluster)
// goes through the real client: the login fails, seal-status is asked
// without a token and answers with no cluster ID. The check reports the
// failure and is tried again within seconds (retryAfter), and passes once
// the node is unsealed. It used to panic in the seal-status request without
// a login (a client with no session): the reconcile failed with the
// panic, the status and the gate never said why, and the check came again
// only with the controller's growing backoff, up to minutes after Vault
// was back (the HA benchmark's standby mode found it).
func TestASealedVaultIsCheckedAgainWithinSeconds(t *testing.T) {
	var sealed atomic.Bool
	sealed.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		reply := func(code int, body any) {
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(body)
		}
		switch {
		case r.URL.Path == "/v1/sys/seal-status" && sealed.Load():
			reply(200, map[string]any{"sealed": true, "version": "1.21.4"})
		case r.URL.Path == "/v1/sys/seal-status":
			reply(200, map[string]any{"sealed": false, "version": "1.21.4", "cluster_id": "c-1"})
		case sealed.Load():
			reply(503, map[string]any{"errors": []string{"Vault is sealed"}})
		case r.URL.Path == "/v1/auth/token/lookup-self":
			reply(200, map[string]any{"data": map[string]any{"ttl": 0, "renewable": false, "policies": []string{"root"}}})
		case r.URL.Path == "/v1/sys/auth":
			reply(200, map[string]any{"data": map[string]any{"salt-minions/": map[string]any{"type": "approle", "accessor": "auth_approle_1"}}})
		default:
			reply(404, map[string]any{"errors": []string{}})
		}
	}))
	defer srv.Close()

	conn := &v1alpha1.VaultConnection{
		ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: 1, UID: "u1"},
		Spec: v1alpha1.VaultConnectionSpec{Address: srv.URL, Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
			SecretReference: v1alpha1.SecretReference{Name: "vault-token", Namespace: "ops"}}}}},
		Status: v1alpha1.VaultConnectionStatus{ClusterID: "c-1"},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vault-token", Namespace: "ops"}, Data: map[string][]byte{"token": []byte("s.token")}}
	c := testkit.Builder().WithObjects(conn, secret).WithStatusSubresource(conn).Build()
	conns := &Connections{Client: c, Cache: &vault.Cache{}}
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(100), Connections: conns}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}}

	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatalf("the check of a sealed Vault: %v", err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > maxRetry {
		t.Errorf("checked again after %s, want within %s", res.RequeueAfter, maxRetry)
	}
	got := &v1alpha1.VaultConnection{}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	ready := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.VaultUnavailableReason || got.Status.ClusterID != "c-1" || got.Status.LastError == "" {
		t.Errorf("sealed: Ready %+v, cluster ID %q, last error %q; want Ready=False VaultUnavailable, the cluster ID kept, the error", ready, got.Status.ClusterID, got.Status.LastError)
	}
	if err := conns.gated("vault", conns.keyOf("vault")); err == nil {
		t.Error("the gate is open while the Vault is sealed")
	}

	sealed.Store(false)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("the check after the unseal: %v", err)
	}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if !apimeta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ReadyCondition) {
		t.Errorf("unsealed: conditions %+v, want Ready", got.Status.Conditions)
	}
	if err := conns.gated("vault", conns.keyOf("vault")); err != nil {
		t.Errorf("the gate stays closed after a passing check: %v", err)
	}
}
