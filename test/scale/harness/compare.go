//go:build integration

package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Comparing two operator binaries in one session: SCALE_BASELINE names the
// binary of the change's parent (built by the Makefile from a git
// worktree, or given), and every N and shape runs twice on fresh servers,
// once per binary, the order alternating so that neither always runs on a
// machine warmed by the other. The floors run once, with this change's
// binary run (they do not depend on the operator).
const (
	envBaseline     = "SCALE_BASELINE"      // the other operator binary
	envBaselineName = "SCALE_BASELINE_NAME" // its label in the report (default "parent")
)

// Baseline returns the other binary and its label, if one is asked for.
func Baseline() (bin, name string, err error) {
	bin = os.Getenv(envBaseline)
	if bin == "" {
		return "", "", nil
	}
	if _, err := os.Stat(bin); err != nil {
		return "", "", fmt.Errorf("%s: %w", envBaseline, err)
	}
	name = os.Getenv(envBaselineName)
	if name == "" {
		name = "parent"
	}
	return bin, name, nil
}

// RunCompared runs every N and shape with both binaries.
func RunCompared(ctx context.Context, cfg Config, baseBin, baseName string) (this, base []*ShapeResult) {
	i := 0
	for _, n := range cfg.ns {
		for _, shape := range cfg.shapes {
			runThis := func() {
				r := runShape(ctx, cfg, n, shape)
				r.Binary = "this change"
				this = append(this, r)
			}
			runBase := func() {
				c := cfg
				c.Bin, c.skipFloors = baseBin, true
				if cfg.ProfileDir != "" {
					c.ProfileDir = filepath.Join(cfg.ProfileDir, baseName)
					_ = os.MkdirAll(c.ProfileDir, 0o755)
				}
				r := runShape(ctx, c, n, shape)
				r.Binary = baseName
				base = append(base, r)
			}
			if i%2 == 0 {
				runBase()
				runThis()
			} else {
				runThis()
				runBase()
			}
			i++
		}
	}
	return this, base
}

// Comparison renders the operator's phases of both binaries side by side:
// wall time, the operator's CPU, its peak RSS, and its Vault and
// Kubernetes calls per binding, with this change over the baseline.
func Comparison(this, base []*ShapeResult, baseName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## This change beside %s (same session, fresh servers per run, order alternating)\n\n", baseName)
	fmt.Fprintf(&b, "| N | shape | phase | wall s %s | wall s this | ×  | op CPU s %s | op CPU s this | × | op peak RSS MiB %s | this | Vault R+W/b %s | this | K8s W/b %s | this |\n", baseName, baseName, baseName, baseName, baseName)
	b.WriteString("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range this {
		var o *ShapeResult
		for _, c := range base {
			if c.N == t.N && c.Shape == t.Shape {
				o = c
			}
		}
		if o == nil {
			continue
		}
		for _, p := range t.Phases {
			if p.Actor != "operator" {
				continue
			}
			q := o.phase(p.Phase)
			if q == nil {
				fmt.Fprintf(&b, "| %d | %s | %s | missing in %s |\n", t.N, t.Shape, p.Phase, baseName)
				continue
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %.1f | %.1f | %s | %.1f | %.1f | %s | %.0f | %.0f | %s | %s | %s | %s |\n",
				t.N, t.Shape, p.Phase,
				q.Wall.Seconds(), p.Wall.Seconds(), ratio(p.Wall.Seconds(), q.Wall.Seconds()),
				q.CPU["operator"], p.CPU["operator"], ratio(p.CPU["operator"], q.CPU["operator"]),
				float64(q.PeakKiB)/1024, float64(p.PeakKiB)/1024,
				perB(readsOf(q.Vault)+writesOf(q.Vault), q.Per), perB(readsOf(p.Vault)+writesOf(p.Vault), p.Per),
				perB(kubeWrites(q), q.Per), perB(kubeWrites(p), p.Per))
		}
	}
	b.WriteString("\n×: this change over the baseline (below 1 is faster or less). Wall time is noisy on a shared machine: read a ratio within about ±15 % as equal.\n")
	return b.String()
}

func ratio(a, b float64) string {
	if b <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", a/b)
}
