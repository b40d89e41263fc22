// Package alerting reads the operator's alerting rules
// (config/prometheus/rules.yaml, a Prometheus Operator PrometheusRule) and
// its Grafana dashboard (config/grafana/minion-vault-operator.json), and
// names the metrics their PromQL expressions read. Tests use it to give
// promtool the rule groups of the PrometheusRule's spec (the one source of
// both), and to check that every metric named exists on the operator's
// /metrics. It is test support: no product code imports it.
package alerting

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// The files, relative to the repository's root.
const (
	RulesFile     = "config/prometheus/rules.yaml"
	RuleTestsFile = "config/prometheus/rules_test.yaml"
	DashboardFile = "config/grafana/minion-vault-operator.json"
)

// PrometheusRule is the part of monitoring.coreos.com/v1 PrometheusRule
// that rules.yaml uses; reading it strictly makes a misspelt field an
// error instead of a rule Prometheus never sees.
type PrometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace,omitempty"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec RuleSpec `json:"spec"`
}

// RuleSpec is a PrometheusRule's spec: exactly a Prometheus rule file.
type RuleSpec struct {
	Groups []RuleGroup `json:"groups"`
}

type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`
}

type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LoadRules reads a PrometheusRule.
func LoadRules(path string) (*PrometheusRule, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the rules: %w", err)
	}
	pr := &PrometheusRule{}
	if err := yaml.UnmarshalStrict(raw, pr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s: a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", path, pr.APIVersion, pr.Kind)
	}
	return pr, nil
}

// RuleFile is the spec as the rule file Prometheus and promtool read.
func (s RuleSpec) RuleFile() ([]byte, error) {
	out, err := yaml.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("writing the rule file: %w", err)
	}
	return out, nil
}

// Alerts are the alerting rules of all groups.
func (s RuleSpec) Alerts() []Rule {
	var out []Rule
	for _, g := range s.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// DashboardExprs returns the PromQL of a Grafana dashboard: every panel
// target's expr (rows' panels too) and every query variable's query.
func DashboardExprs(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the dashboard: %w", err)
	}
	var d any
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "expr" && strings.TrimSpace(s) != "" {
					out = append(out, s)
					continue
				}
				walk(e, k)
			}
		case []any:
			for _, e := range v {
				walk(e, key)
			}
		}
	}
	if m, ok := d.(map[string]any); ok {
		walk(m["panels"], "panels")
		if t, ok := m["templating"].(map[string]any); ok {
			list, _ := t["list"].([]any)
			for _, v := range list {
				vv, _ := v.(map[string]any)
				if vv["type"] != "query" {
					continue
				}
				switch q := vv["query"].(type) {
				case string:
					out = append(out, q)
				case map[string]any:
					if s, ok := q["query"].(string); ok {
						out = append(out, s)
					}
				}
			}
		}
	}
	return out, nil
}

var (
	// Grafana's variables: $var, ${var}, ${var:fmt}, [[var]].
	grafanaVar = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[^\]]*\]\]`)
	// Grafana's label_values(selector, label) and label_values(label).
	labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*(?:,\s*([A-Za-z_][A-Za-z0-9_]*)\s*)?\)\s*$`)
	// String literals hold label values, never metric names.
	stringLit = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	// Label matchers, ranges and subqueries, offsets' durations.
	matchers = regexp.MustCompile(`\{[^{}]*\}`)
	ranges   = regexp.MustCompile(`\[[^\[\]]*\]`)
	// Label lists of aggregations and vector matching.
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	// Numbers and durations (5m, 0.25, 1e3, 0x1f, Inf and NaN are below).
	number = regexp.MustCompile(`(^|[^A-Za-z0-9_:])[0-9.][0-9A-Za-z_.]*`)
	// An identifier, and whether a "(" follows it: a function or an
	// aggregation rather than a metric.
	ident = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	// PromQL's keywords: operators, modifiers, literals.
	keywords = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "atan2": true,
		"inf": true, "nan": true, "start": true, "end": true, "step": true,
	}
)

// MetricNames returns the metric names a PromQL expression (or a Grafana
// label_values() query) reads, sorted, without repeats. It is a tokenizer,
// not a parser: it removes what cannot be a metric name (Grafana
// variables, strings, label matchers, ranges, grouping labels, numbers)
// and keeps the identifiers that are neither keywords nor called as
// functions. A name given only as __name__="..." inside braces is not
// seen; the rules and dashboard do not use that form.
func MetricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		if m[2] == "" {
			return nil // label_values(label) names a label, not a metric
		}
		expr = m[1]
	}
	s := grafanaVar.ReplaceAllString(expr, " ")
	s = stringLit.ReplaceAllString(s, " ")
	s = matchers.ReplaceAllString(s, " ")
	s = ranges.ReplaceAllString(s, " ")
	s = grouping.ReplaceAllString(s, " ")
	s = number.ReplaceAllString(s, "${1} ") // the character before it stays
	var names []string
	for _, m := range ident.FindAllStringSubmatch(s, -1) {
		name := strings.TrimRight(m[0], " \t\n(")
		if m[1] != "" || keywords[strings.ToLower(name)] {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ExposedNames returns the metric names of a Prometheus text exposition
// (what /metrics serves): the family names of its TYPE lines and the names
// of its samples (a histogram's _bucket, _sum and _count among them).
func ExposedNames(exposition string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(exposition, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				out[f[0]] = true
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

// Missing returns the names of names that exposed lacks, sorted.
func Missing(names []string, exposed map[string]bool) []string {
	var out []string
	for _, n := range names {
		if !exposed[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NamedMetrics returns every metric the rules and the dashboard read,
// each with where it is named (an alert, or "dashboard").
func NamedMetrics(spec RuleSpec, dashboardExprs []string) map[string][]string {
	out := map[string][]string{}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			who := r.Alert
			if who == "" {
				who = r.Record
			}
			for _, n := range MetricNames(r.Expr) {
				out[n] = append(out[n], who)
			}
		}
	}
	for _, e := range dashboardExprs {
		for _, n := range MetricNames(e) {
			if l := out[n]; len(l) == 0 || l[len(l)-1] != "dashboard" {
				out[n] = append(out[n], "dashboard")
			}
		}
	}
	return out
}
