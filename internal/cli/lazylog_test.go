package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// reconcileLogger builds a reconcile's logger as controller-runtime does
// (its controller, the request, a reconcile ID).
func reconcileLogger(l logr.Logger) logr.Logger {
	l = l.WithValues("controller", "minionbinding", "controllerGroup", "minionvault.dev", "controllerKind", "MinionBinding")
	l = l.WithValues("MinionBinding", klog.KRef("fleet", "web01"), "namespace", "fleet", "name", "web01")
	return l.WithValues("reconcileID", "5b0c7c1e-8d4f-4bde-9a51-0a0f0a4d1f51")
}

// logAll logs what the operator's code does with such a logger, from the
// same lines whichever logger it is given, so the callers must match.
func logAll(l logr.Logger) {
	l = reconcileLogger(l)
	l.Info("first line", "policy", "salt_role_web")
	l.WithName("vault").Info("named", "attempt", 2)
	l.V(1).Info("debug line")
	l.Error(errors.New("permission denied"), "Reconciler error", "retry", true)
	l.Info("second line on the same logger")
	logThroughHelper(l)
	l.WithValues("key", "later").WithName("after").Info("values then a name")
}

// logThroughHelper logs as a helper does: the caller is its caller.
func logThroughHelper(l logr.Logger) {
	l.WithCallDepth(1).Info("through a helper")
}

// lines is the JSON lines zap wrote, without their timestamps.
func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		delete(m, "ts")
		got = append(got, m)
	}
	return got
}

func zapTo(w io.Writer, debug bool) logr.Logger {
	opts := []zap.Opts{zap.WriteTo(w), zap.JSONEncoder(), zap.RawZapOpts(uberzap.AddCaller())}
	if debug {
		opts = append(opts, zap.Level(zapcore.DebugLevel))
	}
	return zap.New(opts...)
}

func TestLazyLoggerWritesWhatZapWrites(t *testing.T) {
	for _, debug := range []bool{false, true} {
		var direct, lazy bytes.Buffer
		// From one line: the error's stack trace names the caller's too.
		for _, l := range []logr.Logger{zapTo(&direct, debug), lazyLogger(zapTo(&lazy, debug))} {
			logAll(l)
		}
		want, got := lines(t, direct.String()), lines(t, lazy.String())
		if len(want) < 6 {
			t.Fatalf("debug %v: zap wrote %d lines, want at least 6:\n%s", debug, len(want), direct.String())
		}
		if len(got) != len(want) {
			t.Fatalf("debug %v: the lazy logger wrote %d lines, zap %d:\n%s\nzap wrote\n%s", debug, len(got), len(want), lazy.String(), direct.String())
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("debug %v: line %d: the lazy logger wrote\n%v\nzap wrote\n%v", debug, i, got[i], want[i])
			}
		}
		for _, l := range want {
			if c, _ := l["caller"].(string); !strings.Contains(c, "lazylog_test.go") {
				t.Fatalf("caller %q: not the test's line, so this test cannot tell a wrong depth", c)
			}
		}
	}
}

// BenchmarkReconcileLogger is a reconcile's logger that logs nothing, the
// common case, from zap directly and through the lazy sink.
func BenchmarkReconcileLogger(b *testing.B) {
	for _, bc := range []struct {
		name string
		l    logr.Logger
	}{
		{"zap", zapTo(io.Discard, false)},
		{"lazy", lazyLogger(zapTo(io.Discard, false))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l := reconcileLogger(bc.l)
				l.V(1).Info("not logged")
			}
		})
	}
}
