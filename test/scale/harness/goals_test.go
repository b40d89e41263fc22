//go:build integration

package harness

import (
	"strings"
	"testing"
	"time"
)

// TestGoalChecksFlat: the flat-cost goal compares cost per binding between
// the smallest and the largest N, and the floor's own growth is reported
// beside it, for the phases that have a floor.
func TestGoalChecksFlat(t *testing.T) {
	at := func(n int, opWall, opCPU, floorWall float64) *ShapeResult {
		sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
		return &ShapeResult{N: n, Shape: shapeShared, Phases: []*phaseResult{
			{Phase: phaseFloorTemplate, Per: n, Wall: sec(floorWall), CPU: map[string]float64{"apiserver": floorWall}},
			{Phase: phaseTemplate, Per: n, Wall: sec(opWall), CPU: map[string]float64{"operator": opCPU, "apiserver": opWall}},
		}}
	}
	tests := []struct {
		name              string
		small, large      *ShapeResult
		wantOp, wantFloor bool
	}{
		{"both flat", at(1000, 10, 2, 5), at(10000, 110, 21, 55), true, true},
		{"operator grows, floor flat", at(1000, 10, 2, 5), at(10000, 150, 21, 55), false, true},
		{"operator CPU grows", at(1000, 10, 2, 5), at(10000, 100, 30, 50), false, true},
		{"both grow", at(1000, 10, 2, 5), at(10000, 200, 40, 100), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var op, floor *Check
			checks := GoalChecks([]*ShapeResult{tc.small, tc.large})
			for i, c := range checks {
				switch {
				case strings.Contains(c.Goal, "for reference, "+phaseFloorTemplate):
					floor = &checks[i]
				case strings.Contains(c.Goal, phaseTemplate+" cost per binding flat"):
					op = &checks[i]
				}
			}
			if op == nil || floor == nil {
				t.Fatalf("want the operator's and the floor's flat checks, got %+v", checks)
			}
			if op.OK != tc.wantOp || floor.OK != tc.wantFloor {
				t.Errorf("operator OK %v (want %v): %s; floor OK %v (want %v): %s", op.OK, tc.wantOp, op.Measured, floor.OK, tc.wantFloor, floor.Measured)
			}
			if !strings.Contains(floor.Measured, "ms") || !strings.Contains(op.Measured, "the servers' CPU") {
				t.Errorf("measured strings lack their figures: %q, %q", op.Measured, floor.Measured)
			}
		})
	}
}

// TestGoalsByN: up to 10,000 bindings the converge's goal is 1.2× the floor
// and the RSS goal 256 MiB; above, 512 MiB and 1.3× (issue 34); a
// run of some phases reports the goals of those only.
func TestGoalsByN(t *testing.T) {
	at := func(n int, converge float64, peakMiB int64) *ShapeResult {
		s := &ShapeResult{N: n, Shape: shapeShared, Phases: []*phaseResult{
			{Phase: phaseFloor, Actor: "floor", Wall: time.Second, ServerPeakKiB: map[string]int64{"apiserver": 900 << 10, "etcd": 300 << 10}},
			{Phase: phaseFloorRecord, Actor: "floor", Wall: time.Second},
			{Phase: phaseConverge, Actor: "operator", Wall: time.Duration(converge * float64(time.Second)), PeakKiB: peakMiB << 10},
		}}
		for _, p := range s.Phases {
			p.N, p.Shape, p.Per = n, shapeShared, n
		}
		return s
	}
	find := func(checks []Check, goal string) *Check {
		for i, c := range checks {
			if strings.Contains(c.Goal, goal) {
				return &checks[i]
			}
		}
		t.Fatalf("no check %q among %+v", goal, checks)
		return nil
	}
	for _, tc := range []struct {
		s              *ShapeResult
		ratioOK, rssOK bool
	}{
		{at(10000, 1.15, 300), true, false},
		{at(10000, 1.3, 200), false, true},
		{at(50000, 1.4, 300), false, true},
		{at(50000, 1.25, 500), true, true},
		{at(50000, 1.25, 600), true, false},
	} {
		ratio := find(GoalChecks([]*ShapeResult{tc.s}), "converge within")
		rss := find(BudgetChecks(tc.s), "operator RSS")
		if ratio.OK != tc.ratioOK || rss.OK != tc.rssOK {
			t.Errorf("N=%d: ratio OK %v (want %v): %s %s; RSS OK %v (want %v): %s", tc.s.N, ratio.OK, tc.ratioOK, ratio.Goal, ratio.Measured, rss.OK, tc.rssOK, rss.Measured)
		}
	}
	if got := operatorSoftLimit(50000); got != 512<<20/100*80 {
		t.Errorf("operatorSoftLimit(50000) = %d", got)
	}
	s := at(50000, 1.25, 500)
	checks := append(BudgetChecks(s), GoalChecks([]*ShapeResult{s})...)
	report := Header(Config{ns: []int{10000, 50000}, shapes: []string{shapeShared}, phases: []string{phaseConverge, phaseRestart}}, "make bench-scale", time.Now(), "test") +
		Table([]*ShapeResult{s}, checks)
	for _, want := range []string{"256 MiB at N=10000; 512 MiB at N=50000", "not run: forced resync", "## Servers' memory per phase (MiB, peak)", "| 50000 | shared | floor | 900 | 300 | | |"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "NOT MET") {
		t.Errorf("a run of some phases reports a goal NOT MET:\n%s", report)
	}
}

