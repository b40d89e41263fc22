package shared

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Two managers in one process (the e2e suites) must both be counted on the
// one endpoint, not only the first.
func TestNewMetricsTwiceSharesTheRegisteredCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := NewMetrics(reg), NewMetrics(reg)
	a.Request("write", "p", 204, time.Millisecond)
	b.Request("write", "p", 204, time.Millisecond)
	b.Login("token", nil)
	if got := testutil.ToFloat64(a.vaultRequests.WithLabelValues("write", "204")); got != 2 {
		t.Errorf("requests counted %v, want 2", got)
	}
	if n, err := testutil.GatherAndCount(reg, "minionvault_vault_logins_total"); err != nil || n != 1 {
		t.Errorf("logins series %d, %v", n, err)
	}
}
