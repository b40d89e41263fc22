//go:build integration

package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPanicsIn: a panic controller-runtime recovered, as the operator logs
// it, is found with the operator's frame nearest to it, and counted.
func TestPanicsIn(t *testing.T) {
	line := `{"level":"error","msg":"Observed a panic","controller":"vaultconnection","panic":"runtime error: invalid memory address or nil pointer dereference",` +
		`"stacktrace":"goroutine 395 [running]:\nk8s.io/apimachinery/pkg/util/runtime.logPanic(...)\n\tk8s.io/apimachinery@v0.37.2/pkg/util/runtime/runtime.go:134 +0xbc\n` +
		`github.com/minionvault/minion-vault-operator/pkg/vault.(*session).expiredAt(0x43c765?)\n\tgithub.com/minionvault/minion-vault-operator/pkg/vault/auth.go:52 +0x22\n"}`
	path := filepath.Join(t.TempDir(), "operator.log")
	data := "{\"msg\":\"before\"}\n" + line + "\n" + line + "\n{\"msg\":\"Writing to Vault\"}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	got := panicsIn(path, 0)
	want := "vaultconnection: runtime error: invalid memory address or nil pointer dereference in github.com/minionvault/minion-vault-operator/pkg/vault.(*session).expiredAt(0x43c765?) (2 times)"
	if len(got) != 1 || got[0] != want {
		t.Errorf("panicsIn = %q, want [%q]", got, want)
	}
	if got := panicsIn(path, int64(len(data))); len(got) != 0 {
		t.Errorf("from the end: %q", got)
	}
}
