package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func write(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const binding = `apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata: {name: web01, namespace: default}
spec:
  minionID: web01
  templateRef: {name: t}
  grains: {id: web01, os: Debian}
  pillar: {roles: [web, db], env: prod}
`

func TestRenderSamples(t *testing.T) {
	for _, b := range []string{"web01", "db01", "build01"} {
		out, stderr, code := run(t, "render", "--template", "../../config/samples/miniontemplate.yaml",
			"--binding", "../../config/samples/minionbinding-"+b+".yaml", "--strict")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s%s", b, code, stderr, out)
		}
		if !strings.Contains(out, `"violations": []`) {
			t.Errorf("%s: violations in %s", b, out)
		}
	}
}

func TestRenderExitCodesAndFormats(t *testing.T) {
	good := write(t, "t.yaml", `apiVersion: minionvault.dev/v1alpha1
kind: MinionTemplate
metadata: {name: t}
spec:
  connectionRef: {name: v}
  policies: {assign: ['salt_role_{pillar[roles]}', 'env_{grains[os]}']}
`)
	b := write(t, "b.yaml", binding)

	// Violations: exit 0 and listed; --strict makes it 1.
	out, _, code := run(t, "render", "-t", good, "-b", b)
	if code != 0 || !strings.Contains(out, "UntrustedGrain") {
		t.Fatalf("exit %d, output %s", code, out)
	}
	if _, _, code := run(t, "render", "-t", good, "-b", b, "--strict"); code != 1 {
		t.Fatalf("--strict with violations: exit %d, want 1", code)
	}

	// YAML output keeps the documented key order.
	out, _, code = run(t, "render", "-t", good, "-b", b, "-o", "yaml")
	if code != 0 {
		t.Fatalf("yaml: exit %d", code)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := 0; i < len(doc.Content[0].Content); i += 2 {
		keys = append(keys, doc.Content[0].Content[i].Value)
	}
	want := "minion policies metadata pillarPaths mapdata policyDocuments entityName appRole violations warnings"
	if strings.Join(keys, " ") != want {
		t.Errorf("keys %v, want %s", keys, want)
	}

	// A render that fails: exit 2, one line naming the reason.
	bad := write(t, "bad.yaml", strings.Replace(mustRead(t, good), "'env_{grains[os]}'", "'{pillar[roles]'", 1))
	_, stderr, code := run(t, "render", "-t", bad, "-b", b)
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, `"{pillar[roles]"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}

	for name, args := range map[string][]string{
		"missing binding flag": {"render", "-t", good},
		"unknown output":       {"render", "-t", good, "-b", b, "-o", "xml"},
		"missing file":         {"render", "-t", good, "-b", "/nonexistent.yaml"},
		"wrong kind":           {"render", "-t", b, "-b", b},
		"unknown field":        {"render", "-t", write(t, "u.yaml", "kind: MinionTemplate\nspec: {policyz: []}\n"), "-b", b},
	} {
		_, stderr, code := run(t, args...)
		if code == 0 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "minionvault") {
			t.Errorf("%s: exit %d, stderr %q", name, code, stderr)
		}
	}
}

func TestRenderJIDAndUser(t *testing.T) {
	tpl := write(t, "t.yaml", "kind: MinionTemplate\nmetadata: {name: t}\nspec:\n  connectionRef: {name: v}\n")
	b := write(t, "b.yaml", binding)
	out, _, code := run(t, "render", "-t", tpl, "-b", b, "--jid", "20240101", "--user", "salt")
	if code != 0 || !strings.Contains(out, `"saltstack-jid": "20240101"`) || !strings.Contains(out, `"saltstack-user": "salt"`) {
		t.Fatalf("exit %d: %s", code, out)
	}
	out, _, _ = run(t, "render", "-t", tpl, "-b", b)
	if !strings.Contains(out, `"saltstack-jid": "<no jid set>"`) || !strings.Contains(out, `"saltstack-user": "<no user set>"`) {
		t.Fatalf("defaults: %s", out)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
