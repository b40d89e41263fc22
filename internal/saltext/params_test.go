package saltext

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// The vectors are saltext's own _parse_issue_params and
// _approle_params_match run on edge inputs by
// hack/saltext/issue_trace.py.

type paramVector struct {
	Name         string          `json:"name"`
	MasterConfig json.RawMessage `json:"master_config"`
	Overrides    json.RawMessage `json:"overrides"`
	Role         json.RawMessage `json:"role"`
	Parsed       json.RawMessage `json:"parsed"`
	Raised       *string         `json:"raised"`
	Match        *bool           `json:"match"`
	Mismatches   []string        `json:"mismatches"`
}

// tracePath is the trace of saltext itself that the Salt master replayer
// (internal/testing/saltmaster) replays; its param_vectors are this
// package's.
const tracePath = "../testing/saltmaster/testdata/saltext-issue-trace.json"

func loadVectors(t *testing.T) []paramVector {
	t.Helper()
	var doc struct {
		ParamVectors []paramVector `json:"param_vectors"`
	}
	data, err := os.ReadFile(tracePath)
	if err != nil {
		t.Fatalf("reading the trace: %v", err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.ParamVectors) == 0 {
		t.Fatal("the trace has no vectors: regenerate it")
	}
	return doc.ParamVectors
}

func decodeValue(t *testing.T, raw json.RawMessage) value.Value {
	t.Helper()
	if len(raw) == 0 {
		return value.Value{}
	}
	v, err := value.DecodeJSON(raw)
	if err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

// pythonError is the Salt master replayer's PythonError
// (internal/testing/saltmaster) for the errors this package raises: its
// own SaltError, else Python's Exception.
func pythonError(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if t, ok := e.(*SaltError); ok {
			return t.Class + ": " + t.Msg
		}
	}
	if err == nil {
		return ""
	}
	return "Exception: " + err.Error()
}

// strictEqual is equality that also tells 60 from 60.0 and True from 1,
// and mapping order: what the port sends must print as saltext's does.
func strictEqual(a, b value.Value) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case value.List:
		if len(a.Items()) != len(b.Items()) {
			return false
		}
		for i := range a.Items() {
			if !strictEqual(a.Items()[i], b.Items()[i]) {
				return false
			}
		}
		return true
	case value.Map:
		if len(a.Pairs()) != len(b.Pairs()) {
			return false
		}
		for i, p := range a.Pairs() {
			q := b.Pairs()[i]
			if !strictEqual(p.Key, q.Key) || !strictEqual(p.Val, q.Val) {
				return false
			}
		}
		return true
	case value.Float:
		return a.Float() == b.Float() || math.IsNaN(a.Float()) && math.IsNaN(b.Float())
	}
	return value.Equal(a, b)
}

func TestParseIssueParamsAndParamsMatch(t *testing.T) {
	vectors := loadVectors(t)
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			cfg, err := NewConfigValue(decodeValue(t, v.MasterConfig))
			if err != nil {
				t.Fatalf("config: %v", err)
			}
			overrides := decodeValue(t, v.Overrides)
			parsed, err := cfg.parseIssueParams(overrides, "")
			if v.Raised != nil {
				if got := pythonError(err); got != *v.Raised {
					t.Fatalf("raised %q (parsed %s), saltext raised %q", got, parsed.PyRepr(), *v.Raised)
				}
				return
			}
			if err != nil {
				t.Fatalf("raised %q, saltext parsed %s", pythonError(err), v.Parsed)
			}
			if want := decodeValue(t, v.Parsed); !strictEqual(parsed, want) {
				t.Fatalf("parsed %s, saltext %s", parsed.PyRepr(), want.PyRepr())
			}
			// The exported form, from Go maps.
			if overrides.IsMap() || overrides.IsNull() {
				got, err := ParseIssueParams(cfg, toMap(overrides))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, toMap(parsed)) {
					t.Fatalf("ParseIssueParams = %v, want %v", got, toMap(parsed))
				}
			}
			if v.Match == nil {
				return
			}
			ok, mismatches := ParamsMatch(toMap(decodeValue(t, v.Role)), toMap(parsed))
			if ok != *v.Match {
				t.Errorf("ParamsMatch = %v (%v), saltext %v", ok, mismatches, *v.Match)
			}
			var names []string
			for _, m := range mismatches {
				names = append(names, m.Param)
				if m.String() == "" {
					t.Errorf("mismatch %s renders empty", m.Param)
				}
			}
			if len(names) != len(v.Mismatches) || len(names) > 0 && !reflect.DeepEqual(names, v.Mismatches) {
				t.Errorf("mismatches %v, saltext finds %v", names, v.Mismatches)
			}
		})
	}
}

func TestMismatchString(t *testing.T) {
	_, ms := ParamsMatch(
		map[string]any{"token_bound_cidrs": []any{"10.0.0.1"}},
		map[string]any{"token_bound_cidrs": []any{"10.0.0.1/32"}, "token_ttl": int64(3600)},
	)
	got := []string{ms[0].String(), ms[1].String()}
	want := []string{"token_ttl 3600 != <unset>", "token_bound_cidrs ['10.0.0.1/32'] != ['10.0.0.1']"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
