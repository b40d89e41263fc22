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
// (3m) with the template's interval at failoverInterval.
//
// TestScaleBudgets (part of `make integration`) runs N=200 and asserts the
// per-binding budgets (budgets_test.go).
package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

// Environment variables of the benchmark (the Makefile sets them from
// BENCH_N, BENCH_SHAPES and BENCH_PHASES).
const (
	envN       = "SCALE_N"         // sizes, such as "1000 3000 10000" (default 200)
	envShapes  = "SCALE_SHAPES"    // shared, perminion, or both (default)
	envPhases  = "SCALE_PHASES"    // the operator's phases to run, such as "converge,restart" (default all)
	envOut     = "SCALE_OUT"       // folder of the reports and profiles (default bin/scale)
	envBin     = "MINIONVAULT_BIN" // the operator binary (default: built into a temporary folder)
	envTimeout = "SCALE_PHASE_TIMEOUT"
	envWatch   = "SCALE_FAILOVER_WATCH" // how long the failover watches the new leader's reads (default 3m)
	envCommand = "SCALE_COMMAND"        // the command to quote in the report
	// SCALE_NO_FLOORS=1 skips the floors: no ratios, for a quick look at
	// the operator's own phases (make bench-scale BENCH_FLOORS=no).
	envNoFloors = "SCALE_NO_FLOORS"
	envRounds   = "SCALE_ROUNDS" // how many times each size and shape is measured (default 1)
)

// The harness's informers log through controller-runtime: errors only.
func init() {
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
}

// ciN is the size TestScaleBudgets runs: a correctness check of the
// budgets that CI can afford.
const ciN = 200

func defaultConfig() config {
	return config{
		ns: []int{ciN}, shapes: allShapes,
		creators: 4, floorWorkers: 4, concurrency: 4, changes: 5, failoverWatch: 3 * time.Minute,
		phaseTimeout: func(n int) time.Duration { return 2*time.Minute + time.Duration(n)*60*time.Millisecond },
	}
}

// fromEnv applies the SCALE_* variables to cfg.
func fromEnv(cfg config) (config, error) {
	if v := strings.TrimSpace(os.Getenv(envN)); v != "" {
		cfg.ns = nil
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' }) {
			n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
			if err != nil || n < 10 {
				return cfg, fmt.Errorf("%s: %q is not a size of at least 10", envN, f)
			}
			cfg.ns = append(cfg.ns, n)
		}
	}
	if v := strings.TrimSpace(os.Getenv(envShapes)); v != "" && v != "both" {
		cfg.shapes = nil
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' }) {
			if f != shapeShared && f != shapePerMinion {
				return cfg, fmt.Errorf("%s: unknown shape %q (%s or %s)", envShapes, f, shapeShared, shapePerMinion)
			}
			cfg.shapes = append(cfg.shapes, f)
		}
	}
	if v := strings.TrimSpace(os.Getenv(envPhases)); v != "" {
		phases, err := parsePhases(v)
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", envPhases, err)
		}
		cfg.phases = phases
	}
	if v := os.Getenv(envTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", envTimeout, err)
		}
		cfg.phaseTimeout = func(int) time.Duration { return d }
	}
	if v := strings.TrimSpace(os.Getenv(envRounds)); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 1 || r > 9 {
			return cfg, fmt.Errorf("%s: %q is not a number of rounds from 1 to 9", envRounds, v)
		}
		cfg.rounds = r
	}
	if v := strings.TrimSpace(os.Getenv(envNoFloors)); v != "" && v != "0" {
		cfg.skipFloors = true
	}
	if v := os.Getenv(envWatch); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			return cfg, fmt.Errorf("%s: %q is not a duration of at least 1m", envWatch, v)
		}
		cfg.failoverWatch = d
	}
	return cfg, nil
}

// operatorBinary is $MINIONVAULT_BIN, or a fresh build of cmd/minionvault.
func operatorBinary(tb testing.TB) string {
	if bin := os.Getenv(envBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			tb.Fatalf("%s: %v (run `make build`)", envBin, err)
		}
		return bin
	}
	root, err := localenv.ModuleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(tb.TempDir(), "minionvault")
	cmd := exec.Command(goBinary(), "build", "-trimpath", "-o", bin, "./cmd/minionvault")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building the operator: %v\n%s", err, out)
	}
	return bin
}

