package metrics

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
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

	// The fleet's state, for alerts that a counter cannot answer ("not
	// Ready for long", "a connection down"): gauges kept per event, never
	// by a scan of the fleet.
	bindings      *prometheus.GaugeVec
	bindingStates *bindingStates
	connReady     *prometheus.GaugeVec
	// vaultServer: the version each connection's Vault reports, and how
	// the project tests it, as labels of a series at 1.
	vaultServer   *prometheus.GaugeVec
	tokenExpiry   *prometheus.GaugeVec
	tokenLease    *prometheus.GaugeVec
	templateReady *prometheus.GaugeVec
	// templateReasons: each template's reason in templateReady.
	templateReasons *lastReasons
	templateFails   *prometheus.CounterVec
	// Lost minions: kept for their binding, and collected.
	lostMinions   *prometheus.GaugeVec
	lostCollected *prometheus.CounterVec
}

// New creates the metrics and registers them with reg (nil: the
// controller-runtime registry served on the metrics endpoint).
func New(reg prometheus.Registerer) *Metrics {
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
		bindings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "minionvault_bindings",
			Help: "MinionBindings by namespace, template, and their Ready condition's status and reason, as this process last reconciled them.",
		}, []string{"namespace", "template", "ready", "reason"}),
		connReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "minionvault_connection_ready",
			Help: "1 when the VaultConnection's last check passed (Ready), 0 when it failed.",
		}, []string{"connection"}),
		vaultServer: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "minionvault_vault_server_info",
			Help: "1 per connection: the version its Vault reports at the last check, and how the project tests it (tested: release, line or no; docs/compatibility.md).",
		}, []string{"connection", "version", "tested"}),
		tokenExpiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "minionvault_connection_token_expiry_timestamp_seconds",
			Help: "When the VaultConnection's current Vault token expires (Unix time), as of its last check; absent for a token that never expires.",
		}, []string{"connection"}),
		tokenLease: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "minionvault_connection_token_lease_seconds",
			Help: "The usual lease of the VaultConnection's Vault token: the operator renews it or logs in again when a third of it is left.",
		}, []string{"connection"}),
		templateReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "minionvault_template_ready",
			Help: "1 when the MinionTemplate's ACL policies are as its bindings render them (Ready), 0 when not; reason is its Ready condition's.",
		}, []string{"template", "reason"}),
		templateFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minionvault_template_policy_failures_total",
			Help: "MinionTemplate reconciles whose ACL policies failed to sync or were refused, by template and Ready reason.",
		}, []string{"template", "reason"}),
		lostMinions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "minionvault_lost_minions",
			Help: "Minions whose MinionBinding is gone while their objects are kept in Vault for it, in the Vault the connection reaches: lost (its deletion never ran; kept for a restore window) or retained (deletionPolicy Retain; kept until an administrator releases them).",
		}, []string{"connection", "state"}),
		lostCollected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minionvault_lost_minions_collected_total",
			Help: "Lost or retained minions whose AppRole role and entity the operator deleted: their restore window ended (window) or an administrator asked (released).",
		}, []string{"connection", "reason"}),
	}
	// A second manager in one process (tests) finds them registered and
	// shares the registered ones, so the endpoint counts for both.
	m.vaultRequests = register(reg, m.vaultRequests)
	m.vaultLatency = register(reg, m.vaultLatency)
	m.logins = register(reg, m.logins)
	m.drift = register(reg, m.drift)
	m.recurring = register(reg, m.recurring)
	m.renderFails = register(reg, m.renderFails)
	m.bindings = register(reg, m.bindings)
	m.connReady = register(reg, m.connReady)
	m.vaultServer = register(reg, m.vaultServer)
	m.tokenExpiry = register(reg, m.tokenExpiry)
	m.tokenLease = register(reg, m.tokenLease)
	m.templateReady = register(reg, m.templateReady)
	m.templateFails = register(reg, m.templateFails)
	m.lostMinions = register(reg, m.lostMinions)
	m.lostCollected = register(reg, m.lostCollected)
	// Every series of a fixed label set exists from the start, at 0: an
	// alert on increase() sees the first drift or failed login, which a
	// series born at 1 would hide.
	for _, action := range []string{"corrected", "detected"} {
		m.drift.WithLabelValues(action)
	}
	for _, method := range []string{vault.MethodToken, vault.MethodAppRole, vault.MethodKubernetes} {
		for _, result := range []string{"success", "failure"} {
			m.logins.WithLabelValues(method, result)
		}
	}
	m.bindingStates = sharedStates(m.bindings)
	r, _ := reasonsByGauge.LoadOrStore(m.templateReady, &lastReasons{of: map[string]string{}})
	m.templateReasons = r.(*lastReasons)
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

