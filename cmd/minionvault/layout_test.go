package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A newcomer finds every package in docs/development.md's layout, one
// line each: a package added without its line fails here, not in review.
func TestDevelopmentDocListsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/minionvault/minion-vault-operator"
	// The suites build only with the integration tag; list both ways.
	seen := map[string]bool{}
	for _, tags := range []string{"", "integration"} {
		out, err := exec.Command("go", "list", "-tags", tags, module+"/...").CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, p := range strings.Fields(string(out)) {
			seen[strings.TrimPrefix(strings.TrimPrefix(p, module), "/")] = true
		}
	}
	if len(seen) < 40 {
		t.Fatalf("only %d packages listed; is go list answering?", len(seen))
	}
	for p := range seen {
		if !strings.Contains(string(doc), "| `"+p+"`") {
			t.Errorf("package %s has no line in docs/development.md's layout", p)
		}
	}
}
