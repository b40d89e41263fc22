package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// benchAuditFleet is a rendered fleet of n minions shaped like the
// samples: a templated minions policy, one policy per role, minions with
// one to three roles. extra is appended to every role policy (a template
// change).
func benchAuditFleet(tb testing.TB, n int, extra string) *fleet {
	tb.Helper()
	rule := func(p, caps string) string { return fmt.Sprintf("path %q {\n  capabilities = [%s]\n}\n", p, caps) }
	docs := map[string]string{
		"default": acl.DefaultPolicy,
		"saltstack/minions": rule("salt/data/minions/{{identity.entity.name}}/*", `"read", "list"`) +
			rule("salt/data/roles/{{identity.entity.metadata.roles__0}}", `"read"`) +
			rule("salt/data/roles/{{identity.entity.metadata.roles__1}}", `"read"`) +
			rule("salt/data/roles/{{identity.entity.metadata.roles__2}}", `"read"`),
	}
	const roles = 30
	for r := range roles {
		docs[fmt.Sprintf("salt_role_r%d", r)] = rule(fmt.Sprintf("salt/data/roles/r%d", r), `"read", "list"`) +
			rule(fmt.Sprintf("salt/metadata/roles/r%d", r), `"list"`) + strings.ReplaceAll(extra, "ROLE", fmt.Sprintf("r%d", r))
	}
	ev, err := acl.New(docs, acl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	f := &fleet{byID: map[string]*fleetMinion{}, docs: docs, ev: ev}
	for i := range n {
		id := fmt.Sprintf("m%05d", i)
		md := map[string]string{"minion-id": id}
		tok := []string{"saltstack/minions"}
		var rs []string
		for j := range 1 + i%3 {
			r := fmt.Sprintf("r%d", (i+j*7)%roles)
			md[fmt.Sprintf("roles__%d", j)] = r
			rs = append(rs, r)
			tok = append(tok, "salt_role_"+r)
		}
		md["roles"] = strings.Join(rs, ",")
		m := &fleetMinion{id: id, role: id, metadata: md, subject: acl.Subject{
			TokenPolicies: acl.LoginPolicies(tok, true),
			Entity:        &acl.Entity{ID: "id-" + id, Name: "salt_minion_" + id, Metadata: md},
		}}
		m.prep = ev.Prepare(m.subject)
		f.minions = append(f.minions, m)
		f.byID[id] = m
	}
	return f
}

// BenchmarkDiff10k is audit diff of a template change (every role policy
// gains a rule) over 10,000 rendered minions (goal: 2 s end to end).
func BenchmarkDiff10k(b *testing.B) {
	base := benchAuditFleet(b, 10000, "")
	head := benchAuditFleet(b, 10000, "path \"salt/data/shared/ROLE/*\" {\n  capabilities = [\"read\"]\n}\n")
	b.ResetTimer()
	for b.Loop() {
		r := diffFleets(base, head, nil)
		if r.Summary.Gaining != 10000 {
			b.Fatalf("%d gaining", r.Summary.Gaining)
		}
	}
}

// writeBenchManifests writes n MinionBindings of the sample template (one
// YAML file) and the template to dir; with head, the role policy's first
// rule gains "update" (a template change that touches every minion).
func writeBenchManifests(tb testing.TB, dir string, n int, head bool) {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "miniontemplate.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	t := string(data)
	if head {
		t = strings.Replace(t, "          capabilities: [read, list]\n", "          capabilities: [read, list, update]\n", 1)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "miniontemplate.yaml"), []byte(t), 0o644); err != nil {
		tb.Fatal(err)
	}
	roles := []string{"web", "db", "ci", "mail", "cache"}
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata:
  name: m%05[1]d
  namespace: default
spec:
  minionID: m%05[1]d
  templateRef:
    name: salt-minions
  grains:
    id: m%05[1]d
    os: Debian
    os_family: Debian
  pillar:
    roles: [%[2]s, %[3]s]
    env: prod
`, i, roles[i%5], roles[(i/5)%5])
	}
	if err := os.WriteFile(filepath.Join(dir, "bindings.yaml"), []byte(sb.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkAuditDiffCommand10k is `audit diff -o json` end to end (reading
// and rendering the manifests included) of a template change over 10,000
// bindings (goal: 2 s).
func BenchmarkAuditDiffCommand10k(b *testing.B) {
	dir := b.TempDir()
	base, head := filepath.Join(dir, "base"), filepath.Join(dir, "head")
	writeBenchManifests(b, base, 10000, false)
	writeBenchManifests(b, head, 10000, true)
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
	writeBenchManifests(b, filepath.Join(dir, "base"), 10000, false)
	writeBenchManifests(b, filepath.Join(dir, "head"), 10000, true)
	writeBenchManifests(b, filepath.Join(dir, "one-base"), 1, false)
	writeBenchManifests(b, filepath.Join(dir, "one-head"), 1, true)
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

// Compared side by side in chunks, the diff is the diff of one pass: the
// minions in order, the counts and the paths (each minion has its own
// templated paths).
func TestDiffFleetsChunks(t *testing.T) {
	base := benchAuditFleet(t, 1500, "")
	head := benchAuditFleet(t, 1400, "path \"salt/data/shared/ROLE/*\" {\n  capabilities = [\"read\"]\n}\n")
	delete(base.byID, "m00007")
	one := diffFleetsWith(base, head, []string{"salt/data/x"}, 1)
	for _, w := range []int{2, 3, 5} {
		if got := diffFleetsWith(base, head, []string{"salt/data/x"}, w); !reflect.DeepEqual(got, one) {
			t.Fatalf("%d workers: %+v, want %+v", w, got.Summary, one.Summary)
		}
	}
	if one.Summary.Minions != 1500 || one.Summary.Gaining == 0 || len(one.Minions) < 100 {
		t.Fatalf("%+v", one.Summary)
	}
}