// BindingState is what the bindings gauge counts of one binding: its
// namespace, template and Ready condition.
type BindingState struct {
	Namespace, Template string
	Ready               bool
	Reason              string
}

func (s BindingState) labels() []string {
	return []string{s.Namespace, s.Template, strconv.FormatBool(s.Ready), s.Reason}
}

// Binding records the state a reconcile left a binding in: O(1), one
// gauge moved from its last state to this one. The fleet is 10,000 to
// 50,000 bindings: the gauge's labels say how many are in each state, never
// which (kubectl get mb -A does).
func (m *Metrics) Binding(key types.NamespacedName, s BindingState) {
	if m == nil {
		return
	}
	m.bindingStates.set(key, s)
}

// ForgetBinding drops a binding that is gone (deleted, or out of this
// shard) from the bindings gauge.
func (m *Metrics) ForgetBinding(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.bindingStates.forget(key)
}

// bindingStates keeps each binding's last state as an index into a table
// of the distinct states (a few per namespace and template), so that a
// binding costs one small map entry. A state's series is deleted when its
// last binding leaves it, so that a deleted template or a reason of the
// past leaves no series behind.
type bindingStates struct {
	mu     sync.Mutex
	gauge  *prometheus.GaugeVec
	of     map[types.NamespacedName]int32
	states []BindingState
	index  map[BindingState]int32
	counts []int
}

// statesByGauge: two managers in one process share the registered gauge,
// and so must share its counts, or each would delete the other's series.
var statesByGauge sync.Map // *prometheus.GaugeVec -> *bindingStates

func sharedStates(g *prometheus.GaugeVec) *bindingStates {
	s, _ := statesByGauge.LoadOrStore(g, &bindingStates{gauge: g, of: map[types.NamespacedName]int32{}, index: map[BindingState]int32{}})
	return s.(*bindingStates)
}

func (b *bindingStates) set(key types.NamespacedName, s BindingState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, ok := b.index[s]
	if !ok {
		i = int32(len(b.states))
		b.states = append(b.states, s)
		b.counts = append(b.counts, 0)
		b.index[s] = i
	}
	if old, had := b.of[key]; had {
		if old == i {
			return
		}
		b.leaveLocked(old)
	}
	b.of[key] = i
	b.counts[i]++
	b.gauge.WithLabelValues(s.labels()...).Set(float64(b.counts[i]))
}

func (b *bindingStates) forget(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, had := b.of[key]; had {
		delete(b.of, key)
		b.leaveLocked(old)
	}
}

// leaveLocked counts one binding out of state i. The state stays in the
// table (its index may be reused by the next binding in it): the table
// grows with the distinct states ever seen, not with the fleet.
func (b *bindingStates) leaveLocked(i int32) {
	b.counts[i]--
	if b.counts[i] == 0 {
		b.gauge.DeleteLabelValues(b.states[i].labels()...)
		return
	}
	b.gauge.WithLabelValues(b.states[i].labels()...).Set(float64(b.counts[i]))
}

// lastReasons is the reason label each template's series has now, shared
// like bindingStates by the managers of one process.
type lastReasons struct {
	mu sync.Mutex
	of map[string]string
}

var reasonsByGauge sync.Map // *prometheus.GaugeVec -> *lastReasons

// swap records reason ("": none) as name's, and returns the one before.
func (l *lastReasons) swap(name, reason string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.of[name]
	if reason == "" {
		delete(l.of, name)
	} else {
		l.of[name] = reason
	}
	return old
}

