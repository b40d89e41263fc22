package devenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

// make run builds only the servers, so the explore hints say how to get
// kubectl when the tools folder lacks it, and say nothing of it otherwise.
func TestExploreSaysHowToBuildAMissingKubectl(t *testing.T) {
	v := &localenv.Vault{Addr: "http://127.0.0.1:8200", RootToken: "root"}
	for _, tc := range []struct {
		name        string
		withKubectl bool
		wantHint    bool
	}{
		{"kubectl missing", false, true},
		{"kubectl built", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.withKubectl {
				if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			r := New(Config{Out: &out, ToolsDir: dir})
			r.explore(filepath.Join(dir, "kubeconfig"), v)
			if got := strings.Contains(out.String(), "make kubectl"); got != tc.wantHint {
				t.Fatalf("hint to run make kubectl shown = %v, want %v:\n%s", got, tc.wantHint, out.String())
			}
			if !strings.Contains(out.String(), "get minionbindings -A") {
				t.Fatalf("no kubectl command to explore with:\n%s", out.String())
			}
		})
	}
}
