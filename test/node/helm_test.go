//go:build integration

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

// What TestHelmChart installs beside the chart's defaults.
const (
	helmRelease    = "minion-vault"
	helmConnection = "vault-helm"
	helmTemplate   = "helm"
	helmTenant     = "tenant-helm"
)

// helm runs the tools folder's helm against the node's API server, with
// its own cache and configuration folders.
type helm struct {
	bin, kubeconfig string
	env             []string
}

func newHelm(t *testing.T, k *kubectl) *helm {
	t.Helper()
	home := t.TempDir()
	return &helm{
		bin:        filepath.Join(filepath.Dir(k.bin), "helm"),
		kubeconfig: k.kubeconfig,
		env: append(os.Environ(),
			"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
			"HELM_DATA_HOME="+filepath.Join(home, "data")),
	}
}

func (h *helm) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, h.bin, append(args, "--kubeconfig", h.kubeconfig)...)
	cmd.Env = h.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// TestHelmChart installs the operator with the Helm chart
// (charts/minion-vault-operator) on the node, as a platform team would:
// helm install with the image of `make image`, a VaultConnection with
// kubernetes auth from the chart's values; then helm upgrade with a changed
// value. After each the operator is Ready and leading, and a binding
// converges in Vault. It removes its release at the end (TestInstall
// installs dist/install.yaml on the same node after it).
func TestHelmChart(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	k := newKubectl(t, env)
	h := newHelm(t, k)
	if _, err := os.Stat(h.bin); err != nil {
		t.Fatalf("%v: run `make integration-tools` (or make bin/helm) first", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	imageTar, installYAML := artifacts(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "charts", "minion-vault-operator")
	audit := auditLog{path: filepath.Join(env.Dir, "vault-audit.log")}

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.Logf("operator pods at the failure:%s", podReport(ctx, env))
			t.FailNow()
		}
	}

	// The image that dist/install.yaml names is the one `make image` built
	// (they share IMG): the chart gets it through its values.
	var image string
	step("the image is imported into containerd", func(t *testing.T) {
		var err error
		if image, err = managerImage(installYAML); err != nil {
			t.Fatal(err)
		}
		if err := env.Node.ImportImage(ctx, imageTar); err != nil {
			t.Fatal(err)
		}
	})
	repo, tag, digest := splitImage(image)

	step("Vault: kubernetes auth and an audit log", func(t *testing.T) {
		setupVault(ctx, t, env, audit.path)
	})

	// Removed at the end whatever happened, so that the node is as it was
	// for TestInstall: the bindings and the template first, while the
	// operator still runs to clear their finalizers and Vault objects, then
	// the release, its namespace and CRDs.
	t.Cleanup(func() { removeHelmRelease(t, env, h) })

	var first *corev1.Pod
	step("helm install: the operator Ready and leading", func(t *testing.T) {
		out, err := h.run(ctx, "install", helmRelease, chart, "--namespace", "default",
			"--wait", "--timeout", "5m",
			"--set", "image.repository="+repo, "--set", "image.tag="+tag, "--set", "image.digest="+digest,
			"--set", "image.pullPolicy=Never",
			"--set", "vaultConnection.create=true", "--set", "vaultConnection.name="+helmConnection,
			// The node's address: the Pod reaches Vault there.
			"--set", "vaultConnection.address="+env.Vault.Addr,
			"--set", "vaultConnection.auth.method=kubernetes",
			"--set", "vaultConnection.auth.kubernetes.role="+vaultRole,
			"--set", "vaultConnection.auth.kubernetes.audiences={vault}")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("helm install:\n%s", out)
		eventually(t, 4*time.Minute, "Deployment "+deploymentName+" Available", func() error {
			return deploymentAvailable(ctx, c)
		})
		if first, err = readyPod(ctx, c); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "Lease "+leaseName, func() error {
			return leaseHeldBy(ctx, c, first.Name)
		})
		if got := first.Spec.Containers[0].ImagePullPolicy; got != corev1.PullNever {
			t.Errorf("imagePullPolicy %q, want Never (image.pullPolicy)", got)
		}
		checkRelease(ctx, t, h, 1)
	})

	step("the chart's VaultConnection, a template and a binding become Ready", func(t *testing.T) {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: helmTenant}}))
		must(t, c.Create(ctx, helmMinionTemplate()))
		must(t, c.Create(ctx, helmBinding("helm00")))
		eventually(t, 2*time.Minute, "VaultConnection "+helmConnection+" Ready", func() error {
			vc := &v1alpha1.VaultConnection{}
			if err := c.Get(ctx, client.ObjectKey{Name: helmConnection}, vc); err != nil {
				return err
			}
			return readyCondition(vc.Status.Conditions, vc.Generation)
		})
		waitHelmBindingsReady(ctx, t, c, "helm00")
		// The template's ACL policy is the template controller's to write,
		// beside the bindings': Ready says it is in Vault.
		waitHelmTemplateReady(ctx, t, c)
		checkHelmVaultObjects(ctx, t, env, "helm00")
	})

	step("helm upgrade with a changed value rolls the operator out", func(t *testing.T) {
		out, err := h.run(ctx, "upgrade", helmRelease, chart, "--namespace", "default", "--reuse-values",
			"--wait", "--timeout", "5m", "--set", "resources.limits.memory=384Mi")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("helm upgrade --reuse-values --set resources.limits.memory=384Mi:\n%s", out)
		var pod *corev1.Pod
		eventually(t, 3*time.Minute, "a new Pod, Ready and leading", func() error {
			if err := deploymentAvailable(ctx, c); err != nil {
				return err
			}
			if pod, err = readyPod(ctx, c); err != nil {
				return err
			}
			if pod.Name == first.Name {
				return fmt.Errorf("still the first pod %s", pod.Name)
			}
			return leaseHeldBy(ctx, c, pod.Name)
		})
		if got := pod.Spec.Containers[0].Resources.Limits.Memory().String(); got != "384Mi" {
			t.Errorf("the new Pod's memory limit %s, want 384Mi", got)
		}
		// --reuse-values kept the install's values: the same image and
		// VaultConnection.
		if got := pod.Spec.Containers[0].ImagePullPolicy; got != corev1.PullNever {
			t.Errorf("imagePullPolicy %q after the upgrade, want Never", got)
		}
		checkRelease(ctx, t, h, 2)
		t.Logf("pod %s -> %s, memory limit 384Mi", first.Name, pod.Name)
	})

	step("after the upgrade the old binding stays Ready and a new one converges", func(t *testing.T) {
		must(t, c.Create(ctx, helmBinding("helm01")))
		eventually(t, 2*time.Minute, "VaultConnection "+helmConnection+" Ready", func() error {
			vc := &v1alpha1.VaultConnection{}
			if err := c.Get(ctx, client.ObjectKey{Name: helmConnection}, vc); err != nil {
				return err
			}
			return readyCondition(vc.Status.Conditions, vc.Generation)
		})
		waitHelmBindingsReady(ctx, t, c, "helm00", "helm01")
		waitHelmTemplateReady(ctx, t, c)
		checkHelmVaultObjects(ctx, t, env, "helm00", "helm01")
		pod, err := readyPod(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := metricValue(podMetrics(ctx, t, pod), `minionvault_vault_logins_total{method="kubernetes",result="success"}`); n < 1 {
			t.Errorf("the upgraded operator's metrics count %v successful kubernetes logins, want at least 1", n)
		}
	})
}

