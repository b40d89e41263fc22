package template

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// vectorCase is one case of testdata/templating.json, produced by running
// the upstream functions (see ../../docs/templating.md).
type vectorCase struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind"`
	Patterns  []string        `json:"patterns"`
	Pattern   *string         `json:"pattern"`
	Metadata  [][2]string     `json:"metadata"`
	Minion    string          `json:"minion"`
	Grains    json.RawMessage `json:"grains"`
	Pillar    json.RawMessage `json:"pillar"`
	JID       *string         `json:"jid"`
	User      *string         `json:"user"`
	Expected  json.RawMessage `json:"expected"`
	Deviation string          `json:"deviation"`
}

func loadVectors(t testing.TB) []vectorCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/templating.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []vectorCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func decodeData(t testing.TB, raw json.RawMessage) value.Value {
	t.Helper()
	if len(raw) == 0 {
		return value.Value{}
	}
	v, err := value.DecodeJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// renderVector renders a case the way upstream's function for its kind did.
func renderVector(t testing.TB, c vectorCase) (any, error) {
	d := &Data{Minion: c.Minion, Grains: decodeData(t, c.Grains), Pillar: decodeData(t, c.Pillar)}
	if c.JID != nil {
		d.JID = *c.JID
	}
	if c.User != nil {
		d.User = *c.User
	}
	var pl Places
	switch c.Kind {
	case "policies":
		for _, p := range c.Patterns {
			pl.Policies = append(pl.Policies, Compile(p))
		}
	case "pillar_paths":
		pl.PillarPaths = []*Pattern{Compile(*c.Pattern)}
	case "metadata":
		for _, kv := range c.Metadata {
			pl.Entity = append(pl.Entity, MetaEntry{Key: kv[0], Pattern: Compile(kv[1])})
		}
	}
	out, err := pl.Render(d)
	if err != nil {
		return nil, err
	}
	switch c.Kind {
	case "policies":
		return out.Policies, nil
	case "pillar_paths":
		return out.PillarPaths, nil
	}
	pairs := [][2]string{}
	for _, kv := range out.Entity {
		pairs = append(pairs, [2]string{kv.Key, kv.Value})
	}
	return pairs, nil
}

func TestVectors(t *testing.T) {
	cases := loadVectors(t)
	if len(cases) < 200 {
		t.Fatalf("only %d vectors loaded", len(cases))
	}
	for _, c := range cases {
		t.Run(c.ID, func(t *testing.T) {
			got, err := renderVector(t, c)
			var wantErr struct {
				Error bool `json:"error"`
			}
			if json.Unmarshal(c.Expected, &wantErr) == nil && wantErr.Error {
				if err == nil {
					t.Fatalf("want an error, got %q", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			var want any
			if c.Kind == "metadata" {
				var pairs [][2]string
				if err := json.Unmarshal(c.Expected, &pairs); err != nil {
					t.Fatal(err)
				}
				if pairs == nil {
					pairs = [][2]string{}
				}
				want = pairs
			} else {
				var list []string
				if err := json.Unmarshal(c.Expected, &list); err != nil {
					t.Fatal(err)
				}
				if list == nil {
					list = []string{}
				}
				want = list
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %q\nwant %q", got, want)
			}
		})
	}
}
