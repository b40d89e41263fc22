package audit

import (
	"os/exec"
	"strings"
	"testing"
)

// The engine reads manifests and Vault (its HTTP API), nothing else: it
// links neither the operator's controllers nor the Kubernetes client and
// server libraries, which the commands of internal/cli link for the
// operator (about 900 packages, against about 310 here). What the gate
// decides comes from internal/admission, not from the controllers.
func TestEngineStaysApartFromTheOperator(t *testing.T) {
	heavy := []string{
		"github.com/minionvault/minion-vault-operator/controllers",
		"github.com/minionvault/minion-vault-operator/internal/cli",
		"k8s.io/client-go/", "sigs.k8s.io/controller-runtime", "k8s.io/apiextensions-apiserver/", "k8s.io/apiserver/", "github.com/google/cel-go/",
	}
	out, err := exec.Command("go", "list", "-deps", "-test", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, h := range heavy {
			if strings.HasPrefix(d, h) {
				t.Errorf("internal/audit's test binary depends on %s: keep the import out of the engine and its tests", d)
			}
		}
	}
	if len(deps) < 50 {
		t.Errorf("only %d packages listed; is go list answering?", len(deps))
	}
}
