package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const roundtripDir = "../importer/testdata/roundtrip"

func runMain(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return o.String(), e.String(), code
}

// splitBindings writes every MinionBinding of an import stream to its own
// file (render takes one binding), keyed by minion ID.
func splitBindings(t *testing.T, stream []byte, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	for i := 0; ; i++ {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			break
		}
		var head struct {
			Kind string
			Spec struct {
				MinionID string `yaml:"minionID"`
			}
		}
		if err := n.Decode(&head); err != nil {
			t.Fatal(err)
		}
		if head.Kind != "MinionBinding" {
			continue
		}
		text, err := yaml.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "binding-"+string(rune('a'+i))+".yaml")
		if err := os.WriteFile(p, text, 0o600); err != nil {
			t.Fatal(err)
		}
		files[head.Spec.MinionID] = p
	}
	return files
}

// TestImportThenRender is the round trip through the commands: import the
// Salt master's configuration and minion data, render every binding with
// `minionvault render`, and compare with what the Salt master computes
// (testdata/roundtrip/expected.json, from the Python reference).
func TestImportThenRender(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.yaml")
	stdout, stderr, code := runMain("import", "--config", filepath.Join(roundtripDir, "master.yaml"),
		"--grains", filepath.Join(roundtripDir, "grains.json"), "--pillar", filepath.Join(roundtripDir, "pillar.json"), "-o", out)
	if code != 0 || stdout != "" {
		t.Fatalf("import: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if !strings.HasPrefix(line, "minionvault import: warning: ") {
			t.Errorf("stderr line %q", line)
		}
	}
	if strings.Contains(stderr, "would refuse") || strings.Contains(stderr, "cannot render") {
		t.Errorf("problems reported: %s", stderr)
	}
	stream, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SECRET-ID-OF-THE-MASTER", "ROLE-ID-OF-THE-MASTER", "PILLAR-SECRET", "db_password", "num_cpus"} {
		if bytes.Contains(stream, []byte(s)) {
			t.Errorf("%q in the output", s)
		}
	}

	var want struct {
		Minions map[string]struct {
			Policies    []string    `json:"policies"`
			Entity      [][2]string `json:"entity"`
			Secret      [][2]string `json:"secret"`
			PillarPaths []string    `json:"pillarPaths"`
		} `json:"minions"`
	}
	data, err := os.ReadFile(filepath.Join(roundtripDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	bindings := splitBindings(t, stream, dir)
	if len(bindings) != len(want.Minions) {
		t.Fatalf("%d bindings, want %d", len(bindings), len(want.Minions))
	}
	for id, w := range want.Minions {
		stdout, stderr, code := runMain("render", "--template", out, "--binding", bindings[id], "--strict")
		if code != 0 {
			t.Errorf("%s: render exit %d: %s", id, code, stderr)
			continue
		}
		// render prints metadata as JSON objects in order: read the pairs.
		var got struct {
			Minion      string
			Policies    []string
			Metadata    struct{ Entity, Secret json.RawMessage }
			PillarPaths []string
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		if got.Minion != id {
			t.Errorf("rendered minion %q, want %q", got.Minion, id)
		}
		for _, c := range []struct {
			what      string
			got, want any
		}{
			{"policies", got.Policies, w.Policies},
			{"entity", orderedPairs(t, got.Metadata.Entity), w.Entity},
			{"secret", orderedPairs(t, got.Metadata.Secret), w.Secret},
			{"pillar paths", got.PillarPaths, w.PillarPaths},
		} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s %s:\n got %q\nwant %q", id, c.what, c.got, c.want)
			}
		}
	}
}

func orderedPairs(t *testing.T, raw json.RawMessage) [][2]string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for dec.More() {
		k, _ := dec.Token()
		v, _ := dec.Token()
		out = append(out, [2]string{k.(string), v.(string)})
	}
	return out
}

func TestImportCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vault.yaml")
	if err := os.WriteFile(cfg, []byte("server: {url: 'https://v:8200'}\nauth: {method: token, token: TOKEN-SECRET}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Stdout by default; warnings on stderr; the token stays behind.
	stdout, stderr, code := runMain("import", "-c", cfg, "--template-name", "t", "--connection", "c")
	if code != 0 || !strings.Contains(stdout, "kind: MinionTemplate") || !strings.Contains(stdout, "name: c") {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "vault:auth:token: not copied") || strings.Contains(stdout+stderr, "TOKEN-SECRET") {
		t.Errorf("stderr %s", stderr)
	}

	for name, args := range map[string][]string{
		"no config":       {"import"},
		"missing file":    {"import", "-c", filepath.Join(dir, "nope.yaml")},
		"missing grains":  {"import", "-c", cfg, "--grains", filepath.Join(dir, "nope.json")},
		"bad grains":      {"import", "-c", cfg, "--grains", cfg},
		"bad name":        {"import", "-c", cfg, "--template-name", "Bad_Name"},
		"no vault config": {"import", "-c", writeFile(t, dir, "empty.yaml", "interface: 0.0.0.0\n")},
		"unwritable":      {"import", "-c", cfg, "-o", filepath.Join(cfg, "under-a-file", "out.yaml")},
	} {
		stdout, stderr, code := runMain(args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "minionvault import: ") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, stdout, stderr)
		}
	}
}

// An output in a folder that does not exist yet: the folder is made, and
// the master's files land beside the manifests.
func TestImportMakesTheOutputFolder(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "vault.yaml", "server: {url: 'https://v:8200'}\nauth: {method: token, token: TOKEN-SECRET}\n")
	out := filepath.Join(dir, "out", "nested", "manifests.yaml")
	if stdout, stderr, code := runMain("import", "-c", cfg, "--template-name", "t", "--connection", "c", "-o", out); code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	text, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(text), "kind: MinionTemplate") {
		t.Fatalf("%s: %v\n%s", out, err, text)
	}
	entries, err := os.ReadDir(filepath.Dir(out))
	if err != nil || len(entries) < 2 {
		t.Errorf("%s holds %v (%v): want the manifests and the master's files", filepath.Dir(out), entries, err)
	}
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
