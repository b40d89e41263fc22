package connection

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
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

// answeringVault is one Vault node as the connection check sees it: its
// cluster ID, the accessor of its AppRole mount, and how many of the next
// sys/seal-status answers still say sealed while every other request is
// answered unsealed (the node unsealed between the check's requests).
type answeringVault struct {
	mu         sync.Mutex
	clusterID  string
	accessor   string
	sealedLeft int
	sealStatus int // sys/seal-status requests answered
}

func (v *answeringVault) set(clusterID, accessor string, sealedLeft int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clusterID, v.accessor, v.sealedLeft = clusterID, accessor, sealedLeft
}

func (v *answeringVault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	reply := func(code int, body any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	}
	switch r.URL.Path {
	case "/v1/sys/seal-status":
		v.sealStatus++
		if v.sealedLeft > 0 {
			v.sealedLeft--
			reply(200, map[string]any{"sealed": true, "version": "1.21.4"})
			return
		}
		reply(200, map[string]any{"sealed": false, "version": "1.21.4", "cluster_id": v.clusterID})
	case "/v1/auth/token/lookup-self":
		reply(200, map[string]any{"data": map[string]any{"ttl": 0, "renewable": false, "policies": []string{"root"}}})
	case "/v1/sys/auth":
		reply(200, map[string]any{"data": map[string]any{
			"salt-minions/": map[string]any{"type": "approle", "accessor": v.accessor},
			"token/":        map[string]any{"type": "token", "accessor": "auth_token_1"},
		}})
	default:
		reply(404, map[string]any{"errors": []string{}})
	}
}

// TestIdentityOfACheckThatMetASealedAnswer: the connection's identity
// (status.identity, which every binding's check schedule is keyed on)
// changes only for another Vault or a re-created AppRole mount, never for
// a check whose sys/seal-status was answered sealed, even when the node
// was unsealed before the token lookup and sys/auth of the same check
// passed (the unsealed standby of an HA benchmark: the empty cluster ID
// and the identity made of it went to status, and the next check put the
// real ones back, two changes that each had every binding read again).
func TestIdentityOfACheckThatMetASealedAnswer(t *testing.T) {
	cases := []struct {
		name string
		// what the node answers at the second check
		clusterID, accessor string
		sealedAnswers       int
		// the second check passes; status.identity changed with it
		wantReady, wantChanged bool
		// a third check, the node unsealed, keeps the first identity
		thirdKeeps bool
	}{
		{name: "unsealed between seal-status and the token lookup", clusterID: "c-1", accessor: "auth_approle_1", sealedAnswers: 1,
			wantReady: false, wantChanged: false, thirdKeeps: true},
		{name: "the same Vault", clusterID: "c-1", accessor: "auth_approle_1",
			wantReady: true, wantChanged: false, thirdKeeps: true},
		{name: "the AppRole mount disabled and enabled again", clusterID: "c-1", accessor: "auth_approle_2",
			wantReady: true, wantChanged: true},
		{name: "another Vault (initialised anew)", clusterID: "c-2", accessor: "auth_approle_1",
			wantReady: true, wantChanged: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &answeringVault{}
			node.set("c-1", "auth_approle_1", 0)
			srv := httptest.NewServer(node)
			defer srv.Close()
			conn := &v1alpha1.VaultConnection{
				ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: 1, UID: "u1"},
				Spec: v1alpha1.VaultConnectionSpec{Address: srv.URL, Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
					SecretReference: v1alpha1.SecretReference{Name: "vault-token", Namespace: "ops"}}}}},
			}
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vault-token", Namespace: "ops"}, Data: map[string][]byte{"token": []byte("s.token")}}
			c := testkit.Builder().WithObjects(conn, secret).WithStatusSubresource(conn).Build()
			conns := &Connections{Client: c, Cache: &vault.Cache{}}
			r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(100), Connections: conns}
			ctx := context.Background()
			req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}}
			status := func() v1alpha1.VaultConnectionStatus {
				t.Helper()
				got := &v1alpha1.VaultConnection{}
				if err := c.Get(ctx, req.NamespacedName, got); err != nil {
					t.Fatal(err)
				}
				return got.Status
			}

			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatalf("the first check: %v", err)
			}
			first := status()
			if first.Identity == "" || first.ClusterID != "c-1" {
				t.Fatalf("the first check: identity %q, cluster ID %q", first.Identity, first.ClusterID)
			}

			node.set(tc.clusterID, tc.accessor, tc.sealedAnswers)
			res, err := r.Reconcile(ctx, req)
			if err != nil {
				t.Fatalf("the second check: %v", err)
			}
			second := status()
			ready := apimeta.IsStatusConditionTrue(second.Conditions, v1alpha1.ReadyCondition)
			if ready != tc.wantReady {
				t.Errorf("the second check: Ready %v (%+v), want %v", ready, second.Conditions, tc.wantReady)
			}
			if changed := second.Identity != first.Identity; changed != tc.wantChanged {
				t.Errorf("the second check: identity %q → %q (cluster ID %q → %q), want changed %v",
					first.Identity, second.Identity, first.ClusterID, second.ClusterID, tc.wantChanged)
			}
			if second.ClusterID == "" {
				t.Error("the second check left status without a cluster ID")
			}
			if !tc.wantReady {
				if err := conns.gated("vault", conns.keyOf("vault")); err == nil {
					t.Error("the gate is open after a check that met a sealed answer")
				}
				if res.RequeueAfter <= 0 || res.RequeueAfter > maxRetry {
					t.Errorf("checked again after %s, want within %s", res.RequeueAfter, maxRetry)
				}
				if c := apimeta.FindStatusCondition(second.Conditions, v1alpha1.ReadyCondition); c == nil || c.Reason != v1alpha1.VaultUnavailableReason {
					t.Errorf("the second check: Ready %+v, want VaultUnavailable", c)
				}
			}

			if !tc.thirdKeeps {
				return
			}
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatalf("the third check: %v", err)
			}
			third := status()
			if !apimeta.IsStatusConditionTrue(third.Conditions, v1alpha1.ReadyCondition) || third.Identity != first.Identity {
				t.Errorf("the third check: Ready %+v, identity %q, want Ready with %q", third.Conditions, third.Identity, first.Identity)
			}
		})
	}
}

// TestUnsealed: only an answer naming a cluster passes.
func TestUnsealed(t *testing.T) {
	for _, tc := range []struct {
		info vault.ServerInfo
		want error
	}{
		{info: vault.ServerInfo{Version: "1.21.4", ClusterID: "c-1"}},
		{info: vault.ServerInfo{Version: "1.21.4"}, want: errNoClusterID},
	} {
		if err := unsealed(tc.info); !errors.Is(err, tc.want) {
			t.Errorf("unsealed(%+v) = %v, want %v", tc.info, err, tc.want)
		}
	}
}
