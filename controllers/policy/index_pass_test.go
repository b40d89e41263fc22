package policy

import (
	"testing"
	"time"
)

// The next pass comes at the template's scan, unless a verify slot or a
// recheck of names found someone else's comes sooner; a scan already due
// waits a second, not zero.
func TestNextPass(t *testing.T) {
	same := func(d time.Duration) time.Duration { return d }
	for _, tc := range []struct {
		name  string
		times passTimes
		want  time.Duration
	}{
		{"the scan", passTimes{scan: time.Hour}, time.Hour},
		{"a scan overdue waits a second", passTimes{scan: -time.Minute}, time.Second},
		{"a slot sooner", passTimes{scan: time.Hour, slot: time.Minute}, time.Minute},
		{"a slot later", passTimes{scan: time.Minute, slot: time.Hour}, time.Minute},
		{"a recheck sooner", passTimes{scan: time.Hour, slot: time.Minute, recheck: 5 * time.Second}, 5 * time.Second},
		{"a recheck later", passTimes{scan: time.Hour, slot: time.Minute, recheck: 2 * time.Minute}, time.Minute},
		{"no slot, no recheck", passTimes{scan: 10 * time.Second}, 10 * time.Second},
	} {
		if got := tc.times.requeue(same); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// Only the scan is jittered: a slot or a recheck is a time that comes.
	if got := (passTimes{scan: time.Hour, slot: time.Minute}).requeue(func(d time.Duration) time.Duration { return 2 * d }); got != time.Minute {
		t.Errorf("jittered slot: %s", got)
	}
	if got := (passTimes{scan: time.Hour}).requeue(func(d time.Duration) time.Duration { return 2 * d }); got != 2*time.Hour {
		t.Errorf("jittered scan: %s", got)
	}
}

// A pass begins and ends under the index's lock; what begin decides
// follows the template's state: a full scan first, then retries, and a
// recheck of names someone else owns only when no scan is due.
func TestPassBeginsAndEnds(t *testing.T) {
	x := newPolicyIndex()
	now := time.Now()
	rq := scanRequest{identity: "v", vaultKey: "k", interval: time.Hour}
	if p := x.begin("t", rq, now); p.scan != verifyScan || p.forget != "" {
		t.Fatalf("first pass: %+v", p)
	}
	x.rebuild("t", nil, nil, true)
	x.discoveredOwned("t", nil)
	x.settle("t", policyWork{desired: map[string]string{"p": "b"}}, policyPass{notOwned: []string{"p"}})
	x.part("t").notOwnedSeen = now.Add(-time.Minute)
	p := x.begin("t", rq, now)
	if p.scan != noScan {
		t.Fatalf("second pass: %+v", p)
	}
	if s := x.summary("t"); s.unchecked != 1 {
		t.Errorf("the name someone else owns is not rechecked: %+v", s)
	}
	e := x.end(p, now)
	if e.times.recheck != time.Second || e.times.scan != time.Hour-now.Sub(x.part("t").lastScan) || len(e.summary.notOwned) != 1 {
		t.Errorf("end: %+v", e)
	}
	if p := x.begin("t", scanRequest{identity: "w", vaultKey: "k2", interval: time.Hour}, now); p.scan != verifyScan || p.forget != "k" {
		t.Errorf("another Vault: %+v", p)
	}
}
