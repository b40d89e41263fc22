// Package testenv is test support, the integration suites' view of internal/localenv: the
// real servers they test against (a Kubernetes API server with etcd, with
// the project's CRDs installed, and a Vault dev server with the AppRole auth
// method enabled at salt-minions), started once per test package.
//
// Every integration suite uses it from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }
//
//	func TestSomething(t *testing.T) {
//		env := testenv.Get(t)
//		_ = env.Client.Create(ctx, obj)             // the API server
//		_, _ = env.Vault.Client.Logical().Read(path) // Vault, as root
//	}
//
// The servers, the environment variables that choose them and the clean-up
// (Stop, SIGINT/SIGTERM, a watchdog for a killed test binary) are
// internal/localenv's; this package only adds what needs the testing
// package, so that the minionvault binary can start the same servers without
// linking it.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

// The environment, its options and its Vault: see internal/localenv.
type (
	Env            = localenv.Env
	Options        = localenv.Options
	Vault          = localenv.Vault
	Node           = localenv.Node
	Cluster        = localenv.Cluster
	ClusterOptions = localenv.ClusterOptions
)

// Environment variables and the AppRole mount: see internal/localenv.
const (
	EnvToolsDir         = localenv.EnvToolsDir
	EnvVaultBin         = localenv.EnvVaultBin
	EnvUseExistingVault = localenv.EnvUseExistingVault
	AppRoleMount        = localenv.AppRoleMount
	OperatorPolicyName  = localenv.OperatorPolicyName
)

// Start starts an environment without Main (see localenv.Start).
func Start(ctx context.Context, opts Options) (*Env, error) { return localenv.Start(ctx, opts) }

// ModuleRoot is the folder of this module's go.mod (see localenv.ModuleRoot).
func ModuleRoot() (string, error) { return localenv.ModuleRoot() }

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
	// found is the environment the first signal found, killed as found:
	// the tests may end and Stop it meanwhile, and Kill then waits for Stop.
	var found *Env
	stop := localenv.OnInterrupt(func(sig os.Signal) bool {
		cancel()
		if found = currentEnv(); found != nil {
			return false // the tests run: kill at once
		}
		// Starting (Start sees the cancelled context, stops what it
		// started and returns) or stopping already. A second signal
		// exits at once; the watchdog then cleans up.
		fmt.Fprintf(os.Stderr, "testenv: %v: stopping the test servers (again to exit at once)\n", sig)
		return true
	}, func(sig os.Signal) {
		if found == nil {
			found = currentEnv()
		}
		fmt.Fprintf(os.Stderr, "testenv: %v: stopping the test servers\n", sig)
		found.Kill()
		os.Exit(130)
	})
	defer stop()

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
	env := currentEnv()
	if env == nil {
		tb.Fatal("testenv: no environment: call testenv.Main(m, testenv.Options{}) from TestMain")
	}
	return env
}

func currentEnv() *Env {
	currentMu.Lock()
	defer currentMu.Unlock()
	return current
}
