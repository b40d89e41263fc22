package connection

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// leased is the fake Vault with a token that expires, as the real
// client's.
type leased struct {
	*vaulttest.Fake
	expires time.Time
}

func (l leased) TokenLease() (time.Time, time.Duration) { return l.expires, time.Hour }

// A check records whether the connection works and when its token
// expires; a failed check keeps the expiry; a deleted connection leaves
// no series.
func TestConnectionMetricsFollowChecks(t *testing.T) {
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: 1}, Spec: v1alpha1.VaultConnectionSpec{Address: "http://vault"}}
	h := newHarness(t, conn)
	h.v.SetVersion("1.21.4")
	exp := time.Unix(1_900_000_000, 0)
	h.conns.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) {
		return leased{Fake: h.v, expires: exp}, nil
	}
	reg := prometheus.NewRegistry()
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.conns, Metrics: metrics.New(reg)}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}}); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"minionvault_connection_ready", "minionvault_connection_token_expiry_timestamp_seconds", "minionvault_connection_token_lease_seconds"}
	want := func(ready int) {
		t.Helper()
		exposition := `# HELP minionvault_connection_ready 1 when the VaultConnection's last check passed (Ready), 0 when it failed.
# TYPE minionvault_connection_ready gauge
minionvault_connection_ready{connection="vault"} ` + map[int]string{0: "0", 1: "1"}[ready] + `
# HELP minionvault_connection_token_expiry_timestamp_seconds When the VaultConnection's current Vault token expires (Unix time), as of its last check; absent for a token that never expires.
# TYPE minionvault_connection_token_expiry_timestamp_seconds gauge
minionvault_connection_token_expiry_timestamp_seconds{connection="vault"} 1.9e+09
# HELP minionvault_connection_token_lease_seconds The usual lease of the VaultConnection's Vault token: the operator renews it or logs in again when a third of it is left.
# TYPE minionvault_connection_token_lease_seconds gauge
minionvault_connection_token_lease_seconds{connection="vault"} 3600
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exposition), names...); err != nil {
			t.Fatal(err)
		}
	}
	reconcile()
	want(1)
	h.v.FailNext("CheckToken", &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 503, Messages: []string{"Vault is sealed"}})
	reconcile()
	want(0)
	if err := h.c.Delete(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != 0 {
		t.Fatalf("%d series after the connection was deleted (%v), want none", n, err)
	}
}
