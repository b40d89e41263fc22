//go:build integration

package harness

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRounds: a run of several rounds is judged by each round's median
// ratio, not by its luckiest or unluckiest round, and the report lists
// every round beside the median.
func TestRounds(t *testing.T) {
	round := func(shape string, r int, floorRecord, converge float64) *ShapeResult {
		s := &ShapeResult{N: 10000, Shape: shape + " #x", Base: shape, Round: r, Phases: []*phaseResult{
			{Phase: phaseFloorRecord, Actor: "floor", Wall: time.Duration(floorRecord * float64(time.Second))},
			{Phase: phaseConverge, Actor: "operator", Wall: time.Duration(converge * float64(time.Second))},
		}}
		return s
	}
	for _, tc := range []struct {
		name   string
		rounds []*ShapeResult
		median string
		ok     bool
	}{
		{"one slow round of three", []*ShapeResult{round(shapeShared, 1, 100, 115), round(shapeShared, 2, 100, 158), round(shapeShared, 3, 100, 118)}, "1.18×", true},
		{"one fast round of three", []*ShapeResult{round(shapeShared, 1, 100, 114), round(shapeShared, 2, 100, 130), round(shapeShared, 3, 100, 133)}, "1.30×", false},
		{"two rounds: the mean of both", []*ShapeResult{round(shapeShared, 1, 100, 110), round(shapeShared, 2, 100, 128)}, "1.19×", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := RoundGoals(tc.rounds)
			if len(checks) != 1 {
				t.Fatalf("%d checks, want the converge's median alone: %+v", len(checks), checks)
			}
			c := checks[0]
			if c.OK != tc.ok || !strings.HasPrefix(c.Measured, tc.median) || !strings.Contains(c.Goal, "median of") {
				t.Errorf("%s: OK %v, measured %s; want OK %v, %s", c.Goal, c.OK, c.Measured, tc.ok, tc.median)
			}
		})
	}
	// Shapes are grouped apart, and a run of one round has no medians.
	mixed := []*ShapeResult{round(shapeShared, 1, 100, 110), round(shapePerMinion, 1, 100, 150), round(shapeShared, 2, 100, 112), round(shapePerMinion, 2, 100, 152)}
	if got := len(RoundGoals(mixed)); got != 2 {
		t.Errorf("%d median checks for two shapes, want 2", got)
	}
	section := RoundsSection(mixed)
	for _, want := range []string{"| 10000 | shared | converge × floor + record | 1.10, 1.12 | 1.11 | 1.2× |", "| 10000 | perminion | converge × floor + record | 1.50, 1.52 | 1.51 | 1.2× |"} {
		if !strings.Contains(section, want) {
			t.Errorf("the section lacks %q:\n%s", want, section)
		}
	}
	single := round(shapeShared, 0, 100, 110)
	if RoundGoals([]*ShapeResult{single}) != nil || RoundsSection([]*ShapeResult{single}) != "" {
		t.Error("a run of one round reports medians")
	}
}

// A round's rows are labelled "perminion #2", but its budgets are the
// shape's: a policy per minion is in the converge's policy budget (the
// label once made it 11, and every per-minion round NOT MET).
func TestRoundBudgetsByShape(t *testing.T) {
	const n = 100
	vault := newTally()
	for range expectedPolicies(shapePerMinion, n) {
		vault.add("policy W", true, false)
		vault.add("policy R", false, false)
	}
	converge := &phaseResult{Phase: phaseConverge, Actor: "operator", N: n, Per: n, Wall: time.Second, Vault: vault, Kube: newTally()}
	for _, s := range []*ShapeResult{
		{N: n, Shape: shapePerMinion + " #2", Base: shapePerMinion, Round: 2, Phases: []*phaseResult{converge}},
		{N: n, Shape: shapePerMinion, Phases: []*phaseResult{converge}}, // a report without Base
	} {
		for _, c := range BudgetChecks(s) {
			if strings.Contains(c.Goal, "policy") && !c.OK {
				t.Errorf("%s: %s NOT MET: %s", s.Shape, c.Goal, c.Measured)
			}
		}
	}
	// And the shared shape's budget still refuses a policy per minion.
	shared := &ShapeResult{N: n, Shape: shapeShared + " #1", Base: shapeShared, Round: 1, Phases: []*phaseResult{converge}}
	refused := false
	for _, c := range BudgetChecks(shared) {
		refused = refused || (strings.Contains(c.Goal, "policy writes") && !c.OK)
	}
	if !refused {
		t.Error("the shared shape's budget allows a policy per minion")
	}
}

// One round runs without a round in its rows; several are numbered from 1.
func TestRoundNumbers(t *testing.T) {
	for rounds, want := range map[int]string{0: "[0]", 1: "[0]", 3: "[1 2 3]"} {
		if got := fmt.Sprint(Config{rounds: rounds}.roundNumbers()); got != want {
			t.Errorf("rounds %d: %s, want %s", rounds, got, want)
		}
	}
}
