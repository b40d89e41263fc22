//go:build integration

// Package scale measures the operator at fleet size against a floor: the
// same bindings created in the API server plus the least Vault and
// Kubernetes work any operator must do for them, done directly, in the
// same run. Each converge, the floors' and the operator's, begins on fresh
// servers (the rollouts' floors follow theirs on its servers, as the
// operator's rollouts follow its converge). The operator runs as its own
// process (bin/minionvault operator) with its own Kubernetes user and Vault
// token; its calls are counted from the API server's and Vault's audit
// logs, and its CPU, and the servers', from /proc.
//
//	make bench-scale                              # N=200, both shapes
//	make bench-scale BENCH_N="1000 3000 10000"    # the table, one session
//	make bench-scale BENCH_N=50000 BENCH_SHAPES=shared BENCH_PHASES=converge,restart
//
// BENCH_PHASES (SCALE_PHASES) runs only some of the operator's phases, the
// converge always and the floors their ratios need: at 50,000 bindings
// every phase is long, and a question about one need not wait for all.
//
// The operator runs with leader election; the failover phase SIGKILLs it
// beside a standby and watches the new leader for SCALE_FAILOVER_WATCH
// (3m) with the template's interval at harness.failoverInterval.
//
// TestScaleBudgets (part of `make integration`) runs N=200 and asserts the
// per-binding budgets (harness/budgets.go).
//
// The benchmark program itself is the package harness: this package holds
// only its tests and benchmarks (scale_test.go; ha_test.go, the operator
// through Vault HA failovers).
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

// TestScaleBudgets runs both shapes at N=200 (the harness's ciN) and
// asserts the per-binding budgets of a fleet. The failure messages carry the
// measured numbers; the whole table is in the log and in
// bin/scale/budgets.md.
func TestScaleBudgets(t *testing.T) {
	cfg := harness.DefaultConfig()
	// A minute of the new leader's reads is enough to see a burst; the
	// benchmark watches three.
	cfg.FailoverWatch = time.Minute
	cfg.Logf = t.Logf
	cfg.Bin = harness.OperatorBinary(t)
	started := time.Now()
	all := harness.RunAll(t.Context(), cfg)

	var checks []harness.Check
	for _, s := range all {
		checks = append(checks, harness.BudgetChecks(s)...)
	}
	report := harness.Header(cfg, harness.Command("go test -tags integration -run TestScaleBudgets ./test/scale"), started, harness.Machine()) + harness.Table(all, checks)
	path := harness.WriteReport(t, harness.OutDir(t), "budgets.md", report)
	t.Logf("report (also in %s):\n%s", path, report)
	for _, c := range checks {
		if !c.OK {
			t.Errorf("%s: %s", c.Goal, c.Measured)
		}
	}
}

// BenchmarkScale is `make bench-scale`: the sizes and shapes of SCALE_N
// and SCALE_SHAPES, with CPU profiles of the operator, a markdown report
// on stdout and in $SCALE_OUT (bin/scale). It fails only when a phase
// fails; the goals are reported, met or not.
func BenchmarkScale(b *testing.B) {
	cfg, err := harness.FromEnv(harness.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	cfg.Bin = harness.OperatorBinary(b)
	dir := harness.OutDir(b)
	started := time.Now()
	stamp := started.Format("20060102-150405")
	cfg.ProfileDir = filepath.Join(dir, "profiles-"+stamp)
	if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
		b.Fatal(err)
	}
	cfg.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	host := harness.Machine()
	baseBin, baseName, err := harness.Baseline()
	if err != nil {
		b.Fatal(err)
	}
	var all, base []*harness.ShapeResult
	if baseBin != "" {
		all, base = harness.RunCompared(b.Context(), cfg, baseBin, baseName)
	} else {
		all = harness.RunAll(b.Context(), cfg)
	}

	var checks []harness.Check
	for _, s := range all {
		checks = append(checks, harness.BudgetChecks(s)...)
	}
	checks = append(checks, harness.GoalChecks(all)...)
	checks = append(checks, harness.RoundGoals(all)...)
	report := harness.Header(cfg, harness.Command("go test -tags integration -run '^$' -bench BenchmarkScale -benchtime 1x ./test/scale"), started, host) +
		fmt.Sprintf("- total time %s\n", time.Since(started).Round(time.Second)) + harness.Table(all, checks) + harness.RoundsSection(all)
	if baseBin != "" {
		report += harness.Comparison(all, base, baseName) + "\n## " + baseName + ": every phase\n" + harness.Table(base, nil)
	}
	path := harness.WriteReport(b, dir, "scale-"+stamp+".md", report)
	harness.WriteReport(b, dir, "scale.md", report)
	// The raw results, to compare runs or render them again.
	if data, err := json.MarshalIndent(all, "", "  "); err == nil {
		harness.WriteReport(b, dir, "scale-"+stamp+".json", string(data))
	}
	fmt.Println(report)
	fmt.Printf("\nreport: %s\n", path)
	for _, s := range append(all, base...) {
		if s.Err != "" {
			b.Errorf("N=%d %s %s: %s", s.N, s.Shape, s.Binary, s.Err)
		}
		for _, p := range s.Phases {
			if p.Err != "" {
				b.Errorf("N=%d %s %s: %s", s.N, s.Shape, p.Phase, p.Err)
			}
		}
	}
}
