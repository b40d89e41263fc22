//go:build integration

package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

// helmTemplate renders the Helm chart (charts/minion-vault-operator) with
// bin/helm and these --set values.
func helmTemplate(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	k, err := kubectl()
	if err != nil {
		t.Fatal(err)
	}
	helm := filepath.Join(filepath.Dir(k), "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("%v: run `make integration-tools` (or make bin/helm)", err)
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "minion-vault", filepath.Join(root, "charts", "minion-vault-operator")}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(&stdout, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding helm template: %v", err)
		}
		if len(u.Object) != 0 {
			objs = append(objs, u)
		}
	}
}

// TestChartDryRunApply applies what the Helm chart renders with values
// other than the defaults (test/chart compares the defaults with
// dist/install.yaml) with server-side dry-run, as TestDryRunApply does the
// render: the VaultConnections and Secret from values pass the CRD's
// validation, the changed Deployment still meets the restricted Pod
// Security Standard, and the API server has no warning for any of it.
func TestChartDryRunApply(t *testing.T) {
	common := []string{
		"image.repository=registry.example.com/minion-vault-operator",
		"image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"image.pullPolicy=IfNotPresent", "replicaCount=2", "resources.limits.memory=1Gi",
		"leaderElection.leaseDuration=30s", "leaderElection.renewDeadline=20s", "leaderElection.retryPeriod=2s",
		"extraArgs={--concurrency=8}", "podAnnotations.example\\.com/a=b", "podLabels.team=salt",
		"tolerations[0].key=dedicated", "tolerations[0].operator=Exists", "tolerations[0].effect=NoSchedule",
		"priorityClassName=system-cluster-critical", "crds.keep=true",
		"vaultConnection.create=true", "vaultConnection.address=https://vault.example.com:8200",
	}
	variants := map[string][]string{
		"token auth": {"vaultConnection.name=vault-token-auth", "vaultConnection.auth.token.value=hvs.example",
			"vaultConnection.timeout=10s", "vaultConnection.vaultNamespace=admin/salt"},
		"kubernetes auth": {"vaultConnection.name=vault-k8s-auth", "vaultConnection.auth.method=kubernetes",
			"vaultConnection.auth.kubernetes.role=minionvault-operator", "vaultConnection.auth.kubernetes.mount=k8s-prod",
			"vaultConnection.auth.kubernetes.audiences={vault}", "vaultConnection.tls.caSecretName=vault-ca",
			"vaultConnection.tls.serverName=vault.internal"},
		"appRole auth": {"vaultConnection.name=vault-approle-auth", "vaultConnection.auth.method=appRole",
			"vaultConnection.auth.appRole.roleID=0b4c5e9e-7f3a-4c1e-9d2b-5a6f7e8d9c0b", "vaultConnection.auth.appRole.mount=salt/approle",
			"vaultConnection.auth.appRole.secretID.value=example-secret-id"},
	}
	for name, set := range variants {
		t.Run(name, func(t *testing.T) {
			objs := helmTemplate(t, append(append([]string{}, common...), set...)...)
			c, w := warningClient(t)
			ensureNamespace(t, c, objs)
			w.take()
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
				what := fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
				if err := dryRunApply(testContext(t), c, o); err != nil {
					t.Errorf("%s: %v", what, err)
					continue
				}
				for _, warning := range w.take() {
					t.Errorf("%s: the API server warns: %s", what, warning)
				}
			}
			if kinds["VaultConnection"] != 1 || kinds["Deployment"] != 1 {
				t.Errorf("the chart rendered %v", kinds)
			}
			t.Logf("%d objects applied with server-side dry-run: %v", len(objs), kinds)
		})
	}
}

// TestChartDryRunRefuses shows that the dry-run above validates what the
// chart renders: a VaultConnection address that the CRD refuses (not http
// or https) fails it.
func TestChartDryRunRefuses(t *testing.T) {
	objs := helmTemplate(t, "vaultConnection.create=true", "vaultConnection.address=ftp://vault.example.com",
		"vaultConnection.auth.token.existingSecret=vault-token")
	c, _ := warningClient(t)
	vc := find(objs, "VaultConnection", "vault")
	if vc == nil {
		t.Fatal("the chart rendered no VaultConnection vault")
	}
	err := dryRunApply(testContext(t), c, vc)
	if err == nil || !strings.Contains(err.Error(), "address must be an absolute http or https URL") {
		t.Fatalf("dry-run of a VaultConnection with an ftp address: %v, want the CRD's refusal", err)
	}
	t.Logf("refused as it should be: %v", err)
}