// TestAllowances: the slots' allowance is the largest slot's names per
// slot a phase can see, and the checks due after the failover are spread
// over its interval, not the hour's.
func TestAllowances(t *testing.T) {
	names := policyNames(shapePerMinion, 200)
	if len(names) != expectedPolicies(shapePerMinion, 200) {
		t.Fatalf("%d names, %d policies expected", len(names), expectedPolicies(shapePerMinion, 200))
	}
	largest := largestSlot(names, verifySlots)
	if largest*verifySlots < len(names) || largest > len(names)/4 {
		t.Errorf("largest slot %d of %d names in %d slots", largest, len(names), verifySlots)
	}
	if got, _ := slotReads(&phaseResult{Wall: 3 * time.Second}, names); got != 2*largest {
		t.Errorf("a 3 s phase: %d slot reads, want %d", got, 2*largest)
	}
	forced := &phaseResult{Phase: phaseForced, Wall: 6 * time.Second}
	before := &ShapeResult{N: 10000, Phases: []*phaseResult{{Phase: phaseConverge}, forced}}
	after := &ShapeResult{N: 10000, Phases: []*phaseResult{{Phase: phaseConverge}, {Phase: phaseFailover}, forced}}
	if got, _ := checksDue(before, forced); got != (10000*6/3600+1)*budgetResyncVaultReads {
		t.Errorf("checks due without a failover before: %d", got)
	}
	if got, _ := checksDue(after, forced); got != (10000*6/600+1)*budgetResyncVaultReads {
		t.Errorf("checks due after the failover: %d", got)
	}
}

// TestRolloutGoals: a rollout meets issue 34's goal 1 within 1.5× its
// floor and with its first write within a second; the ratio over the
// proof floor is reported beside it, and each is judged apart.
func TestRolloutGoals(t *testing.T) {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	shape := func(op, floor, proof float64, first time.Duration) *ShapeResult {
		return &ShapeResult{N: 10000, Shape: shapePerMinion, Phases: []*phaseResult{
			{Phase: phaseFloorPolicy, Wall: sec(floor)},
			{Phase: phaseFloorPolicyProof, Wall: sec(proof)},
			{Phase: phasePolicy, Wall: sec(op), Rollout: &rollout{Class: "policy", Writes: 10, First: first}},
		}}
	}
	tests := []struct {
		name                        string
		s                           *ShapeResult
		wantRatio, wantProof, want1 bool
	}{
		{"all met", shape(9, 6, 8, 500*time.Millisecond), true, true, true},
		{"the reads make the gap", shape(19.6, 6, 14, 1155*time.Millisecond), false, true, false},
		{"slow beside both", shape(30, 6, 14, 200*time.Millisecond), false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]bool{}
			for _, c := range rolloutGoals(tc.s) {
				switch {
				case strings.Contains(c.Goal, "for reference"):
					got["proof"] = c.OK
				case strings.Contains(c.Goal, "first minion's change"):
					got["first"] = c.OK
				case strings.Contains(c.Goal, "within 1.5× its floor"):
					got["ratio"] = c.OK
				}
			}
			if len(got) != 3 || got["ratio"] != tc.wantRatio || got["proof"] != tc.wantProof || got["first"] != tc.want1 {
				t.Errorf("checks %v, want ratio %v, proof %v, first write %v", got, tc.wantRatio, tc.wantProof, tc.want1)
			}
		})
	}
}

// TestPolicyChangeAfterFailover: the policy change reads no binding's
// objects, except, after a failover in the same round, the drift checks
// its new leader spread over the failover's interval, up to twice their
// steady rate.
func TestPolicyChangeAfterFailover(t *testing.T) {
	policy := func(checks int) *phaseResult {
		v := newTally()
		v.By["policy R"], v.By["policy W"] = 10000, 10000
		v.By["entity R"], v.By["role R"], v.By["role/role-id R"] = checks, checks, checks
		return &phaseResult{Phase: phasePolicy, Wall: 11 * time.Second, Quiet: 60 * time.Second, Vault: v, Per: 10000}
	}
	failover := &phaseResult{Phase: phaseFailover, Failover: &failoverResult{Interval: 10 * time.Minute, Steady: 3000}}
	find := func(s *ShapeResult) Check {
		for _, c := range GoalChecks([]*ShapeResult{s}) {
			if strings.Contains(c.Goal, "policy change reads") {
				return c
			}
		}
		t.Fatal("no check of the policy change's reads")
		return Check{}
	}
	for _, tc := range []struct {
		name   string
		phases []*phaseResult
		ok     bool
	}{
		{"no failover, no reads", []*phaseResult{policy(0)}, true},
		{"no failover, a check fell due", []*phaseResult{policy(1)}, false},
		{"after a failover, its checks at the steady rate", []*phaseResult{failover, policy(1142)}, true},
		// 2 × 3,000 per minute over 71 s: 7,100 reads.
		{"after a failover, more than twice its rate", []*phaseResult{failover, policy(2400)}, false},
		{"a failover after the policy change allows nothing", []*phaseResult{policy(1), failover}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := find(&ShapeResult{N: 10000, Shape: shapePerMinion, Phases: tc.phases})
			if c.OK != tc.ok {
				t.Errorf("%s: OK %v, want %v (%s)", c.Goal, c.OK, tc.ok, c.Measured)
			}
		})
	}
}
