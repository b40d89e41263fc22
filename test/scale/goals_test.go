//go:build integration

package scale

import (
	"strings"
	"testing"
	"time"
)

// TestGoalChecksFlat: the flat-cost goal compares cost per binding between
// the smallest and the largest N, and the floor's own growth is reported
// beside it, for the phases that have a floor.
func TestGoalChecksFlat(t *testing.T) {
	at := func(n int, opWall, opCPU, floorWall float64) *shapeResult {
		sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
		return &shapeResult{N: n, Shape: shapeShared, Phases: []*phaseResult{
			{Phase: phaseFloorTemplate, Per: n, Wall: sec(floorWall), CPU: map[string]float64{"apiserver": floorWall}},
			{Phase: phaseTemplate, Per: n, Wall: sec(opWall), CPU: map[string]float64{"operator": opCPU, "apiserver": opWall}},
		}}
	}
	tests := []struct {
		name              string
		small, large      *shapeResult
		wantOp, wantFloor bool
	}{
		{"both flat", at(1000, 10, 2, 5), at(10000, 110, 21, 55), true, true},
		{"operator grows, floor flat", at(1000, 10, 2, 5), at(10000, 150, 21, 55), false, true},
		{"operator CPU grows", at(1000, 10, 2, 5), at(10000, 100, 30, 50), false, true},
		{"both grow", at(1000, 10, 2, 5), at(10000, 200, 40, 100), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var op, floor *check
			checks := goalChecks([]*shapeResult{tc.small, tc.large})
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
