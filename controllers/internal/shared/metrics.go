package shared

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics are the operator's own Prometheus metrics, next to
// controller-runtime's (reconcile counts, durations, work queues).
type Metrics struct {
	vaultRequests *prometheus.CounterVec
	vaultLatency  *prometheus.HistogramVec
	logins        *prometheus.CounterVec
	drift         *prometheus.CounterVec
	recurring     prometheus.Counter
	renderFails   *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: the
// controller-runtime registry served on the metrics endpoint).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = metrics.Registry
	}
	m := &Metrics{
		vaultRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minionvault_vault_requests_total", Help: "Vault API requests by operation and HTTP status code (0: transport error).",
		}, []string{"operation", "code"}),
		vaultLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "minionvault_vault_request_duration_seconds", Help: "Vault API request latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}, []string{"operation"}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minionvault_vault_logins_total", Help: "Vault logins by auth method and result.",
		}, []string{"method", "result"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minionvault_drift_total", Help: "Vault drift found in bindings: corrected, or detected only.",
		}, []string{"action"}),
		recurring: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "minionvault_drift_recurring_total",
			Help: "Bindings whose Vault objects were rewritten again after the operator corrected them (another writer, such as a Salt master with write rights); counted once per run of corrections.",
		}),
		renderFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minionvault_render_failures_total", Help: "Bindings refused: render errors and guard-rail violations, by reason.",
		}, []string{"reason"}),
	}
	// A second manager in one process (tests) finds them registered and
	// shares the registered ones, so the endpoint counts for both.
	m.vaultRequests = register(reg, m.vaultRequests)
	m.vaultLatency = register(reg, m.vaultLatency)
	m.logins = register(reg, m.logins)
	m.drift = register(reg, m.drift)
	m.recurring = register(reg, m.recurring)
	m.renderFails = register(reg, m.renderFails)
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// Request implements vault.Observer.
func (m *Metrics) Request(op, _ string, code int, d time.Duration) {
	if m == nil {
		return
	}
	m.vaultRequests.WithLabelValues(op, strconv.Itoa(code)).Inc()
	m.vaultLatency.WithLabelValues(op).Observe(d.Seconds())
}

// Login implements vault.Observer.
func (m *Metrics) Login(method string, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "failure"
	}
	m.logins.WithLabelValues(method, result).Inc()
}

// Drift counts drift found in a binding: corrected, or detected only.
func (m *Metrics) Drift(corrected bool) {
	action := "detected"
	if corrected {
		action = "corrected"
	}
	m.drift.WithLabelValues(action).Inc()
}

// DriftRecurring counts a run of drift corrections that keeps coming back.
func (m *Metrics) DriftRecurring() { m.recurring.Inc() }

// RenderFailure counts a binding refused, by reason.
func (m *Metrics) RenderFailure(reason string) { m.renderFails.WithLabelValues(reason).Inc() }
