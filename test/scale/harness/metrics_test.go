//go:build integration

package harness

import (
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	in := `# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="minionbinding",result="error"} 2
controller_runtime_reconcile_total{controller="minionbinding",result="success"} 198
controller_runtime_reconcile_total{controller="miniontemplate",result="success"} 7
minionvault_vault_requests_total{code="200",operation="read"} 1.5e+03
workqueue_depth{controller="minionbinding",name="minionbinding"} 0
`
	s, err := parseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"controller_runtime_reconcile_total", []string{`controller="minionbinding"`}, 200},
		{"controller_runtime_reconcile_total", nil, 207},
		{"controller_runtime_reconcile_total", []string{`controller="minionbinding"`, `result="success"`}, 198},
		{"minionvault_vault_requests_total", []string{`operation="read"`}, 1500},
		{"minionvault_vault_requests_total", []string{`operation="write"`}, 0},
		{"workqueue_depth", []string{`name="minionbinding"`}, 0},
		{"missing_total", nil, 0},
	}
	for _, tc := range tests {
		if got := s.sum(tc.name, tc.labels...); got != tc.want {
			t.Errorf("sum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if got := label(`minionvault_vault_requests_total{code="200",operation="read"}`, "operation"); got != "read" {
		t.Errorf("label = %q, want read", got)
	}
}
