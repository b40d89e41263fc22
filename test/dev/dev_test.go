//go:build integration

// Package dev tests the local quickstart, `minionvault dev`, as a user runs
// it: the built binary, real servers from the tools folder, Ctrl-C.
//
//	go test -tags integration -count=1 ./test/dev
package dev

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minionvault/minion-vault-operator/internal/devenv"
	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds minionvault once per test run.
func binary(t *testing.T) (bin, root, tools string) {
	t.Helper()
	root, err := localenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools = os.Getenv(localenv.EnvToolsDir)
	if tools == "" {
		tools = filepath.Join(root, "bin")
	}
	if missing := devenv.MissingTools(tools); len(missing) > 0 {
		t.Fatalf("%s missing in %s: run `make tools`", strings.Join(missing, ", "), tools)
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "minionvault-dev-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "minionvault")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/minionvault")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath, root, tools
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// devCmd is `minionvault dev args...` run from the module root, with its
// own state folder. Should the test fail half-way, the command gets SIGINT
// and then SIGKILL (its servers' watchdog cleans up after a SIGKILL).
func devCmd(t *testing.T, ctx context.Context, args ...string) (*exec.Cmd, string) {
	t.Helper()
	bin, root, tools := binary(t)
	state := t.TempDir()
	// As docs/getting-started.md has it (--tools-dir bin): relative to the
	// folder the command runs in, which is not the servers'.
	if rel, err := filepath.Rel(root, tools); err == nil && !strings.HasPrefix(rel, "..") {
		tools = rel
	}
	args = append([]string{"dev", "--tools-dir", tools, "--state-dir", state}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	return cmd, state
}

// leftovers lists the processes whose command line or working directory
// is in dir: the servers keep their files there.
func leftovers(dir string) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join(p, "cwd"))
		args := strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " ")
		if strings.Contains(args, dir) || strings.HasPrefix(cwd, dir) {
			found = append(found, filepath.Base(p)+": "+args)
		}
	}
	return found
}

func assertNoLeftovers(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := leftovers(dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still running 10 s after minionvault dev exited:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var readyRow = regexp.MustCompile(`(?m)^default\s+(\S+)\s+(\S+)\s+salt-minions\s+True\s+\[`)

// The quickstart with --once: it prints Ready bindings and what is in
// Vault, stops everything and exits 0.
func TestDevOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, state := devCmd(t, ctx, "--once")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("minionvault dev --once: %v in %s\n%s", err, time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("exit: %v", err)
	}
	s := out.String()

	rows := map[string]bool{}
	for _, m := range readyRow.FindAllStringSubmatch(s, -1) {
		rows[m[1]] = m[1] == m[2]
	}
	for _, name := range []string{"web01", "db01", "build01"} {
		if !rows[name] {
			t.Errorf("no Ready row for binding %s", name)
		}
	}
	for _, want := range []string{
		"MINION", "TEMPLATE", "READY", "POLICIES", "AGE",
		"* salt_role_web", "* salt_role_db", "* salt_role_ci", "* saltstack/minions", "minionvault-operator",
		"vault policy read salt_role_db", `path "salt/data/roles/db"`,
		"identity/entity/name/salt_minion_web01",
		"roles__0", "roles__1", "db,web",
		"auth/salt-minions/role/web01", "[saltstack/minions saltstack/web01 salt_role_web salt_role_db]",
		"stopped",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`(?m)^\s+roles__0\s+(\S+)$`).FindStringSubmatch(s); m == nil || m[1] != "web" && m[1] != "db" {
		t.Errorf("no roles__0 metadata line with a role: %v", m)
	}
	if _, err := os.Stat(filepath.Join(state, "kubeconfig")); !os.IsNotExist(err) {
		t.Errorf("kubeconfig of a stopped server left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "operator.log")); err != nil {
		t.Errorf("operator.log: %v", err)
	}
	assertNoLeftovers(t, state)
}

// lineWaiter collects a command's output and waits for lines.
type lineWaiter struct {
	mu    sync.Mutex
	buf   strings.Builder
	lines chan string
}

func newLineWaiter(r io.Reader) *lineWaiter {
	w := &lineWaiter{lines: make(chan string, 1000)}
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			w.mu.Lock()
			w.buf.WriteString(s.Text() + "\n")
			w.mu.Unlock()
			select {
			case w.lines <- s.Text():
			default:
			}
		}
		close(w.lines)
	}()
	return w
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *lineWaiter) waitFor(t *testing.T, timeout time.Duration, match func(string) bool) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				t.Fatalf("output ended before the expected line:\n%s", w.String())
			}
			if match(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("no expected line within %s:\n%s", timeout, w.String())
		}
	}
}

