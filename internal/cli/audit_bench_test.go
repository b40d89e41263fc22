package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minionvault/minion-vault-operator/internal/testing/samples"
)

// BenchmarkAuditDiffCommand10k is `audit diff -o json` end to end (reading
// and rendering the manifests included) of a template change over 10,000
// bindings (goal: 2 s).
func BenchmarkAuditDiffCommand10k(b *testing.B) {
	dir := b.TempDir()
	base, head := filepath.Join(dir, "base"), filepath.Join(dir, "head")
	samples.WriteFleet(b, base, 10000, false)
	samples.WriteFleet(b, head, 10000, true)
	b.ResetTimer()
	for b.Loop() {
		var out, errOut bytes.Buffer
		if code := Main([]string{"audit", "diff", "--base", base, "--head", head, "-o", "json"}, &out, &errOut); code != auditFindings {
			b.Fatalf("exit %d: %s", code, errOut.String())
		}
	}
}

// BenchmarkAuditDiffProcess10k is audit diff -o json of the template
// change over 10,000 bindings as a process: the binary reads the manifests
// from files, renders both sides, compares and prints. It reports the
// medians of the wall time, the CPU time and the peak RSS, and the extra
// memory: the peak RSS less that of the same binary on a one-binding fleet
// (goal: 2 s and 64 MiB). MINIONVAULT_AUDIT_BINS names binaries to compare
// (name=path, comma-separated, run in turn in every iteration, on the same
// fleet); without it, this package's command is built. AUDIT_FLEET_DIR
// keeps the fleet there.
func BenchmarkAuditDiffProcess10k(b *testing.B) {
	bins := auditBenchBinaries(b)
	dir := os.Getenv("AUDIT_FLEET_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	samples.WriteFleet(b, filepath.Join(dir, "base"), 10000, false)
	samples.WriteFleet(b, filepath.Join(dir, "head"), 10000, true)
	samples.WriteFleet(b, filepath.Join(dir, "one-base"), 1, false)
	samples.WriteFleet(b, filepath.Join(dir, "one-head"), 1, true)
	type runs struct{ wall, cpu, rss, idle []float64 }
	got := make([]runs, len(bins))
	for b.Loop() {
		for i, bin := range bins {
			r := &got[i]
			wall, cpu, rss := runAuditDiff(b, bin.path, filepath.Join(dir, "base"), filepath.Join(dir, "head"))
			_, _, idle := runAuditDiff(b, bin.path, filepath.Join(dir, "one-base"), filepath.Join(dir, "one-head"))
			r.wall, r.cpu, r.rss, r.idle = append(r.wall, wall), append(r.cpu, cpu), append(r.rss, rss), append(r.idle, idle)
		}
	}
	for i, bin := range bins {
		r := got[i]
		b.ReportMetric(median(r.wall), bin.name+"-s")
		b.ReportMetric(median(r.cpu), bin.name+"-cpu-s")
		b.ReportMetric(median(r.rss), bin.name+"-peak-MiB")
		b.ReportMetric(median(r.rss)-median(r.idle), bin.name+"-extra-MiB")
	}
}

type auditBenchBinary struct{ name, path string }

// auditBenchBinaries are the binaries of MINIONVAULT_AUDIT_BINS, or this
// package's command, built.
func auditBenchBinaries(b *testing.B) []auditBenchBinary {
	var out []auditBenchBinary
	for _, nb := range strings.Split(os.Getenv("MINIONVAULT_AUDIT_BINS"), ",") {
		if nb == "" {
			continue
		}
		name, path, ok := strings.Cut(nb, "=")
		if !ok {
			b.Fatalf("MINIONVAULT_AUDIT_BINS: %q is not name=path", nb)
		}
		out = append(out, auditBenchBinary{name, path})
	}
	if len(out) > 0 {
		return out
	}
	bin := filepath.Join(b.TempDir(), "minionvault")
	if msg, err := exec.Command("go", "build", "-o", bin, "../../cmd/minionvault").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, msg)
	}
	return []auditBenchBinary{{"this", bin}}
}

// runAuditDiff runs audit diff -o json through bin and returns its wall
// time and CPU time in seconds and its peak RSS in MiB. The peak is the
// last VmHWM read from /proc every millisecond while it runs: the rusage
// of a child started by Go counts the RSS of this process too (the child
// shares its memory until it execs), so it cannot say the peak of a small
// run.
func runAuditDiff(b *testing.B, bin, base, head string) (wall, cpu, rssMiB float64) {
	cmd := exec.Command(bin, "audit", "diff", "--base", base, "--head", head, "-o", "json")
	cmd.Stdout = io.Discard
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	done := make(chan struct{})
	var hwmKiB int64
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			if v, ok := vmHWM(status); ok && v > hwmKiB {
				hwmKiB = v
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	wall = time.Since(start).Seconds()
	close(done)
	<-polled
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != auditFindings {
		b.Fatalf("%s: %v (want exit %d): %s", bin, err, auditFindings, errOut.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu = (time.Duration(ru.Utime.Nano()) + time.Duration(ru.Stime.Nano())).Seconds()
	return wall, cpu, float64(hwmKiB) / 1024
}

// vmHWM is the VmHWM line of a /proc/PID/status file, in KiB, while the
// process has its own memory (after the exec).
func vmHWM(status string) (int64, bool) {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
