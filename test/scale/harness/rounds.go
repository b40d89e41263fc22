//go:build integration

package harness

import (
	"fmt"
	"slices"
	"strings"
)

// roundRatio is a ratio a run of several rounds reports by its median.
type roundRatio struct {
	phase, floor string
	// goal is the goal the median is held to (0: for reference only).
	goal func(n int) float64
}

// roundRatios: the converge over each of its floors, the rollouts over
// theirs. The floors carry the goals; the plain floor and the
// proof floors are for reference.
var roundRatios = []roundRatio{
	{phaseConverge, phaseFloorRecord, func(n int) float64 { g, _ := floorRatioGoal(n); return g }},
	{phaseConverge, phaseFloorProof, nil},
	{phaseConverge, phaseFloor, nil},
	{phaseTemplate, phaseFloorTemplate, func(int) float64 { return budgetRolloutRatio }},
	{phaseTemplate, phaseFloorTemplateProof, nil},
	{phasePolicy, phaseFloorPolicy, func(int) float64 { return budgetRolloutRatio }},
	{phasePolicy, phaseFloorPolicyProof, nil},
}

// roundGroup is the rounds of one size and shape, in the order they ran.
type roundGroup struct {
	n      int
	shape  string
	rounds []*ShapeResult
}

// groupRounds gathers the results of runs with several rounds; nil when
// every size and shape ran once.
func groupRounds(all []*ShapeResult) []roundGroup {
	var out []roundGroup
	for _, s := range all {
		if s.Round == 0 {
			continue
		}
		i := slices.IndexFunc(out, func(g roundGroup) bool { return g.n == s.N && g.shape == s.baseShape() })
		if i < 0 {
			out = append(out, roundGroup{n: s.N, shape: s.baseShape()})
			i = len(out) - 1
		}
		out[i].rounds = append(out[i].rounds, s)
	}
	return out
}

// ratios are r's ratio in each round that measured both phases.
func (g roundGroup) ratios(r roundRatio) []float64 {
	var out []float64
	for _, s := range g.rounds {
		if v, ok := phaseRatio(s, r.phase, r.floor); ok {
			out = append(out, v)
		}
	}
	return out
}

// median of xs (not empty); the mean of the middle two for an even count.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// RoundsSection is the report's table of ratios by round, with their
// median: the figure to quote from a run of several rounds.
func RoundsSection(all []*ShapeResult) string {
	groups := groupRounds(all)
	if len(groups) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Ratios by round\n\nEach size and shape measured in several rounds, each round the floors and the operator on fresh servers, the operator's phases first in even rounds. The median is the figure to quote: a single round's ratio moves by a tenth or more on this machine.\n\n")
	b.WriteString("| N | shape | ratio | each round | median | goal |\n|---:|---|---|---|---:|---|\n")
	for _, g := range groups {
		for _, r := range roundRatios {
			xs := g.ratios(r)
			if len(xs) == 0 {
				continue
			}
			each := make([]string, len(xs))
			for i, x := range xs {
				each[i] = fmt.Sprintf("%.2f", x)
			}
			goal := "for reference"
			if r.goal != nil {
				goal = fmt.Sprintf("%.1f×", r.goal(g.n))
			}
			fmt.Fprintf(&b, "| %d | %s | %s × %s | %s | %.2f | %s |\n", g.n, g.shape, r.phase, r.floor, strings.Join(each, ", "), median(xs), goal)
		}
	}
	return b.String()
}

// RoundGoals hold the medians to the goals, beside each round's own
// checks.
func RoundGoals(all []*ShapeResult) []Check {
	var out []Check
	for _, g := range groupRounds(all) {
		for _, r := range roundRatios {
			xs := g.ratios(r)
			if r.goal == nil || len(xs) < 2 {
				continue
			}
			m, goal := median(xs), r.goal(g.n)
			out = append(out, Check{
				Goal:     fmt.Sprintf("N=%d %s: %s within %.1f× %s, median of %d rounds", g.n, g.shape, r.phase, goal, r.floor, len(xs)),
				OK:       m <= goal,
				Measured: fmt.Sprintf("%.2f× (rounds %s)", m, strings.Trim(fmt.Sprintf("%.2f", xs), "[]")),
			})
		}
	}
	return out
}