// Connection records a VaultConnection's check: whether it passed, and
// its token's expiry and usual lease (a zero expiry: the token never
// expires, or is not known).
func (m *Metrics) Connection(name string, ready bool, expires time.Time, lease time.Duration) {
	if m == nil {
		return
	}
	v := 0.0
	if ready {
		v = 1
	}
	m.connReady.WithLabelValues(name).Set(v)
	if expires.IsZero() {
		m.tokenExpiry.DeleteLabelValues(name)
		m.tokenLease.DeleteLabelValues(name)
		return
	}
	m.tokenExpiry.WithLabelValues(name).Set(float64(expires.Unix()))
	m.tokenLease.WithLabelValues(name).Set(lease.Seconds())
}

// ConnectionFailed records a failed check without touching what is known
// of the token: a Vault that cannot be reached says nothing of it.
func (m *Metrics) ConnectionFailed(name string) {
	if m == nil {
		return
	}
	m.connReady.WithLabelValues(name).Set(0)
}

// VaultServer records the version a connection's Vault reports and how
// the project tests it: one series per connection, the last version's.
func (m *Metrics) VaultServer(connection, version, tested string) {
	if m == nil || version == "" {
		return
	}
	m.vaultServer.DeletePartialMatch(prometheus.Labels{"connection": connection})
	m.vaultServer.WithLabelValues(connection, version, tested).Set(1)
}

// LostMinions sets how many lost and retained minions the operator keeps
// in the Vault a connection reaches.
func (m *Metrics) LostMinions(connection string, lost, retained int) {
	if m == nil {
		return
	}
	m.lostMinions.WithLabelValues(connection, "lost").Set(float64(lost))
	m.lostMinions.WithLabelValues(connection, "retained").Set(float64(retained))
}

// LostCollected counts a lost or retained minion collected.
func (m *Metrics) LostCollected(connection, reason string) {
	if m == nil {
		return
	}
	m.lostCollected.WithLabelValues(connection, reason).Inc()
}

// ForgetConnection drops a deleted VaultConnection's series.
func (m *Metrics) ForgetConnection(name string) {
	if m == nil {
		return
	}
	m.connReady.DeleteLabelValues(name)
	m.vaultServer.DeletePartialMatch(prometheus.Labels{"connection": name})
	m.tokenExpiry.DeleteLabelValues(name)
	m.tokenLease.DeleteLabelValues(name)
	m.lostMinions.DeletePartialMatch(prometheus.Labels{"connection": name})
}

// Template records a MinionTemplate reconcile's outcome: its Ready
// condition's status and reason (one series per template: the reason of
// the past is deleted), and, when failed, a failure of its ACL policies
// counted by reason.
func (m *Metrics) Template(name string, ready bool, reason string, failed bool) {
	if m == nil {
		return
	}
	v := 0.0
	if ready {
		v = 1
	}
	// The new series first, then the old one gone: a scrape in between
	// sees the template twice rather than not at all (a gap would reset an
	// alert's "for").
	m.templateReady.WithLabelValues(name, reason).Set(v)
	if old := m.templateReasons.swap(name, reason); old != "" && old != reason {
		m.templateReady.DeleteLabelValues(name, old)
	}
	if failed {
		m.templateFails.WithLabelValues(name, reason).Inc()
	}
}

// TemplateFailures is the counter of a template's policy failures of one
// reason (for tests).
func (m *Metrics) TemplateFailures(name, reason string) prometheus.Counter {
	return m.templateFails.WithLabelValues(name, reason)
}

// ForgetTemplate drops a deleted MinionTemplate's series (its failure
// counts too: a template of the same name later starts from zero, which
// rate() and increase() take as a counter reset).
func (m *Metrics) ForgetTemplate(name string) {
	if m == nil {
		return
	}
	m.templateReasons.swap(name, "")
	m.templateReady.DeletePartialMatch(prometheus.Labels{"template": name})
	m.templateFails.DeletePartialMatch(prometheus.Labels{"template": name})
}
