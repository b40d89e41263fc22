package importer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/template"
)

// expected is testdata/roundtrip/expected.json: what saltext-vault renders
// for each minion, computed by expected.py with the project's Python
// reference of the upstream algorithm (hack/bench/saltext_reference.py).
type expected struct {
	Minions map[string]struct {
		Policies    []string    `json:"policies"`
		Entity      [][2]string `json:"entity"`
		Secret      [][2]string `json:"secret"`
		PillarPaths []string    `json:"pillarPaths"`
	} `json:"minions"`
}

func readFile(t testing.TB, path string) File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return File{Name: path, Data: data}
}

func roundTripInput(t testing.TB) Input {
	dir := filepath.Join("testdata", "roundtrip")
	grains, pillar := readFile(t, filepath.Join(dir, "grains.json")), readFile(t, filepath.Join(dir, "pillar.json"))
	return Input{Config: []File{readFile(t, filepath.Join(dir, "master.yaml"))}, Grains: &grains, Pillar: &pillar}
}

func kvPairs(kvs []template.KV) [][2]string {
	out := make([][2]string, len(kvs))
	for i, kv := range kvs {
		out[i] = [2]string{kv.Key, kv.Value}
	}
	return out
}

// TestRoundTrip imports a Salt master's configuration and minion data,
// renders the manifests the way `minionvault render` does, and compares
// policies, entity and secret metadata and pillar paths with what the Salt
// master computes. The default grain and pillar selection must not change
// the result, nor must keeping everything.
func TestRoundTrip(t *testing.T) {
	var want expected
	if err := json.Unmarshal(readFile(t, filepath.Join("testdata", "roundtrip", "expected.json")).Data, &want); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {AllGrains: true, AllPillar: true}} {
		out, err := Import(roundTripInput(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := out.WriteYAML(&buf); err != nil {
			t.Fatal(err)
		}
		rendered, err := Check(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if len(rendered) != len(want.Minions) {
			t.Fatalf("%+v: %d bindings rendered, want %d", opts, len(rendered), len(want.Minions))
		}
		for _, r := range rendered {
			w, ok := want.Minions[r.MinionID]
			if !ok {
				t.Errorf("unexpected minion %q", r.MinionID)
				continue
			}
			if r.Err != nil {
				t.Errorf("%s: %v", r.MinionID, r.Err)
				continue
			}
			if len(r.Violations) > 0 {
				t.Errorf("%s: violations %v", r.MinionID, r.Violations)
			}
			res := r.Result
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"policies", res.Policies, w.Policies},
				{"entity metadata", kvPairs(res.EntityMetadata), w.Entity},
				{"secret metadata", kvPairs(res.SecretMetadata), w.Secret},
				{"pillar paths", res.PillarPaths, w.PillarPaths},
			} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%+v: %s %s:\n got %q\nwant %q", opts, r.MinionID, c.what, c.got, c.want)
				}
			}
		}
	}
}
