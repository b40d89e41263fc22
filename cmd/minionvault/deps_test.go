package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/minionvault/minion-vault-operator"

// testSupport says why pkg, a dependency of the binary, is test support
// ("" if it is not): the project's own (internal/testing/..., the
// ...test packages beside product packages such as pkg/vault/vaulttest,
// the controllers' testkit) and the standard library's (testing and its
// subpackages, net/http/httptest). Other modules' packages that merely have
// "testing" in their path are not matched: controller-runtime's
// pkg/internal/testing/... come with envtest, which `minionvault dev`
// uses on purpose, and do not import the testing package (the
// standard library rule would name it if they did).
func testSupport(pkg string) string {
	switch {
	case pkg == "testing" || strings.HasPrefix(pkg, "testing/"):
		return "the standard library's testing"
	case pkg == "net/http/httptest":
		return "the standard library's test server"
	case strings.HasPrefix(pkg, module+"/internal/testing/"):
		return "the project's test support (internal/testing)"
	case pkg == module+"/controllers/internal/testkit" || strings.HasPrefix(pkg, module+"/controllers/internal/testkit/"):
		return "the controllers' test kit"
	case strings.HasPrefix(pkg, module+"/") && strings.HasSuffix(pkg, "test"):
		// vaulttest and any later ...test package beside a product one
		// (the net/http/httptest model).
		return "a test double package"
	}
	return ""
}

// TestBinaryLinksNoTestSupport lists every package the minionvault binary
// links, as `go build ./cmd/minionvault` builds it here and as the image
// is built (CGO_ENABLED=0 GOOS=linux, see the Makefile's image target and
// the Dockerfile), and fails naming any test support among them: test
// doubles and harnesses must stay in test builds.
func TestBinaryLinksNoTestSupport(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the binary's dependencies: %v", err)
	}
	for _, build := range []struct {
		name string
		env  []string
	}{
		{"host", nil},
		{"image", []string{"CGO_ENABLED=0", "GOOS=linux"}},
	} {
		t.Run(build.name, func(t *testing.T) {
			cmd := exec.Command(gocmd, "list", "-deps", "-f", "{{.ImportPath}}", module+"/cmd/minionvault")
			cmd.Env = append(os.Environ(), build.env...)
			out, err := cmd.Output()
			if err != nil {
				stderr := ""
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				t.Fatalf("go list: %v\n%s", err, stderr)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 100 || deps[len(deps)-1] != module+"/cmd/minionvault" {
				t.Fatalf("go list gave %d packages, not ending in cmd/minionvault: %.500s", len(deps), out)
			}
			for _, pkg := range deps {
				if why := testSupport(pkg); why != "" {
					t.Errorf("the minionvault binary links %s, %s", pkg, why)
				}
			}
		})
	}
}

// The rule above must recognise what it is for, and only that.
func TestTestSupportRule(t *testing.T) {
	for pkg, want := range map[string]bool{
		"testing":                                true,
		"testing/fstest":                         true,
		"net/http/httptest":                      true,
		module + "/internal/testing/saltmaster":  true,
		module + "/internal/testing/testenv":     true,
		module + "/pkg/vault/vaulttest":          true,
		module + "/controllers/internal/testkit": true,
		module + "/internal/saltext":             false,
		module + "/internal/localenv":            false,
		module + "/pkg/vault":                    false,
		module + "/internal/mastercheck":         false,
		"net/http":                               false,
		"sigs.k8s.io/controller-runtime/pkg/internal/testing/process": false,
		"github.com/stretchr/testify/assert":                          false,
	} {
		if got := testSupport(pkg) != ""; got != want {
			t.Errorf("%s: test support %v, want %v", pkg, got, want)
		}
	}
}
