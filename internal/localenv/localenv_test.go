package localenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests start no real server: they cover the port, process and
// clean-up logic with sleep(1) and shell scripts standing in.

func TestFreePortIsFree(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d from FreePort cannot be bound: %v", port, err)
	}
	l.Close()
}

func TestParseStat(t *testing.T) {
	pid, ppid, pgrp, ok := parseStat("4242 (kube (api) server) S 17 4242 4242 0 -1 4194560 ...")
	if !ok || pid != 4242 || ppid != 17 || pgrp != 4242 {
		t.Fatalf("parseStat = %d %d %d %v", pid, ppid, pgrp, ok)
	}
	if _, _, _, ok := parseStat("garbage"); ok {
		t.Fatal("parseStat accepted garbage")
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "config", "crd", "bases")); err != nil {
		t.Fatalf("module root %s has no config/crd/bases: %v", root, err)
	}
}

func TestTails(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := 1; i <= 40; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	p := filepath.Join(dir, "server.log")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := tails(p, filepath.Join(dir, "missing.log"))
	if !strings.Contains(got, "server.log") || !strings.Contains(got, "line 40") || strings.Contains(got, "line 10\n") {
		t.Fatalf("tails = %q", got)
	}
}

// startSleeper starts sleep(1) in its own process group, as envtest and
// startVault start servers.
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

func alive(pid int) bool {
	// A zombie still answers kill 0: look at its state too.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	end := strings.LastIndexByte(string(b), ')')
	return end > 0 && len(b) > end+2 && b[end+2] != 'Z'
}

func waitGone(t *testing.T, what string, gone func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !gone() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still there after 10 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWatchdogReleaseKillsAdoptedGroups(t *testing.T) {
	dir := t.TempDir()
	wd, err := startWatchdog(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := startSleeper(t)
	wd.adopt(s.Process.Pid)
	wd.adoptChildren("") // the same sleeper again (on Linux): adopted once
	if len(wd.pgids) != 1 {
		t.Fatalf("adopted %v, want only the sleeper", wd.pgids)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	wd.release()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("release did not kill the adopted group")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("release removed the folder, Stop's job: %v", err)
	}
	wd.release() // twice is fine
}

// Two environments in one process (minionvault dev starts Vault and the API
// server separately): the second's adoptChildren leaves the first's servers
// and watchdog alone, so that each watchdog cleans up its own folder.
func TestWatchdogsLeaveEachOthersGroupsAlone(t *testing.T) {
	first, err := startWatchdog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer first.release()
	s := startSleeper(t)
	first.adopt(s.Process.Pid)

	second, err := startWatchdog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer second.release()
	other := startSleeper(t)
	second.adoptChildren("")
	second.mu.Lock()
	got := append([]int(nil), second.pgids...)
	second.mu.Unlock()
	for _, pg := range got {
		if pg == s.Process.Pid || pg == first.cmd.Process.Pid {
			t.Fatalf("the second watchdog adopted %d, the first's (adopted: %v)", pg, got)
		}
	}
	if len(got) != 1 || got[0] != other.Process.Pid {
		t.Fatalf("the second watchdog adopted %v, want only its own sleeper %d", got, other.Process.Pid)
	}
	second.release()
	if !alive(s.Process.Pid) {
		t.Fatal("releasing the second watchdog killed the first's sleeper")
	}
}

// Two environments starting at once in one process: each adopts, by the
// command line naming its folder, only its own servers, not those the
// other started and has not adopted yet.
func TestAdoptChildrenByFolder(t *testing.T) {
	dir := t.TempDir()
	wd, err := startWatchdog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer wd.release()
	other := startSleeper(t) // another environment's server
	mine := exec.Command("/bin/sh", "-c", "sleep 300", filepath.Join(dir, "etcd"))
	mine.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := mine.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-mine.Process.Pid, syscall.SIGKILL); _ = mine.Wait() })
	// A folder whose name starts with this one's is another's.
	twin := exec.Command("/bin/sh", "-c", "sleep 300", dir+"2/etcd")
	twin.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := twin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-twin.Process.Pid, syscall.SIGKILL); _ = twin.Wait() })
	wd.adoptChildren(dir + string(filepath.Separator))
	wd.mu.Lock()
	got := append([]int(nil), wd.pgids...)
	wd.mu.Unlock()
	if len(got) != 1 || got[0] != mine.Process.Pid {
		t.Fatalf("adopted %v, want only %d (not %d, which names no folder of this environment)", got, mine.Process.Pid, other.Process.Pid)
	}
}

// When the test binary dies without cleaning up, the watchdog kills what it
// adopted and removes the folder. A child copy of this test binary plays the
// dying test binary.
func TestWatchdogOutlivesAKilledTestBinary(t *testing.T) {
	if os.Getenv("TESTENV_WATCHDOG_CHILD") == "1" {
		watchdogChild()
		return
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "env")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdogOutlivesAKilledTestBinary$")
	cmd.Env = append(os.Environ(), "TESTENV_WATCHDOG_CHILD=1", "TESTENV_WATCHDOG_DIR="+work)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v, want it killed", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("child printed %q", out)
	}
	waitGone(t, "the orphaned sleeper", func() bool { return !alive(pid) })
	waitGone(t, "the folder", func() bool { _, err := os.Stat(work); return os.IsNotExist(err) })
}

func watchdogChild() {
	wd, err := startWatchdog(os.Getenv("TESTENV_WATCHDOG_DIR"))
	if err != nil {
		panic(err)
	}
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	wd.adopt(cmd.Process.Pid)
	fmt.Println(cmd.Process.Pid)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // no deferred clean-up runs
	select {}
}

// A port taken between FreePort and the server's bind is retried with
// another port; a server that fails otherwise is reported with its log.
func TestVaultStartRetriesATakenPortAndReportsTheLog(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	fake := filepath.Join(dir, "vault")
	script := "#!/bin/sh\necho run >> " + count + "\necho 'Error initializing listener of type tcp: listen tcp4 127.0.0.1:1: bind: address already in use'\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvVaultBin, fake)
	t.Setenv(EnvUseExistingVault, "")
	wd, err := startWatchdog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer wd.release()
	_, err = startVault(context.Background(), dir, "", "", 10*time.Second, wd, os.Getenv)
	if !errors.Is(err, errAddrInUse) {
		t.Fatalf("startVault = %v, want address in use", err)
	}
	runs, _ := os.ReadFile(count)
	if n := strings.Count(string(runs), "run"); n != 5 {
		t.Fatalf("vault started %d times, want 5 tries", n)
	}

	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'Error: something else broke'\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = startVault(context.Background(), t.TempDir(), "", "", 10*time.Second, wd, os.Getenv)
	if err == nil || !strings.Contains(err.Error(), "something else broke") {
		t.Fatalf("startVault = %v, want the log's tail", err)
	}
}

func TestStartWithoutToolsSaysWhatToDo(t *testing.T) {
	t.Setenv(EnvToolsDir, t.TempDir())
	t.Setenv(EnvVaultBin, "")
	t.Setenv(EnvUseExistingVault, "")
	_, err := Start(context.Background(), Options{NoKubernetes: true})
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("Start = %v, want a hint to run make tools", err)
	}
	for _, v := range []string{"KUBEBUILDER_ASSETS", "TEST_ASSET_KUBE_APISERVER", "TEST_ASSET_ETCD", "USE_EXISTING_CLUSTER"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	_, err = Start(context.Background(), Options{NoVault: true})
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("Start = %v, want a hint to run make tools", err)
	}
}
