package connection

import (
	"context"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
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

// A failing check still records the cluster ID that sys/seal-status (no
// token needed) reports: a Vault initialised anew kills the connection's
// token for good, and status must not go on naming the Vault that was (a
// binding's stale place there would wait on this connection for ever).
// What does not prove another Vault (no answer, sealed: no cluster ID)
// keeps the last one, and so do the places there.
func TestAFailingCheckReportsTheVaultItFinds(t *testing.T) {
	tests := []struct {
		name   string
		before string
		info   vault.ServerInfo // what seal-status answered (zero: no answer)
		want   string
		event  bool
	}{
		{name: "Vault reset: a new cluster ID", before: "c1", info: vault.ServerInfo{Version: "1.21.4", ClusterID: "c2"}, want: "c2", event: true},
		{name: "the same Vault refuses the token", before: "c1", info: vault.ServerInfo{Version: "1.21.4", ClusterID: "c1"}, want: "c1"},
		{name: "sealed: no cluster ID", before: "c1", info: vault.ServerInfo{Version: "1.21.4"}, want: "c1"},
		{name: "unreachable", before: "c1", want: "c1"},
		{name: "never checked before", info: vault.ServerInfo{Version: "1.21.4", ClusterID: "c2"}, want: "c2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{Recorder: rec}
			conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault"}, Status: v1alpha1.VaultConnectionStatus{ClusterID: tc.before, Identity: "id1"}}
			r.reports(conn, tc.info)
			if conn.Status.ClusterID != tc.want || conn.Status.Identity != "id1" {
				t.Errorf("cluster ID %q, identity %q; want %q, id1", conn.Status.ClusterID, conn.Status.Identity, tc.want)
			}
			ev := testkit.Drain(rec)
			if got := strings.Contains(ev, "Warning VaultChanged") && strings.Contains(ev, "c2, was c1"); got != tc.event {
				t.Errorf("events %q, want VaultChanged %v", ev, tc.event)
			}
		})
	}
}

// The whole check: Vault reset, the token dead (not re-created).
func TestAResetVaultKillsTheToken(t *testing.T) {
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: 1}, Spec: v1alpha1.VaultConnectionSpec{Address: "http://vault"}}
	h := newHarness(t, conn)
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.conns}
	ctx := context.Background()
	status := func() v1alpha1.VaultConnectionStatus {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}}); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.VaultConnection{}
		if err := h.c.Get(ctx, types.NamespacedName{Name: "vault"}, got); err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	before := status()
	info, _ := h.v.ServerInfo(ctx)
	if before.ClusterID != info.ClusterID {
		t.Fatalf("cluster ID %q, want %q", before.ClusterID, info.ClusterID)
	}
	h.v.Reset()
	h.v.FailNext("CheckToken", &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 403, Messages: []string{"permission denied"}})
	after := status()
	info, _ = h.v.ServerInfo(ctx)
	if after.ClusterID != info.ClusterID || after.Identity != before.Identity || after.LastError == "" {
		t.Errorf("after the reset: %+v; want cluster ID %s, identity %s kept, the error", after, info.ClusterID, before.Identity)
	}
	if ev := testkit.Drain(h.rec); !strings.Contains(ev, "Warning VaultChanged") {
		t.Errorf("events %q", ev)
	}
}

// A new process whose login fails (the token died with the Vault it was
// made in, reset while no operator ran) still records which Vault the
// connection points at: seal-status is asked without a token.
func TestALoginThatFailsStillReportsTheVault(t *testing.T) {
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: 1}, Spec: v1alpha1.VaultConnectionSpec{Address: "http://vault"},
		Status: v1alpha1.VaultConnectionStatus{ClusterID: "the-vault-that-was", Identity: "id1"}}
	h := newHarness(t, conn)
	logins := 0
	h.conns.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) {
		logins++
		if logins == 1 {
			// The check's login: refused.
			return nil, &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 403, Messages: []string{"permission denied"}}
		}
		return h.v, nil // a client that only asks seal-status
	}
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.conns}
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.VaultConnection{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "vault"}, got); err != nil {
		t.Fatal(err)
	}
	info, _ := h.v.ServerInfo(ctx)
	if got.Status.ClusterID != info.ClusterID || got.Status.LastError == "" || h.v.Calls("CheckToken") != 0 {
		t.Errorf("status %+v after a failed login; want cluster ID %s from seal-status, the error, no token check", got.Status, info.ClusterID)
	}
}
