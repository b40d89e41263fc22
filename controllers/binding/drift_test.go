package binding

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
)

func TestTrackDrift(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	run := func(count int32, last time.Time) *v1alpha1.DriftCorrectionsStatus {
		return &v1alpha1.DriftCorrectionsStatus{Count: count, LastTime: metav1.NewTime(last), Objects: []string{"old"}}
	}
	role := []string{"AppRole salt-minions/web01"}
	cases := []struct {
		name      string
		before    *v1alpha1.DriftCorrectionsStatus
		corrected []string
		at        time.Time
		want      driftRun
		wantCount int32 // 0: no run left in status
	}{
		{"nothing, no run", nil, nil, t0, driftRunNone, 0},
		{"a first correction starts a run", nil, role, t0, driftRunNone, 1},
		{"a second within a day is recurring", run(1, t0), role, t0.Add(time.Hour), driftRunStarted, 2},
		{"a third continues it", run(2, t0), role, t0.Add(time.Hour), driftRunRecurring, 3},
		{"a quiet resync keeps a young run", run(2, t0), nil, t0.Add(23 * time.Hour), driftRunRecurring, 2},
		{"a quiet resync ends a day-old run", run(2, t0), nil, t0.Add(25 * time.Hour), driftRunNone, 0},
		{"a correction after a quiet day starts over", run(5, t0), role, t0.Add(25 * time.Hour), driftRunNone, 1},
		{"a quiet resync keeps a single correction", run(1, t0), nil, t0.Add(time.Hour), driftRunNone, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &v1alpha1.MinionBindingStatus{DriftCorrections: tc.before}
			if got := trackDrift(st, tc.corrected, tc.at); got != tc.want {
				t.Errorf("run %v, want %v", got, tc.want)
			}
			got := st.DriftCorrections
			switch {
			case tc.wantCount == 0 && got != nil:
				t.Errorf("run left in status: %+v", got)
			case tc.wantCount != 0 && (got == nil || got.Count != tc.wantCount):
				t.Errorf("run %+v, want count %d", got, tc.wantCount)
			case tc.corrected != nil && (!got.LastTime.Time.Equal(tc.at) || strings.Join(got.Objects, ",") != strings.Join(tc.corrected, ",")):
				t.Errorf("run %+v, want the correction at %s of %v", got, tc.at, tc.corrected)
			}
		})
	}
}

// A writer that rewrites the role after every correction (a Salt master
// whose AppRole parameters differ from the template's) gets one Warning
// that names it, a condition while it goes on and one count in the metric;
// the condition goes a day after the fight stops.
func TestRecurringDriftIsSaidOnce(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	reg := prometheus.NewRegistry()
	h.r.Metrics = metrics.New(reg)
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	h.r.clock = func() time.Time { return now }
	ctx := context.Background()
	h.reconcile("salt", "web01")
	h.events()

	masterRewrite := func() {
		t.Helper()
		if err := h.v.WriteRole(ctx, "salt-minions", "web01", map[string]any{"token_num_uses": 5, "token_policies": []string{"salt_role_web", "salt_role_build"}}); err != nil {
			t.Fatal(err)
		}
	}
	recurring := func() *metav1.Condition {
		return apimeta.FindStatusCondition(h.get("salt", "web01").Status.Conditions, v1alpha1.DriftRecurringCondition)
	}

	masterRewrite()
	now = now.Add(time.Hour)
	h.reconcile("salt", "web01")
	if ev := h.events(); !strings.Contains(ev, "DriftCorrected") || strings.Contains(ev, "DriftRecurring") {
		t.Fatalf("first correction: events %q", ev)
	}
	if c := recurring(); c != nil {
		t.Fatalf("recurring after one correction: %+v", c)
	}

	for i := 0; i < 3; i++ {
		masterRewrite()
		now = now.Add(time.Hour)
		h.reconcile("salt", "web01")
		ev := h.events()
		if i == 0 {
			if strings.Count(ev, "DriftRecurring") != 1 || !strings.Contains(ev, "Salt master") ||
				!strings.Contains(ev, "token_num_uses is 5, want 10") || !strings.Contains(ev, "salt_role_build") {
				t.Fatalf("second correction: events %q", ev)
			}
		} else if ev != "" {
			t.Fatalf("correction %d of a known fight: events %q", i+2, ev)
		}
		c := recurring()
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.OtherWriterReason ||
			!strings.Contains(c.Message, otherWriterDoc) || !strings.Contains(c.Message, "AppRole salt-minions/web01") {
			t.Fatalf("correction %d: condition %+v", i+2, c)
		}
		if ready := outcome.ReadyOf(h.get("salt", "web01")); ready.Status != metav1.ConditionTrue {
			t.Fatalf("Ready %+v", ready)
		}
	}
	if n, err := counterValue(reg, "minionvault_drift_recurring_total"); err != nil || n != 1 {
		t.Errorf("minionvault_drift_recurring_total %v (%v), want 1 for one run", n, err)
	}
	if run := h.get("salt", "web01").Status.DriftCorrections; run == nil || run.Count != 4 {
		t.Errorf("run %+v, want 4 corrections", run)
	}

	// The master stops; a quiet resync within the day keeps the warning,
	// the first after it clears it.
	now = now.Add(time.Hour)
	h.reconcile("salt", "web01")
	if recurring() == nil {
		t.Fatal("condition gone an hour after the last correction")
	}
	now = now.Add(recurringDriftWindow)
	h.reconcile("salt", "web01")
	if c, b := recurring(), h.get("salt", "web01"); c != nil || b.Status.DriftCorrections != nil {
		t.Fatalf("a day later: condition %+v, run %+v", c, b.Status.DriftCorrections)
	}
}

// counterValue is the sum of a counter's series in reg.
func counterValue(reg *prometheus.Registry, name string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum, nil
}
