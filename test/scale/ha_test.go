//go:build integration

package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minionvault/minion-vault-operator/test/scale/harness"
)

// TestVaultHA (part of `make integration`): both modes at N=50, every
// operation undisturbed and disturbed, asserting the goals: no binding
// Stalled, Vault as rendered with nothing duplicated and everything
// proven, every binding Ready within the outage and a bound, and the
// Vault calls per binding near the undisturbed ones. The report goes to
// bin/scale/ha-ci.md.
func TestVaultHA(t *testing.T) {
	cfg := harness.DefaultHAConfig()
	// Both modes at once; elections at raft's fastest timing, which Vault
	// recommends for production (the benchmark keeps Vault's default, 5).
	cfg.N, cfg.SealedFor, cfg.PhaseTimeout, cfg.Parallel, cfg.PerfMultiplier = harness.HACIN, 5*time.Second, 3*time.Minute, true, 1
	// SCALE_HA_* change it, to look into one mode or a larger fleet.
	cfg, err := harness.HAFromEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logf = t.Logf
	cfg.Bin = harness.OperatorBinary(t)
	started := time.Now()
	all := harness.RunHA(t.Context(), cfg)
	checks := harness.HAChecks(all)
	report := harness.HAHeader(cfg, harness.Command("go test -tags integration -run TestVaultHA ./test/scale"), started, harness.Machine()) +
		fmt.Sprintf("- total time %s\n", time.Since(started).Round(time.Second)) + harness.HATable(all, checks)
	path := harness.WriteReport(t, harness.OutDir(t), "ha-ci.md", report)
	t.Logf("report (also in %s):\n%s", path, report)
	for _, c := range checks {
		if !c.OK {
			t.Errorf("%s: %s", c.Goal, c.Measured)
		}
	}
}

// BenchmarkHA is `make bench-ha`: both modes at SCALE_HA_N (1,000)
// bindings per fleet, the report on stdout and in $SCALE_OUT (bin/scale)
// as ha-<time>.md and ha.md, the raw results as JSON. It fails when a goal
// is not met.
func BenchmarkHA(b *testing.B) {
	cfg, err := harness.HAFromEnv(harness.DefaultHAConfig())
	if err != nil {
		b.Fatal(err)
	}
	cfg.Bin = harness.OperatorBinary(b)
	cfg.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	dir := harness.OutDir(b)
	started := time.Now()
	host := harness.Machine()
	all := harness.RunHA(b.Context(), cfg)
	checks := harness.HAChecks(all)
	stamp := started.Format("20060102-150405")
	report := harness.HAHeader(cfg, harness.Command("go test -tags integration -run '^$' -bench BenchmarkHA -benchtime 1x ./test/scale"), started, host) +
		fmt.Sprintf("- total time %s\n", time.Since(started).Round(time.Second)) + harness.HATable(all, checks)
	path := harness.WriteReport(b, dir, "ha-"+stamp+".md", report)
	harness.WriteReport(b, dir, "ha.md", report)
	if data, err := json.MarshalIndent(all, "", "  "); err == nil {
		harness.WriteReport(b, dir, "ha-"+stamp+".json", string(data))
	}
	fmt.Println(report)
	fmt.Printf("\nreport: %s\n", filepath.Clean(path))
	for _, c := range checks {
		if !c.OK {
			b.Errorf("%s: %s", c.Goal, c.Measured)
		}
	}
}
