package metrics

import (
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// Two managers in one process (the e2e suites) must both be counted on the
// one endpoint, not only the first.
func TestNewTwiceSharesTheRegisteredCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := New(reg), New(reg)
	a.Request("write", "p", 204, time.Millisecond)
	b.Request("write", "p", 204, time.Millisecond)
	b.Login("token", nil)
	if got := testutil.ToFloat64(a.vaultRequests.WithLabelValues("write", "204")); got != 2 {
		t.Errorf("requests counted %v, want 2", got)
	}
	// Every method and result, at 0 from the start (alerts see the first).
	if n, err := testutil.GatherAndCount(reg, "minionvault_vault_logins_total"); err != nil || n != 6 {
		t.Errorf("logins series %d, %v", n, err)
	}
	if got := testutil.ToFloat64(b.logins.WithLabelValues("token", "success")); got != 1 {
		t.Errorf("token logins %v, want 1", got)
	}
}

func bindingSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "minionvault_bindings" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[l["namespace"]+"/"+l["template"]+"/"+l["ready"]+"/"+l["reason"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The bindings gauge counts each binding once, in the state its last
// reconcile left it in; a state no binding is in has no series.
func TestBindingsGaugeMovesEachBindingBetweenStates(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	ready := BindingState{Namespace: "a", Template: "salt", Ready: true, Reason: "Succeeded"}
	refused := BindingState{Namespace: "a", Template: "salt", Reason: "ValidationFailed"}
	web, db, b1 := types.NamespacedName{Namespace: "a", Name: "web"}, types.NamespacedName{Namespace: "a", Name: "db"},
		types.NamespacedName{Namespace: "b", Name: "web"}
	m.Binding(web, ready)
	m.Binding(db, ready)
	m.Binding(web, ready) // again: no double count
	m.Binding(b1, BindingState{Namespace: "b", Template: "salt", Reason: "VaultUnavailable"})
	want := map[string]float64{"a/salt/true/Succeeded": 2, "b/salt/false/VaultUnavailable": 1}
	if got := bindingSeries(t, reg); !maps.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	m.Binding(db, refused)
	m.ForgetBinding(b1)
	m.ForgetBinding(b1) // a second NotFound changes nothing
	want = map[string]float64{"a/salt/true/Succeeded": 1, "a/salt/false/ValidationFailed": 1}
	if got := bindingSeries(t, reg); !maps.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	m.Binding(db, ready)
	want = map[string]float64{"a/salt/true/Succeeded": 2}
	if got := bindingSeries(t, reg); !maps.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
}

// A fleet costs one small map entry per binding and as many series as
// distinct states, never a series per binding.
func TestBindingsGaugeCardinalityIsTheStatesNotTheFleet(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	reasons := []string{"Succeeded", "VaultUnavailable", "ValidationFailed"}
	for i := range 10000 {
		m.Binding(types.NamespacedName{Namespace: "ns" + strconv.Itoa(i%5), Name: "m" + strconv.Itoa(i)},
			BindingState{Namespace: "ns" + strconv.Itoa(i%5), Template: "salt", Ready: i%3 == 0, Reason: reasons[i%3]})
	}
	got := bindingSeries(t, reg)
	if len(got) != 15 {
		t.Fatalf("%d series for 10,000 bindings in 5 namespaces and 3 states, want 15", len(got))
	}
	var sum float64
	for _, v := range got {
		sum += v
	}
	if sum != 10000 {
		t.Fatalf("the series sum to %v, want 10000", sum)
	}
	if n := len(m.bindingStates.states); n != 15 {
		t.Fatalf("%d states in the table, want 15", n)
	}
}

// Two managers in one process share the gauge: a binding forgotten by one
// must not leave the other's count wrong.
func TestBindingsGaugeSharedByTwoManagers(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := New(reg), New(reg)
	s := BindingState{Namespace: "a", Template: "salt", Ready: true, Reason: "Succeeded"}
	a.Binding(types.NamespacedName{Namespace: "a", Name: "web"}, s)
	b.Binding(types.NamespacedName{Namespace: "a", Name: "db"}, s)
	a.ForgetBinding(types.NamespacedName{Namespace: "a", Name: "db"})
	if got := bindingSeries(t, reg); !maps.Equal(got, map[string]float64{"a/salt/true/Succeeded": 1}) {
		t.Fatalf("series %v", got)
	}
}

func TestConnectionMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	exp := time.Unix(1_900_000_000, 0)
	m.Connection("vault", true, exp, time.Hour)
	if got := testutil.ToFloat64(m.connReady.WithLabelValues("vault")); got != 1 {
		t.Errorf("ready %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.tokenExpiry.WithLabelValues("vault")); got != 1_900_000_000 {
		t.Errorf("expiry %v", got)
	}
	if got := testutil.ToFloat64(m.tokenLease.WithLabelValues("vault")); got != 3600 {
		t.Errorf("lease %v, want 3600", got)
	}
	// A failed check says nothing of the token: its expiry stays.
	m.ConnectionFailed("vault")
	if got := testutil.ToFloat64(m.connReady.WithLabelValues("vault")); got != 0 {
		t.Errorf("ready %v after a failed check, want 0", got)
	}
	if n, _ := testutil.GatherAndCount(reg, "minionvault_connection_token_expiry_timestamp_seconds"); n != 1 {
		t.Errorf("%d expiry series after a failed check, want 1", n)
	}
	// A token that never expires has no expiry series.
	m.Connection("vault", true, time.Time{}, 0)
	if n, _ := testutil.GatherAndCount(reg, "minionvault_connection_token_expiry_timestamp_seconds", "minionvault_connection_token_lease_seconds"); n != 0 {
		t.Errorf("%d token series for a token that never expires, want 0", n)
	}
	m.ForgetConnection("vault")
	if n, _ := testutil.GatherAndCount(reg, "minionvault_connection_ready"); n != 0 {
		t.Errorf("%d ready series after the connection was deleted, want 0", n)
	}
}

func TestTemplateMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Template("salt", false, "Progressing", false)
	m.Template("salt", false, "PolicyNotOwned", true)
	m.Template("salt", false, "PolicyNotOwned", true)
	m.Template("other", true, "Succeeded", false)
	if got := testutil.ToFloat64(m.templateFails.WithLabelValues("salt", "PolicyNotOwned")); got != 2 {
		t.Errorf("failures %v, want 2", got)
	}
	// One series per template: its current reason only.
	if n, _ := testutil.GatherAndCount(reg, "minionvault_template_ready"); n != 2 {
		t.Errorf("%d template ready series, want 2", n)
	}
	if got := testutil.ToFloat64(m.templateReady.WithLabelValues("salt", "PolicyNotOwned")); got != 0 {
		t.Errorf("salt ready %v, want 0", got)
	}
	m.ForgetTemplate("salt")
	if n, _ := testutil.GatherAndCount(reg, "minionvault_template_ready", "minionvault_template_policy_failures_total"); n != 1 {
		t.Errorf("%d template series after salt was deleted, want 1 (other's)", n)
	}
}

// A binding's reconcile costs the gauge O(1), whatever the fleet's size.
func BenchmarkBindingState(b *testing.B) {
	m := New(prometheus.NewRegistry())
	keys := make([]types.NamespacedName, 50000)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: "ns", Name: "m" + strconv.Itoa(i)}
		m.Binding(keys[i], BindingState{Namespace: "ns", Template: "salt", Ready: true, Reason: "Succeeded"})
	}
	states := []BindingState{{Namespace: "ns", Template: "salt", Ready: true, Reason: "Succeeded"},
		{Namespace: "ns", Template: "salt", Reason: "VaultUnavailable"}}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		m.Binding(keys[i%len(keys)], states[i%2])
	}
}