// checkRelease: helm says the release is deployed at this revision.
func checkRelease(ctx context.Context, t *testing.T, h *helm, revision int) {
	t.Helper()
	out, err := h.run(ctx, "status", helmRelease, "--namespace", "default", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Version int `json:"version"`
		Info    struct {
			Status string `json:"status"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("helm status -o json: %v: %s", err, out)
	}
	if st.Version != revision || st.Info.Status != "deployed" {
		t.Errorf("release %s: revision %d %s, want revision %d deployed", helmRelease, st.Version, st.Info.Status, revision)
	}
}

// removeHelmRelease deletes what TestHelmChart made, checks that helm
// uninstall kept the CRDs, deletes them, and waits until the operator's
// namespace and the CRDs are gone.
func removeHelmRelease(t *testing.T, env *testenv.Env, h *helm) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := env.Client
	var list v1alpha1.MinionBindingList
	if err := c.List(ctx, &list, client.InNamespace(helmTenant)); err == nil {
		for i := range list.Items {
			_ = c.Delete(ctx, &list.Items[i])
		}
	}
	eventually(t, 2*time.Minute, "the helm test's bindings deleted", func() error {
		var list v1alpha1.MinionBindingList
		if err := c.List(ctx, &list, client.InNamespace(helmTenant)); err != nil {
			return nil // no CRD: nothing left
		}
		if n := len(list.Items); n != 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	})
	_ = c.Delete(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: helmTemplate}})
	eventually(t, time.Minute, "the helm test's template deleted", func() error {
		err := c.Get(ctx, client.ObjectKey{Name: helmTemplate}, &v1alpha1.MinionTemplate{})
		if err == nil {
			return fmt.Errorf("template %s still there", helmTemplate)
		}
		return nil
	})
	// The chart's VaultConnection too, while the operator runs (helm
	// uninstall deletes it and the Deployment at once).
	_ = c.Delete(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: helmConnection}})
	eventually(t, time.Minute, "the chart's VaultConnection deleted", func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: helmConnection}, &v1alpha1.VaultConnection{}); err == nil {
			return fmt.Errorf("VaultConnection %s still there", helmConnection)
		}
		return nil
	})
	if out, err := h.run(ctx, "uninstall", helmRelease, "--namespace", "default", "--wait", "--timeout", "3m"); err != nil {
		t.Errorf("helm uninstall: %v", err)
	} else {
		t.Logf("helm uninstall: %s", out)
	}
	crdMeta := func(name string) *metav1.PartialObjectMetadata {
		// Metadata only: the test's scheme has no apiextensions types.
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	// The chart keeps the CRDs at an uninstall by default (crds.keep: an
	// uninstall must not delete every binding); this test removes them.
	for _, crd := range []string{"minionbindings", "miniontemplates", "vaultconnections"} {
		m := crdMeta(crd + ".minionvault.dev")
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Errorf("CRD %s after helm uninstall: %v, want it kept", m.Name, err)
			continue
		}
		if err := c.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting CRD %s: %v", m.Name, err)
		}
	}
	_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: helmTenant}})
	eventually(t, 3*time.Minute, "the release's namespace, CRDs and the tenant namespace gone", func() error {
		for _, ns := range []string{namespace, helmTenant} {
			if err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s: %v", ns, err)
			}
		}
		for _, crd := range []string{"minionbindings", "miniontemplates", "vaultconnections"} {
			m := crdMeta(crd + ".minionvault.dev")
			if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); !apierrors.IsNotFound(err) {
				return fmt.Errorf("CRD %s: %v", m.Name, err)
			}
		}
		return nil
	})
}

func helmMinionTemplate() *v1alpha1.MinionTemplate {
	return &v1alpha1.MinionTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: helmTemplate},
		Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: helmConnection},
			Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/{minion}", "helm_role_{pillar[roles]}"}},
			Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			PolicyDocuments: []v1alpha1.PolicyDocument{{Name: "helm_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{
				{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}},
		},
	}
}

func helmBinding(minion string) *v1alpha1.MinionBinding {
	b := binding(minion)
	b.Namespace = helmTenant
	b.Spec.TemplateRef = v1alpha1.MinionTemplateReference{Name: helmTemplate}
	return b
}

func waitHelmBindingsReady(ctx context.Context, t *testing.T, c client.Client, minions ...string) {
	t.Helper()
	eventually(t, 3*time.Minute, fmt.Sprintf("bindings %v Ready", minions), func() error {
		for _, m := range minions {
			b := &v1alpha1.MinionBinding{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: helmTenant, Name: m}, b); err != nil {
				return err
			}
			if err := readyCondition(b.Status.Conditions, b.Generation); err != nil {
				return fmt.Errorf("%s: %w", m, err)
			}
		}
		return nil
	})
}

func waitHelmTemplateReady(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	eventually(t, time.Minute, "MinionTemplate "+helmTemplate+" Ready", func() error {
		mt := &v1alpha1.MinionTemplate{}
		if err := c.Get(ctx, client.ObjectKey{Name: helmTemplate}, mt); err != nil {
			return err
		}
		return readyCondition(mt.Status.Conditions, mt.Generation)
	})
}

// checkHelmVaultObjects: each binding's AppRole role and entity, and the
// template's policy, are in Vault.
func checkHelmVaultObjects(ctx context.Context, t *testing.T, env *testenv.Env, minions ...string) {
	t.Helper()
	for _, m := range minions {
		role, err := env.Vault.Client.Logical().ReadWithContext(ctx, "auth/"+testenv.AppRoleMount+"/role/"+m)
		if err != nil || role == nil {
			t.Errorf("AppRole role %s: %v, %v", m, role, err)
		}
		entity, err := env.Vault.Client.Logical().ReadWithContext(ctx, "identity/entity/name/salt_minion_"+m)
		if err != nil || entity == nil {
			t.Errorf("entity salt_minion_%s: %v, %v", m, entity, err)
		}
	}
	if pol, err := env.Vault.Client.Sys().GetPolicyWithContext(ctx, "helm_role_web"); err != nil || pol == "" {
		t.Errorf("policy helm_role_web: %q, %v", pol, err)
	}
}

// splitImage splits repository[:tag][@digest].
func splitImage(ref string) (repo, tag, digest string) {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, digest = ref[:i], ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, tag = ref[:i], ref[i+1:]
	}
	return ref, tag, digest
}
