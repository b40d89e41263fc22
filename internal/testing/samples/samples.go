// Package samples is test support: config/samples copied to a folder a
// test may edit, and fleets of bindings of the sample template
// generated at any size. The CLI's tests, internal/audit's and
// internal/manifest's share them.
package samples

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Dir is config/samples of the module the test runs in: found from the
// test's working directory (its package's folder), not from this file's
// compiled path, which -trimpath makes a module path.
func Dir() string {
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join("config", "samples")
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "config", "samples")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "config", "samples")
		}
	}
}

// Copy copies the YAML files of config/samples to a new folder, for a test
// to edit.
func Copy(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	entries, err := os.ReadDir(Dir())
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(Dir(), e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		WriteFile(tb, filepath.Join(dir, e.Name()), string(data))
	}
	return dir
}

// WriteFile writes text to file.
func WriteFile(tb testing.TB, file, text string) {
	tb.Helper()
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// ReplaceIn replaces the first old in file with new; the file must hold
// old.
func ReplaceIn(tb testing.TB, file, old, new string) {
	tb.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		tb.Fatalf("%s has no %q", file, old)
	}
	WriteFile(tb, file, strings.Replace(string(data), old, new, 1))
}

// WriteFleet writes n MinionBindings of the sample template (one YAML
// file) and the template to dir; with head, the role policy's first rule
// gains "update" (a template change that touches every minion).
func WriteFleet(tb testing.TB, dir string, n int, head bool) {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(Dir(), "miniontemplate.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	t := string(data)
	if head {
		t = strings.Replace(t, "          capabilities: [read, list]\n", "          capabilities: [read, list, update]\n", 1)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	WriteFile(tb, filepath.Join(dir, "miniontemplate.yaml"), t)
	roles := []string{"web", "db", "ci", "mail", "cache"}
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata:
  name: m%05[1]d
  namespace: default
spec:
  minionID: m%05[1]d
  templateRef:
    name: salt-minions
  grains:
    id: m%05[1]d
    os: Debian
    os_family: Debian
  pillar:
    roles: [%[2]s, %[3]s]
    env: prod
`, i, roles[i%5], roles[(i/5)%5])
	}
	WriteFile(tb, filepath.Join(dir, "bindings.yaml"), sb.String())
}
