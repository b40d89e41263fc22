//go:build integration

// Package e2e runs the operator against a real kube-apiserver + etcd and a
// real Vault dev server, with the operator's token holding exactly the
// shipped least-privilege policy (config/vault/operator-policy.hcl).
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/cli"
	"github.com/minionvault/minion-vault-operator/internal/localenv"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

func TestMain(m *testing.M) {
	// Before anything else logs: controller-runtime's root logger, asked
	// 30 s after start-up and still unset (servers slow to start on a
	// loaded machine), discards everything for good, and a later SetLogger
	// changes nothing. The tests that read the operator's log (events
	// emitted, secrets never logged) would then read nothing.
	sink := zapcore.AddSync(&operatorLog)
	if os.Getenv("E2E_VERBOSE") != "" {
		sink = zapcore.NewMultiWriteSyncer(sink, zapcore.AddSync(os.Stderr))
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.DebugLevel), zap.WriteTo(sink)))
	if err := logReachesOperatorLog(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.Main(m, testenv.Options{})
}

// logReachesOperatorLog checks that a line logged through controller-runtime
// lands in operatorLog: every check of the log depends on it.
func logReachesOperatorLog() error {
	ctrl.Log.WithName("e2e").Info("operator log captured", "probe", "e2e-log-probe")
	if !strings.Contains(operatorLog.String(), "e2e-log-probe") {
		return errors.New("e2e: controller-runtime's logger does not write to operatorLog: the checks of the operator's log would read nothing")
	}
	return nil
}

// writeCounter counts Vault calls that change something.
type writeCounter struct{ writes, reads atomic.Int64 }

func (w *writeCounter) Request(op, _ string, code int, _ time.Duration) {
	switch op {
	case "write", "delete":
		w.writes.Add(1)
	case "read", "list":
		w.reads.Add(1)
	}
}
func (w *writeCounter) Login(string, error) {}

type suite struct {
	t      *testing.T
	env    *testenv.Env
	c      client.Client
	root   *vaultapi.Client
	writes *writeCounter
	// token is the operator's Vault token (the operator policy).
	token      string
	metricsURL string
	// stopOperator stops the running operator (once).
	stopOperator func()
	// mgr is the running operator's manager; wrapAPI, when set before a
	// (re)start, wraps its transport to the API server.
	mgr     ctrl.Manager
	wrapAPI func(http.RoundTripper) http.RoundTripper
	// options, when set before a (re)start, changes the operator's
	// options (the lost-minion window and sweep, say).
	options func(*cli.SetupOptions)
}

// The operator's namespace and service account (for kubernetes auth).
const (
	operatorNamespace      = "minionvault-system"
	operatorServiceAccount = "minionvault-operator"
)

// operatorLog holds everything the operator logged in this process.
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

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start runs the operator in-process until the test ends, with a Vault
// token of exactly the operator policy.
func start(t testing.TB) *suite {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with the operator's options changed by options.
func startWith(t testing.TB, options func(*cli.SetupOptions)) *suite {
	t.Helper()
	env := testenv.Get(t)
	s := &suite{env: env, c: env.Client, root: env.Vault.Client, writes: &writeCounter{}, options: options}
	if tt, ok := t.(*testing.T); ok {
		s.t = tt // benchmarks use the servers, not the suite's helpers
	}
	ctx := context.Background()
	token, err := env.Vault.OperatorToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.token = token
	must(t, client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})))
	must(t, client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: operatorServiceAccount, Namespace: operatorNamespace}})))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vault-token", Namespace: operatorNamespace}}
	_, err = controllerutil.CreateOrUpdate(ctx, s.c, secret, func() error {
		secret.StringData = map[string]string{"token": token}
		return nil
	})
	must(t, err)

	s.runOperator(t)
	// Whichever operator runs at the end (restarts replace it) is stopped.
	t.Cleanup(func() { s.stopOperator() })
	return s
}

// runOperator starts a manager with the operator's controllers, as its own
// process would (a new cache, nothing in memory), and returns once its
// metrics server answers; on another port when its port was taken before
// the manager bound it.
func (s *suite) runOperator(t testing.TB) {
	t.Helper()
	if err := localenv.RetryWhilePortTaken(func() error { return s.startOperator(t) }); err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
}

func (s *suite) startOperator(t testing.TB) error {
	ctx, cancel := context.WithCancel(context.Background())
	port, err := localenv.FreePort()
	must(t, err)
	s.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	cfg := s.env.Config
	if s.wrapAPI != nil {
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(s.wrapAPI)
	}
	mgr := operatorManager(ctx, t, cfg, s.env.Scheme, fmt.Sprintf("127.0.0.1:%d", port), s.writes, s.options)
	s.mgr = mgr
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	for deadline := time.Now().Add(time.Minute); ; {
		select {
		case err := <-done:
			cancel()
			return fmt.Errorf("the manager stopped: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := http.Get(s.metricsURL); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			return fmt.Errorf("the metrics server at %s did not answer within a minute", s.metricsURL)
		}
	}
	s.stopOperator = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager: %v", err)
		}
		s.stopOperator = func() {}
	}
	return nil
}

