package devenv

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Readiness tells whether an object of this project's API is Ready for its
// current generation: status.observedGeneration equals
// metadata.generation and the Ready condition is True. When it is not, why
// says what the status shows instead (the Ready and Stalled conditions'
// status, reason and message).
func Readiness(u *unstructured.Unstructured) (ready bool, why string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	var readyCond, stalled map[string]any
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		switch m["type"] {
		case "Ready":
			readyCond = m
		case "Stalled":
			stalled = m
		}
	}
	if readyCond == nil {
		return false, "no Ready condition yet (the operator has not reconciled it)"
	}
	condGen, _, _ := unstructured.NestedInt64(readyCond, "observedGeneration")
	if observed < u.GetGeneration() && condGen < u.GetGeneration() {
		return false, fmt.Sprintf("generation %d not observed yet (status is of %d): %s", u.GetGeneration(), max(observed, condGen), describe(readyCond))
	}
	if readyCond["status"] == "True" {
		return true, ""
	}
	why = describe(readyCond)
	if stalled != nil && stalled["status"] == "True" {
		why += "; Stalled: " + describe(stalled)
	}
	return false, why
}

func describe(c map[string]any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v=%v", c["type"], c["status"])
	if r, _ := c["reason"].(string); r != "" {
		fmt.Fprintf(&b, " (%s)", r)
	}
	if m, _ := c["message"].(string); m != "" {
		fmt.Fprintf(&b, ": %s", m)
	}
	return b.String()
}
