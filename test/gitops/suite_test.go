//go:build integration

package gitops

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/minionvault/minion-vault-operator/internal/cli"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	// First: controller-runtime's root logger, still unset when asked 30 s
	// after start-up (slow servers on a loaded machine), discards every
	// line for good, whatever is set later.
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.DebugLevel), zap.WriteTo(&operatorLog)))
	testenv.Main(m, testenv.Options{})
}

// operatorLog keeps what the operator logged, for a failing test.
var operatorLog syncBuffer

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is the last n lines.
func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(b.buf.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startOperator runs the real operator (cli.Setup, all three controllers)
// in this process against the test's API server until stop is called or
// the test ends. stop waits for the manager to return.
func startOperator(t *testing.T, env *testenv.Env) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := cli.Setup(ctx, mgr, cli.SetupOptions{Concurrency: 2, Interval: time.Hour}); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the operator's last log lines:\n%s", operatorLog.tail(60))
		}
	})
	return stop
}
