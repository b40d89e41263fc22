package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportBinary runs `minionvault import` as users do: the Salt master's
// configuration and the minions' cached grains and pillar in, one YAML
// stream out (stdout or -o), warnings on stderr; the result renders.
func TestImportBinary(t *testing.T) {
	const dir = "../../internal/importer/testdata/roundtrip"
	args := []string{"import", "--config", filepath.Join(dir, "master.yaml"),
		"--grains", filepath.Join(dir, "grains.json"), "--pillar", filepath.Join(dir, "pillar.json")}
	stdout, stderr, code := run(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stdout, "kind: MinionBinding"); n != 4 || !strings.HasPrefix(stdout, "# ") || strings.Count(stdout, "\n---\n") != 5 {
		t.Errorf("%d bindings in:\n%s", n, stdout)
	}
	if !strings.Contains(stderr, "minionvault import: warning: vault:auth:secret_id: not copied") || strings.Contains(stdout+stderr, "SECRET-ID-OF-THE-MASTER") {
		t.Errorf("stderr:\n%s", stderr)
	}

	// -o writes the same bytes.
	out := filepath.Join(t.TempDir(), "out.yaml")
	if _, stderr, code := run(t, append(args, "-o", out)...); code != 0 {
		t.Fatalf("-o: exit %d: %s", code, stderr)
	}
	if got := mustRead(t, out); got != stdout {
		t.Errorf("-o output differs from stdout")
	}

	// The template and a binding from the stream render strictly.
	docs := strings.Split(stdout, "\n---\n")
	binding := write(t, "web01.yaml", docs[len(docs)-1])
	rendered, stderr, code := run(t, "render", "--template", out, "--binding", binding, "--strict")
	if code != 0 || !strings.Contains(rendered, `"roles": "db,web"`) || !strings.Contains(rendered, `"salt_role_db"`) {
		t.Fatalf("render: exit %d: %s%s", code, stderr, rendered)
	}

	if _, stderr, code := run(t, "import", "--config", "/nonexistent.yaml"); code != 2 || strings.Count(stderr, "\n") != 1 {
		t.Errorf("missing config: exit %d, stderr %q", code, stderr)
	}
	_ = os.Remove(out)
}
