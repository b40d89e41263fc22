package connection

import (
	"context"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

func TestVaultConnectionStatus(t *testing.T) {
	tests := []struct {
		name       string
		fail       error // of CheckToken
		wantReason string
	}{
		{"credentials work", nil, v1alpha1.SucceededReason},
		{"token revoked", &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 403, Messages: []string{"permission denied"}}, v1alpha1.AccessDeniedReason},
		{"sealed", &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 503, Messages: []string{"Vault is sealed"}}, v1alpha1.VaultUnavailableReason},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: 1}, Spec: v1alpha1.VaultConnectionSpec{Address: "http://vault"}}
			h := newHarness(t, conn)
			h.v.SetVersion("1.21.4")
			if tc.fail != nil {
				h.v.FailNext("CheckToken", tc.fail)
			}
			r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.conns}
			// A failed check is checked again after two seconds, not with
			// backoff from milliseconds, and gates the bindings; a passing
			// one at the check interval.
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}})
			switch {
			case err != nil:
				t.Fatalf("reconcile: %v", err)
			case tc.fail == nil && (res.RequeueAfter < 27*time.Second || res.RequeueAfter > 33*time.Second):
				t.Fatalf("reconcile: %+v; want the 30s check interval", res)
			case tc.fail != nil && res.RequeueAfter != 2*time.Second:
				t.Fatalf("reconcile: %+v; want two seconds", res)
			}
			if gated := h.conns.gated("vault", "") != nil; gated != (tc.fail != nil) {
				t.Errorf("gated %v", gated)
			}
			got := &v1alpha1.VaultConnection{}
			if err := h.c.Get(context.Background(), types.NamespacedName{Name: "vault"}, got); err != nil {
				t.Fatal(err)
			}
			ready := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReadyCondition)
			if ready == nil || ready.Reason != tc.wantReason {
				t.Fatalf("Ready %+v, want reason %s", ready, tc.wantReason)
			}
			if (ready.Status == metav1.ConditionTrue) != (tc.fail == nil) {
				t.Errorf("Ready %s", ready.Status)
			}
			if tc.fail == nil && got.Status.VaultVersion != "1.21.4" {
				t.Errorf("version %q", got.Status.VaultVersion)
			}
		})
	}
}
