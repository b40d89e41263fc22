package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const modulePath = "github.com/minionvault/minion-vault-operator"

var (
	currentMu sync.Mutex
	current   *Env
)

// Main is a whole TestMain: it starts the environment, runs the tests, stops
// the environment and exits with the tests' status. A SIGINT or SIGTERM
// kills the servers and exits at once. If the environment cannot start, the
// package fails with the reason (and the tail of the server's log).
func Main(m *testing.M, opts Options) {
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts Options) int {
	flag.Parse()
	if l := flag.Lookup("test.list"); l != nil && l.Value.String() != "" {
		return m.Run() // listing tests needs no servers
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		n := 0
		for sig := range sigs {
			n++
			cancel()
			currentMu.Lock()
			env := current
			currentMu.Unlock()
			if env == nil && n == 1 {
				// Starting (Start sees the cancelled context, stops what it
				// started and returns) or stopping already. A second signal
				// exits at once; the watchdog then cleans up.
				fmt.Fprintf(os.Stderr, "testenv: %v: stopping the test servers (again to exit at once)\n", sig)
				continue
			}
			fmt.Fprintf(os.Stderr, "testenv: %v: stopping the test servers\n", sig)
			env.kill()
			os.Exit(130)
		}
	}()

	env, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	currentMu.Lock()
	current = env
	currentMu.Unlock()

	code := m.Run()

	currentMu.Lock()
	current = nil
	currentMu.Unlock()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Get returns the environment that Main started; it fails the test when
// there is none (TestMain does not call Main).
func Get(tb testing.TB) *Env {
	tb.Helper()
	currentMu.Lock()
	defer currentMu.Unlock()
	if current == nil {
		tb.Fatal("testenv: no environment: call testenv.Main(m, testenv.Options{}) from TestMain")
	}
	return current
}

// ModuleRoot is the folder of this module's go.mod: the first one above the
// working directory (a test runs in its package's folder) that declares the
// module, else the one above this source file when its path is known.
func ModuleRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if isModuleRoot(dir) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("testenv: no go.mod of " + modulePath + " above the working directory")
}

func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath
		}
	}
	return false
}

// tails returns the last lines of each non-empty log file, for error messages.
func tails(paths ...string) string {
	const lines = 30
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", filepath.Base(p), strings.Join(all, "\n"))
	}
	return b.String()
}
