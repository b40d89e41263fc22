//go:build integration

// Package harness is test/scale's benchmark program: it starts fresh
// servers per size and shape (env.go), creates the fleet (objects.go),
// measures the floors (floor.go) and the operator's phases (operator.go,
// phases.go, sweep.go, tracker.go) as its own process, counts calls from
// the audit logs (audit.go) and CPU from /proc (proc.go, cgroup.go,
// serverprof.go), runs Vault HA failovers (ha.go, failover.go), and
// reports them (report.go, ha_report.go, rounds.go, compare.go) against
// the budgets and goals (budgets.go). test/scale's tests and benchmarks
// (TestScaleBudgets, BenchmarkScale, TestVaultHA, BenchmarkHA) call it;
// its own tests are the unit tests of its parts.
//
// Its files carry the integration build tag, as the suites that use it do:
// a plain go build or go vet of the module does not compile it.
package harness

import (
	"context"
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

func DefaultConfig() Config {
	return Config{
		ns: []int{ciN}, shapes: allShapes,
		creators: 4, floorWorkers: 4, concurrency: 4, changes: 5, FailoverWatch: 3 * time.Minute,
		phaseTimeout: func(n int) time.Duration { return 2*time.Minute + time.Duration(n)*60*time.Millisecond },
	}
}

// FromEnv applies the SCALE_* variables to cfg.
func FromEnv(cfg Config) (Config, error) {
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
		cfg.FailoverWatch = d
	}
	return cfg, nil
}

// OperatorBinary is $MINIONVAULT_BIN, or a fresh build of cmd/minionvault.
func OperatorBinary(tb testing.TB) string {
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

func OutDir(tb testing.TB) string {
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

// Machine describes where the numbers come from.
func Machine() string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	load, _ := os.ReadFile("/proc/loadavg")
	rev, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil || len(rev) == 0 {
		rev = []byte("unknown (no git)")
	}
	return fmt.Sprintf("%d CPUs, Linux %s, load average at start %s; tree %s",
		runtime.NumCPU(), strings.TrimSpace(string(kernel)), strings.Join(strings.Fields(string(load))[:3], " "), strings.TrimSpace(string(rev)))
}

func Command(fallback string) string {
	if c := os.Getenv(envCommand); c != "" {
		return c
	}
	return fallback
}

// RunAll measures every N and shape, one after the other, each in
// cfg.rounds rounds.
func RunAll(ctx context.Context, cfg Config) []*ShapeResult {
	var all []*ShapeResult
	for _, n := range cfg.ns {
		for _, shape := range cfg.shapes {
			for _, round := range cfg.roundNumbers() {
				all = append(all, runRound(ctx, cfg, n, shape, round))
			}
		}
	}
	return all
}

func WriteReport(tb testing.TB, dir, name, report string) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		tb.Errorf("writing the report: %v", err)
	}
	return path
}
