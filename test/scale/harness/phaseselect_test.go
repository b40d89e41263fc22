//go:build integration

package harness

import (
	"slices"
	"strings"
	"testing"
)

// TestParsePhases: names by their constant, hyphenated or first word,
// separated by commas or spaces; the converge always; an unknown name an
// error that lists the valid ones.
func TestParsePhases(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"converge,restart", []string{phaseConverge, phaseRestart}},
		{"restart", []string{phaseConverge, phaseRestart}},
		{"delete restart-resync", []string{phaseConverge, phaseRestart, phaseDelete}},
		{"restart resync, template change,policy", []string{phaseConverge, phaseRestart, phaseTemplate, phasePolicy}},
		{"Failover single", []string{phaseConverge, phaseFailover, phaseLatency}},
		{"forced-resync forced", []string{phaseConverge, phaseForced}},
	}
	for _, tc := range tests {
		got, err := parsePhases(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parsePhases(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"converge,resync", "restart,warmup"} {
		if _, err := parsePhases(in); err == nil || !strings.Contains(err.Error(), "template (or \"template change\", template-change)") {
			t.Errorf("parsePhases(%q): error %v, want one that lists the phases", in, err)
		}
	}

	c := Config{phases: []string{phaseConverge, phaseRestart}}
	for floor, want := range map[string]bool{phaseFloor: true, phaseFloorRecord: true, phaseFloorForced: false, phaseFloorTemplate: false, phaseFloorPolicy: false} {
		if c.runsFloor(floor) != want {
			t.Errorf("phases %q: runsFloor(%q) = %v, want %v", c.phases, floor, !want, want)
		}
	}
	c.phases = []string{phaseConverge, phaseForced, phasePolicy}
	if !c.runsFloor(phaseFloorForced) || !c.runsFloor(phaseFloorPolicy) || c.runsFloor(phaseFloorTemplate) {
		t.Errorf("phases %q: the floors of the forced resync and the policy change only", c.phases)
	}
	if all := (Config{}); !all.runs(phaseDelete) || !all.runsFloor(phaseFloorTemplate) || phasesRun(all) != "" {
		t.Error("no selection: every phase runs")
	}
}
