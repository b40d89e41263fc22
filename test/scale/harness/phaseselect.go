//go:build integration

package harness

import (
	"fmt"
	"slices"
	"strings"
)

// operatorPhaseNames are the operator's phases, in the order
// operatorPhases runs them.
var operatorPhaseNames = []string{phaseConverge, phaseRestart, phaseForced, phaseFailover, phaseTemplate, phasePolicy, phaseLatency, phaseSweep, phaseDelete}

// parsePhases reads SCALE_PHASES: operator phases separated by commas or
// spaces, each by its name (a name of two words also with a hyphen,
// "restart-resync", or by its first word alone, "restart", which is
// unique among them). The converge is added when it is missing: it
// creates the bindings the others work on.
func parsePhases(v string) ([]string, error) {
	byName := map[string]string{}
	for _, p := range operatorPhaseNames {
		byName[p] = p
		byName[strings.ReplaceAll(p, " ", "-")] = p
		first, _, _ := strings.Cut(p, " ")
		byName[first] = p
	}
	tokens := strings.FieldsFunc(strings.ToLower(v), func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' })
	selected := []string{phaseConverge}
	for i := 0; i < len(tokens); i++ {
		// A name of two words written with its space, "restart resync".
		if i+1 < len(tokens) && strings.Contains(byName[tokens[i]+" "+tokens[i+1]], " ") {
			selected = append(selected, byName[tokens[i]+" "+tokens[i+1]])
			i++
			continue
		}
		p, ok := byName[tokens[i]]
		if !ok {
			return nil, fmt.Errorf("unknown phase %q; the operator's phases are %s", tokens[i], validPhases())
		}
		selected = append(selected, p)
	}
	// In the order they run, whatever the order asked.
	return slices.DeleteFunc(slices.Clone(operatorPhaseNames), func(p string) bool { return !slices.Contains(selected, p) }), nil
}

// validPhases lists the names parsePhases accepts, for its error.
func validPhases() string {
	names := make([]string, len(operatorPhaseNames))
	for i, p := range operatorPhaseNames {
		first, _, two := strings.Cut(p, " ")
		names[i] = first
		if two {
			names[i] += fmt.Sprintf(" (or %q, %s)", p, strings.ReplaceAll(p, " ", "-"))
		}
	}
	return strings.Join(names, ", ")
}

// runs says whether the run includes the operator phase: every one when
// no phases were selected, the converge always.
func (c Config) runs(phase string) bool {
	if phase == phaseSweep {
		// Only when asked for: it restarts the operator with a sweep
		// interval of its own, which a baseline's operator may not know.
		return slices.Contains(c.phases, phase)
	}
	return c.phases == nil || phase == phaseConverge || slices.Contains(c.phases, phase)
}

// runsFloor says whether the run includes the floor phase: the floor and
// the floor with the ownership record always (the converge's ratios are
// over them), each other floor when the operator phase it is the floor of
// runs.
func (c Config) runsFloor(floor string) bool {
	if floor == phaseFloor || floor == phaseFloorRecord || floor == phaseFloorProof {
		return true
	}
	for _, p := range operatorPhaseNames {
		if (floorOf(p) == floor || proofFloorOf(p) == floor) && c.runs(p) {
			return true
		}
	}
	return false
}

// phasesRun says which phases a run with cfg makes, for the report's
// header; "" when it makes all of them.
func phasesRun(c Config) string {
	if c.phases == nil {
		return ""
	}
	var floors, skipped []string
	for _, f := range []string{phaseFloor, phaseFloorForced, phaseFloorTemplate, phaseFloorPolicy, phaseFloorRecord, phaseFloorTemplateProof, phaseFloorPolicyProof, phaseFloorProof} {
		if c.runsFloor(f) {
			floors = append(floors, f)
		}
	}
	for _, p := range operatorPhaseNames {
		if !c.runs(p) {
			skipped = append(skipped, p)
		}
	}
	return fmt.Sprintf("operator phases %s, floors %s (%s; not run: %s)", strings.Join(c.phases, ", "), strings.Join(floors, ", "),
		envPhases, strings.Join(skipped, ", "))
}
