package alerting

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const root = "../../.."

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`minionvault_connection_ready == 0`, []string{"minionvault_connection_ready"}},
		{`sum by (namespace, template, reason) (minionvault_bindings{ready="false", reason!="Suspended"}) > 0`, []string{"minionvault_bindings"}},
		{`(minionvault_connection_token_expiry_timestamp_seconds - time()) < 0.25 * minionvault_connection_token_lease_seconds`,
			[]string{"minionvault_connection_token_expiry_timestamp_seconds", "minionvault_connection_token_lease_seconds"}},
		{`histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{name=~"a|b"}[10m]))) > 600`,
			[]string{"workqueue_queue_duration_seconds_bucket"}},
		{`sum(rate(a_total[5m] offset 1h)) / on (x) group_left (y) sum without (z) (b) and bool c unless d or e`,
			[]string{"a_total", "b", "c", "d", "e"}},
		{`max_over_time(deriv(workqueue_depth[30m:1m])[1h:]) > 1e3 and absent(up_seconds)`, []string{"up_seconds", "workqueue_depth"}},
		// Grafana's variables, and a label value that looks like a metric.
		{`sum by (reason) (minionvault_bindings{namespace=~"$namespace", template="${template:regex}", reason="foo_total"})[$__rate_interval]`,
			[]string{"minionvault_bindings"}},
		{`label_values(minionvault_bindings{ready="false"}, namespace)`, []string{"minionvault_bindings"}},
		{`label_values(minionvault_template_ready, template)`, []string{"minionvault_template_ready"}},
		{`label_values(namespace)`, nil},
		{`vector(1) + Inf - NaN`, nil},
	} {
		if got := MetricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

func TestExposedNamesAndMissing(t *testing.T) {
	exposition := `# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{controller="minionbinding",name="minionbinding",priority="0"} 0
# TYPE minionvault_vault_request_duration_seconds histogram
minionvault_vault_request_duration_seconds_bucket{operation="read",le="0.001"} 3
minionvault_vault_request_duration_seconds_count{operation="read"} 3
minionvault_drift_recurring_total 0
`
	exposed := ExposedNames(exposition)
	for _, n := range []string{"workqueue_depth", "minionvault_vault_request_duration_seconds_bucket",
		"minionvault_vault_request_duration_seconds_count", "minionvault_drift_recurring_total"} {
		if !exposed[n] {
			t.Errorf("%s not found in the exposition", n)
		}
	}
	// A rule naming a metric the operator does not export is reported.
	got := Missing([]string{"workqueue_depth", "minionvault_bindings_not_ready", "minionvault_drift_recurring_total"}, exposed)
	if !slices.Equal(got, []string{"minionvault_bindings_not_ready"}) {
		t.Errorf("Missing = %q", got)
	}
}

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimLeft(h, "#")
			a := drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), "")
			out[strings.ReplaceAll(a, " ", "-")] = true
		}
	}
	return out
}

// What an on-call engineer reads: every alert says how bad (severity),
// what (summary), why and what to do (description), and where the runbook
// is: a section of docs/troubleshooting.md that exists.
func TestEveryAlertHasSeverityAnnotationsAndARunbook(t *testing.T) {
	pr, err := LoadRules(filepath.Join(root, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	sections := anchors(t, filepath.Join(root, "docs/troubleshooting.md"))
	const prefix = "https://github.com/minionvault/minion-vault-operator/blob/main/docs/troubleshooting.md#"
	alerts := pr.Spec.Alerts()
	if len(alerts) < 10 {
		t.Fatalf("%d alerts", len(alerts))
	}
	seen := map[string]bool{}
	for _, a := range alerts {
		if seen[a.Alert] {
			t.Errorf("%s: two alerts of that name", a.Alert)
		}
		seen[a.Alert] = true
		if s := a.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", a.Alert, s)
		}
		for _, k := range []string{"summary", "description"} {
			if strings.TrimSpace(a.Annotations[k]) == "" {
				t.Errorf("%s: no %s", a.Alert, k)
			}
		}
		anchor, ok := strings.CutPrefix(a.Annotations["runbook_url"], prefix)
		if !ok {
			t.Errorf("%s: runbook_url %q is not a section of docs/troubleshooting.md", a.Alert, a.Annotations["runbook_url"])
		} else if !sections[anchor] {
			t.Errorf("%s: docs/troubleshooting.md has no section #%s", a.Alert, anchor)
		}
		if len(MetricNames(a.Expr)) == 0 {
			t.Errorf("%s: its expression names no metric: %s", a.Alert, a.Expr)
		}
	}
}

func TestDashboardNamesMetrics(t *testing.T) {
	exprs, err := DashboardExprs(filepath.Join(root, DashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) < 10 {
		t.Fatalf("%d expressions in the dashboard", len(exprs))
	}
	for _, e := range exprs {
		if len(MetricNames(e)) == 0 {
			t.Errorf("a dashboard query names no metric: %s", e)
		}
	}
}

// promtool finds bin/promtool, built by `make unit` (and `make alerts`,
// `make tools`) from the pinned module; PROMTOOL names another. Without it
// the test fails and says how to build it: a skipped check of the alerts
// would pass on rules that promtool refuses.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("PROMTOOL=%s: %v", p, err)
		}
		return p
	}
	p, err := filepath.Abs(filepath.Join(root, "bin/promtool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not built: `make alerts` (or `make unit`, `make tools`) builds it from the pinned module, then runs this test", p)
	}
	return p
}

// TestPromtool gives promtool the PrometheusRule's spec as a rule file:
// `promtool check rules` on it whole, and `promtool test rules` with
// rules_test.yaml, one test group per alert, on the spec without the
// descriptions (see rules_test.yaml).
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	pr, err := LoadRules(filepath.Join(root, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	whole, err := pr.Spec.RuleFile()
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "minion-vault-operator.rules.yaml")
	if err := os.WriteFile(rules, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run("check", "rules", "--lint=all", "--lint-fatal", rules)
	t.Logf("promtool check rules:\n%s", out)

	tested := pr.Spec
	tested.Groups = slices.Clone(tested.Groups)
	for i, g := range tested.Groups {
		g.Rules = slices.Clone(g.Rules)
		for j, r := range g.Rules {
			a := map[string]string{}
			for k, v := range r.Annotations {
				if k != "description" {
					a[k] = v
				}
			}
			g.Rules[j].Annotations = a
		}
		tested.Groups[i] = g
	}
	short, err := tested.RuleFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rules, short, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(root, RuleTestsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	out = run("test", "rules", "rules_test.yaml")
	t.Logf("promtool test rules:\n%s", out)

	// Every alert has a test that fires it and one at which it does not.
	fires, quiet := map[string]bool{}, map[string]bool{}
	var cur string
	for _, line := range strings.Split(string(tests), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "alertname: "); ok {
			cur = v
		}
		switch {
		case line == "exp_alerts: []":
			quiet[cur] = true
		case line == "exp_alerts:":
			fires[cur] = true
		}
	}
	for _, a := range pr.Spec.Alerts() {
		if !fires[a.Alert] || !quiet[a.Alert] {
			t.Errorf("%s: rules_test.yaml has a case that fires it: %v, one that does not: %v", a.Alert, fires[a.Alert], quiet[a.Alert])
		}
	}
}