func goBinary() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func outDir(tb testing.TB) string {
	dir := os.Getenv(envOut)
	if dir == "" {
		root, err := localenv.ModuleRoot()
		if err != nil {
			tb.Fatal(err)
		}
		dir = filepath.Join(root, "bin", "scale")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// machine describes where the numbers come from.
func machine() string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	load, _ := os.ReadFile("/proc/loadavg")
	rev, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil || len(rev) == 0 {
		rev = []byte("unknown (no git)")
	}
	return fmt.Sprintf("%d CPUs, Linux %s, load average at start %s; tree %s",
		runtime.NumCPU(), strings.TrimSpace(string(kernel)), strings.Join(strings.Fields(string(load))[:3], " "), strings.TrimSpace(string(rev)))
}

func command(fallback string) string {
	if c := os.Getenv(envCommand); c != "" {
		return c
	}
	return fallback
}

// runAll measures every N and shape, one after the other, each in
// cfg.rounds rounds.
func runAll(ctx context.Context, cfg config) []*shapeResult {
	var all []*shapeResult
	for _, n := range cfg.ns {
		for _, shape := range cfg.shapes {
			for _, round := range cfg.roundNumbers() {
				all = append(all, runRound(ctx, cfg, n, shape, round))
			}
		}
	}
	return all
}

func writeReport(tb testing.TB, dir, name, report string) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		tb.Errorf("writing the report: %v", err)
	}
	return path
}

// TestScaleBudgets runs both shapes at N=200 (ciN) and asserts the
// per-binding budgets of a fleet. The failure messages carry the
// measured numbers; the whole table is in the log and in
// bin/scale/budgets.md.
func TestScaleBudgets(t *testing.T) {
	cfg := defaultConfig()
	// A minute of the new leader's reads is enough to see a burst; the
	// benchmark watches three.
	cfg.failoverWatch = time.Minute
	cfg.logf = t.Logf
	cfg.bin = operatorBinary(t)
	started := time.Now()
	all := runAll(t.Context(), cfg)

	var checks []check
	for _, s := range all {
		checks = append(checks, budgetChecks(s)...)
	}
	report := header(cfg, command("go test -tags integration -run TestScaleBudgets ./test/scale"), started, machine()) + table(all, checks)
	path := writeReport(t, outDir(t), "budgets.md", report)
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
	cfg, err := fromEnv(defaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	cfg.bin = operatorBinary(b)
	dir := outDir(b)
	started := time.Now()
	stamp := started.Format("20060102-150405")
	cfg.profileDir = filepath.Join(dir, "profiles-"+stamp)
	if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
		b.Fatal(err)
	}
	cfg.logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	host := machine()
	baseBin, baseName, err := baseline()
	if err != nil {
		b.Fatal(err)
	}
	var all, base []*shapeResult
	if baseBin != "" {
		all, base = runCompared(b.Context(), cfg, baseBin, baseName)
	} else {
		all = runAll(b.Context(), cfg)
	}

	var checks []check
	for _, s := range all {
		checks = append(checks, budgetChecks(s)...)
	}
	checks = append(checks, goalChecks(all)...)
	checks = append(checks, roundGoals(all)...)
	report := header(cfg, command("go test -tags integration -run '^$' -bench BenchmarkScale -benchtime 1x ./test/scale"), started, host) +
		fmt.Sprintf("- total time %s\n", time.Since(started).Round(time.Second)) + table(all, checks) + roundsSection(all)
	if baseBin != "" {
		report += comparison(all, base, baseName) + "\n## " + baseName + ": every phase\n" + table(base, nil)
	}
	path := writeReport(b, dir, "scale-"+stamp+".md", report)
	writeReport(b, dir, "scale.md", report)
	// The raw results, to compare runs or render them again.
	if data, err := json.MarshalIndent(all, "", "  "); err == nil {
		writeReport(b, dir, "scale-"+stamp+".json", string(data))
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
