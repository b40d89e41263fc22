package cli

import (
	"slices"
	"sync"

	"github.com/go-logr/logr"
)

// controller-runtime gives every reconcile a logger with the controller,
// the request and a reconcile ID: three WithValues calls. zap encodes the
// values at once, into a clone of its encoder with a buffer of its own
// (the request's object reference through reflection), whether or not the
// reconcile logs anything. Most do not: a drift check in sync, a status
// refresh, a wait; one that writes to Vault logs each write. At 50,000
// bindings that was 0.8 GB of the operator's allocations in a converge, and
// 3.4 s of its CPU besides the garbage collection. lazySink keeps the
// values and hands them to zap once, at the first line logged. A value is
// therefore encoded as it is then, not at WithValues: the operator's and
// controller-runtime's are strings and object references, never changed
// after.

// lazySink is a LogSink that defers WithValues to its first log line.
type lazySink struct {
	base logr.LogSink // the sink the values go to
	kv   []any        // values not given to base yet, in order
	with *withValues  // base with kv, made once for all the lines logged
}

type withValues struct {
	once sync.Once
	sink logr.LogSink
}

var (
	_ logr.LogSink          = (*lazySink)(nil)
	_ logr.CallDepthLogSink = (*lazySink)(nil)
)

// newLazySink wraps base, an initialized sink (a logger's), one frame
// deeper: its lines are logged from this sink's Info and Error.
func newLazySink(base logr.LogSink) *lazySink {
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		base = cd.WithCallDepth(1)
	}
	return &lazySink{base: base, with: &withValues{}}
}

// lazyLogger is l with its WithValues deferred to its first log line.
func lazyLogger(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	return logr.New(newLazySink(l.GetSink()))
}

// Init does nothing: base was initialized by its own logger, and
// newLazySink added this sink's frame.
func (s *lazySink) Init(logr.RuntimeInfo) {}

func (s *lazySink) Enabled(level int) bool { return s.base.Enabled(level) }

func (s *lazySink) Info(level int, msg string, kv ...any) {
	s.sink().Info(level, msg, kv...)
}

func (s *lazySink) Error(err error, msg string, kv ...any) {
	s.sink().Error(err, msg, kv...)
}

// WithValues keeps kv after the values kept so far.
func (s *lazySink) WithValues(kv ...any) logr.LogSink {
	return &lazySink{base: s.base, kv: append(slices.Clip(s.kv), kv...), with: &withValues{}}
}

// WithName names base: a logger's name and its values are apart in zap,
// so the name can go first.
func (s *lazySink) WithName(name string) logr.LogSink {
	return &lazySink{base: s.base.WithName(name), kv: s.kv, with: &withValues{}}
}

func (s *lazySink) WithCallDepth(depth int) logr.LogSink {
	cd, ok := s.base.(logr.CallDepthLogSink)
	if !ok {
		return s
	}
	return &lazySink{base: cd.WithCallDepth(depth), kv: s.kv, with: &withValues{}}
}

// sink is base with the kept values.
func (s *lazySink) sink() logr.LogSink {
	if len(s.kv) == 0 {
		return s.base
	}
	s.with.once.Do(func() { s.with.sink = s.base.WithValues(s.kv...) })
	return s.with.sink
}