func startDev(t *testing.T, ctx context.Context) (*exec.Cmd, *lineWaiter, string) {
	t.Helper()
	cmd, state := devCmd(t, ctx)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	return cmd, newLineWaiter(pr), state
}

// waitExit waits for the command to end after a SIGINT, at most limit.
func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration, w *lineWaiter) (int, time.Duration) {
	t.Helper()
	sent := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, time.Since(sent)
	case <-time.After(limit):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		t.Fatalf("still running %s after SIGINT:\n%s", limit, w.String())
	}
	return 0, 0
}

// Without --once it runs until Ctrl-C; kubectl works with the printed
// kubeconfig meanwhile; Ctrl-C stops every server, prints "stopped" and
// exits 0.
func TestDevRunsUntilInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, w, state := startDev(t, ctx)
	w.waitFor(t, 4*time.Minute, func(l string) bool { return strings.HasPrefix(l, "Ready:") })
	out := w.String()
	m := regexp.MustCompile(`export KUBECONFIG=(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no kubeconfig printed:\n%s", out)
	}
	if !strings.Contains(out, "VAULT_TOKEN=root-") || !strings.Contains(out, "throwaway") {
		t.Errorf("no Vault address and root token to explore with:\n%s", out)
	}
	_, _, tools := binary(t)
	if kubectl := filepath.Join(tools, "kubectl"); fileExists(kubectl) {
		got, err := exec.Command(kubectl, "--kubeconfig", m[1], "get", "mb", "-A").CombinedOutput()
		if err != nil || !strings.Contains(string(got), "build01") || !strings.Contains(string(got), "True") {
			t.Errorf("kubectl get mb -A with the printed kubeconfig: %v\n%s", err, got)
		}
	}
	if len(leftovers(state)) < 3 {
		t.Fatalf("expected the servers to run with files in %s, found %v", state, leftovers(state))
	}

	code, took := waitExit(t, cmd, 20*time.Second, w)
	t.Logf("exit %d, %s after SIGINT\n%s", code, took.Round(time.Millisecond), w.String())
	if code != 0 {
		t.Errorf("exit status %d after Ctrl-C, want 0", code)
	}
	if !strings.Contains(w.String(), "\nstopped\n") {
		t.Errorf("no 'stopped' line")
	}
	assertNoLeftovers(t, state)
}

// Ctrl-C while the servers are starting stops them too.
func TestDevInterruptedWhileStarting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, w, state := startDev(t, ctx)
	// The Vault line is complete once Vault runs; then the API server starts.
	w.waitFor(t, 2*time.Minute, func(l string) bool { return strings.Contains(l, "starting the Vault dev server") })
	time.Sleep(time.Second)
	code, took := waitExit(t, cmd, 30*time.Second, w)
	t.Logf("exit %d, %s after SIGINT\n%s", code, took.Round(time.Millisecond), w.String())
	if code != 130 {
		t.Errorf("exit status %d after Ctrl-C during the start, want 130", code)
	}
	if !strings.Contains(w.String(), "interrupted") {
		t.Errorf("no 'interrupted' in the output")
	}
	assertNoLeftovers(t, state)
}

// Even a SIGKILL leaves nothing running: the watchdogs kill the servers
// and remove their folders.
func TestDevKilledLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, w, state := startDev(t, ctx)
	w.waitFor(t, 4*time.Minute, func(l string) bool { return strings.HasPrefix(l, "Ready:") })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	assertNoLeftovers(t, state)
	deadline := time.Now().Add(10 * time.Second)
	for {
		dirs, _ := filepath.Glob(filepath.Join(state, "minionvault-env-*"))
		if len(dirs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server folders left 10 s after a SIGKILL: %v", dirs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
