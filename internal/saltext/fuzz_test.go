package saltext_test

import (
	"math"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/saltext"
	"github.com/minionvault/minion-vault-operator/internal/testing/saltmaster"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// FuzzParseIssueParams feeds arbitrary YAML as issue:approle:params and as
// the minion's issue_params (overrides on): parsing must not panic, and
// whatever parses must match itself (unless it holds a NaN, which Python's
// != never equals either). It is in package saltext_test to render errors
// and encode requests with the Salt master replayer
// (internal/testing/saltmaster).
func FuzzParseIssueParams(f *testing.F) {
	for _, seed := range [][2]string{
		{"token_ttl: 1h\ntoken_bound_cidrs: 10.0.0.1/32", "token_num_uses: 5"},
		{"secret_id_ttl: '\u0663m'\ntoken_max_ttl: ' 1_000 '", "token_ttl: 1e3"},
		{"token_ttl: \"5s\\n\"", "[1, 2]"},
		{"token_period: .nan\ntoken_ttl: .inf", "token_explicit_max_ttl: -1.5d"},
		{"null", "bind_secret_id: false"},
		{"[token_ttl]", "token_ttl"},
		{"token_ttl: 99999999999999999999999", "token_ttl: {a: b}"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, params, overrides string) {
		p, err := value.DecodeYAML([]byte(params))
		if err != nil {
			p = value.NewString(params)
		}
		o, err := value.DecodeYAML([]byte(overrides))
		if err != nil {
			o = value.NewString(overrides)
		}
		cfg, err := saltext.NewConfigValue(saltext.OMap(
			"auth", saltext.OMap("method", "token", "token", "t"),
			"server", saltext.OMap("url", "http://vault.test"),
			"issue", saltext.OMap("type", "approle", "allow_minion_override_params", true, "approle", saltext.OMap("params", p)),
		))
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := cfg.ParseIssueParamsValue(o, "")
		if err != nil {
			if saltmaster.PythonError(err) == "" {
				t.Fatalf("an error without a Python rendering: %v", err)
			}
			return
		}
		if ok, ms := saltext.ParamsMatchValue(parsed, parsed); !ok && !hasNaN(parsed) {
			t.Fatalf("%s does not match itself: %v", parsed.PyRepr(), ms)
		}
		if _, err := saltmaster.PyJSON(parsed, true, true); err != nil {
			t.Fatalf("encoding %s: %v", parsed.PyRepr(), err)
		}
		for _, pr := range parsed.Pairs() {
			name := pr.Key.Str()
			if (name == "token_period" || len(name) > 4 && name[len(name)-4:] == "_ttl") && pr.Val.Kind() != value.Int {
				t.Fatalf("%s = %s: TTLs must be int seconds", name, pr.Val.PyRepr())
			}
		}
	})
}

func hasNaN(v value.Value) bool {
	switch v.Kind() {
	case value.Float:
		return math.IsNaN(v.Float())
	case value.List:
		for _, it := range v.Items() {
			if hasNaN(it) {
				return true
			}
		}
	case value.Map:
		for _, p := range v.Pairs() {
			if hasNaN(p.Val) {
				return true
			}
		}
	}
	return false
}