// operatorManager is a manager with the operator's own cache and client
// configuration and its controllers, on the API server of cfg; obs (may
// be nil) also sees every Vault request.
func operatorManager(ctx context.Context, t testing.TB, cfg *rest.Config, scheme *runtime.Scheme, metricsAddr string, obs vault.Observer,
	options func(*cli.SetupOptions)) ctrl.Manager {
	t.Helper()
	cacheOpts, err := cli.CacheOptions(cli.OperatorOptions{SecretNamespace: operatorNamespace})
	must(t, err)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: metricsAddr},
		// Each test runs its own manager with the same controllers.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      cacheOpts,
		Client:     cli.ClientOptions(),
	})
	must(t, err)
	so := cli.SetupOptions{
		Concurrency: 2, Interval: time.Hour, Observer: obs,
		ServiceAccount:  types.NamespacedName{Namespace: operatorNamespace, Name: operatorServiceAccount},
		SecretNamespace: operatorNamespace,
	}
	if options != nil {
		options(&so)
	}
	must(t, cli.Setup(ctx, mgr, so))
	return mgr
}

// restartOperator stops the operator and starts a new one: a restart.
func (s *suite) restartOperator(t testing.TB) {
	t.Helper()
	s.stopOperator()
	s.runOperator(t)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (s *suite) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// eventually polls f until it returns nil or the time is up.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
}

// condition returns a binding's condition of the given type.
func (s *suite) binding(ns, name string) *v1alpha1.MinionBinding {
	b := &v1alpha1.MinionBinding{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, b); err != nil {
		return nil
	}
	return b
}

func (s *suite) waitReady(ns, name string) *v1alpha1.MinionBinding {
	s.t.Helper()
	var b *v1alpha1.MinionBinding
	eventually(s.t, 30*time.Second, "binding "+name+" Ready", func() error {
		b = s.binding(ns, name)
		if b == nil {
			return fmt.Errorf("not found")
		}
		c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue || b.Status.ObservedGeneration != b.Generation {
			return fmt.Errorf("conditions %+v", b.Status.Conditions)
		}
		return nil
	})
	return b
}

// waitStalled waits for Ready=False, Stalled=True with the reason, and
// checks the condition set is exactly Ready and Stalled.
func (s *suite) waitStalled(ns, name, reason, msgPart string) *v1alpha1.MinionBinding {
	s.t.Helper()
	var b *v1alpha1.MinionBinding
	eventually(s.t, 30*time.Second, "binding "+name+" Stalled/"+reason, func() error {
		b = s.binding(ns, name)
		if b == nil {
			return fmt.Errorf("not found")
		}
		ready := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
		stalled := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.StalledCondition)
		if ready == nil || stalled == nil || ready.Status != metav1.ConditionFalse || stalled.Status != metav1.ConditionTrue ||
			ready.Reason != reason || !strings.Contains(ready.Message, msgPart) {
			return fmt.Errorf("conditions %+v", b.Status.Conditions)
		}
		if len(b.Status.Conditions) != 2 {
			return fmt.Errorf("want exactly Ready and Stalled, got %+v", b.Status.Conditions)
		}
		return nil
	})
	return b
}

// event waits for an event with this reason about the object.
func (s *suite) event(name, reason string) {
	s.t.Helper()
	s.eventWithin(20*time.Second, name, reason)
}

// eventWithin waits up to timeout for an event of reason about the object
// name in the API server; the failure says whether the operator emitted it
// (its log has every event).
func (s *suite) eventWithin(timeout time.Duration, name, reason string) {
	s.t.Helper()
	if err := s.eventIn(timeout, name, reason); err != nil {
		s.t.Fatal(err)
	}
}

// eventIn waits up to timeout for an event of reason about the object
// name in the API server.
func (s *suite) eventIn(timeout time.Duration, name, reason string) error {
	deadline := time.Now().Add(timeout)
	for {
		list := &eventsv1.EventList{}
		err := s.c.List(context.Background(), list)
		if err == nil {
			for _, e := range list.Items {
				if e.Regarding.Name == name && e.Reason == reason {
					return nil
				}
			}
			err = fmt.Errorf("event %s for %s: none among %d after %s (emitted, by the operator's log: %v)", reason, name, len(list.Items), timeout,
				emittedFor(name, reason))
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// emittedFor says whether the operator's log has an event of reason about
// the object name: client-go logs each event it is given.
func emittedFor(name, reason string) bool {
	return len(operatorLines(func(line string) bool {
		return strings.Contains(line, `"reason": "`+reason+`"`) && strings.Contains(line, `"name":"`+name+`"`)
	})) > 0
}

// operatorLines are the lines of the operator's log that match.
func operatorLines(match func(line string) bool) []string {
	var out []string
	for _, line := range strings.Split(operatorLog.String(), "\n") {
		if match(line) {
			out = append(out, line)
		}
	}
	return out
}

// requestIn asks for a reconcile of a binding of the API server c through
// its annotation, and returns the annotation's value.
func requestIn(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	stamp := time.Now().Format(time.RFC3339Nano)
	b := &v1alpha1.MinionBinding{}
	must(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, b))
	patch := client.MergeFrom(b.DeepCopy())
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	b.Annotations[v1alpha1.ReconcileRequestAnnotation] = stamp
	must(t, c.Patch(context.Background(), b, patch))
	return stamp
}

// requestReconcile asks for a reconcile through the annotation and waits
// until the binding reports it handled.
func (s *suite) requestReconcile(ns, name string) {
	s.t.Helper()
	stamp := requestIn(s.t, s.c, ns, name)
	eventually(s.t, 20*time.Second, "reconcile of "+name, func() error {
		if got := s.binding(ns, name).Status.LastHandledReconcileAt; got != stamp {
			return fmt.Errorf("lastHandledReconcileAt %q", got)
		}
		return nil
	})
}
