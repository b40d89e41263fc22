package rendercmd

import (
	"os/exec"
	"strings"
	"testing"
)

// `go test -fuzz` compiles the fuzzed package's test binary, every
// dependency included, with coverage instrumentation, on every cold
// `make fuzz`. The two fuzz targets that reach the API types (FuzzRender
// here, FuzzImportConfig) stay clear of the client and API server
// libraries: with them, that compile was 688 packages and 620 CPU-s
// instead of 94 and 119 (docs/development.md, `internal/rendercmd`).
func TestFuzzedPackagesStaySmall(t *testing.T) {
	heavy := []string{"k8s.io/client-go/", "sigs.k8s.io/controller-runtime", "k8s.io/apiextensions-apiserver/", "k8s.io/apiserver/", "github.com/google/cel-go/", "github.com/hashicorp/vault/"}
	for _, pkg := range []string{".", "../importer"} {
		out, err := exec.Command("go", "list", "-deps", "-test", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for _, d := range deps {
			for _, h := range heavy {
				if strings.HasPrefix(d, h) {
					t.Errorf("%s's test binary depends on %s: fuzzing it would instrument that library too; keep the import out of the package and its tests", pkg, d)
				}
			}
		}
		if len(deps) < 50 {
			t.Errorf("%s: only %d packages listed; is go list answering?", pkg, len(deps))
		}
	}
}
