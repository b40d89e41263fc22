//go:build integration

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	vaultpolicy "github.com/minionvault/minion-vault-operator/config/vault"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

// The Vault side of kubernetes auth: the role the operator's
// ServiceAccount logs in as, with the shipped operator policy.
const (
	vaultRole      = "minionvault-operator"
	operatorPolicy = testenv.OperatorPolicyName
	connectionName = "vault-node"
	templateName   = "node"
	tenant         = "tenant-node"
	// The token reviewer's namespace (setupVault).
	reviewerNamespace = "vault-reviewer"
)

// bindingsBeforeRestart and bindingsMidConvergence size the test. The second
// is large enough that the operator is still writing when its Pod is
// deleted (checked, not assumed).
var (
	bindingsBeforeRestart  = 5
	bindingsMidConvergence = 40
)

// TestInstall is the installation as an operator of a cluster does it, on a
// real node: the image imported into containerd, dist/install.yaml applied
// with kubectl as it is, and then what the installation promises, one step
// after the other (each needs the ones before).
func TestInstall(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	k := newKubectl(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	imageTar, installYAML := artifacts(t)
	audit := auditLog{path: filepath.Join(env.Dir, "vault-audit.log")}

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.Logf("operator pods at the failure:%s", podReport(ctx, env))
			t.FailNow()
		}
	}

	step("the image is imported into containerd", func(t *testing.T) {
		image, err := managerImage(installYAML)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Node.ImportImage(ctx, imageTar); err != nil {
			t.Fatal(err)
		}
		out, err := env.Node.Ctr(ctx, "images", "ls", "-q")
		if err != nil {
			t.Fatalf("ctr images ls: %v: %s", err, out)
		}
		if !strings.Contains("\n"+string(out), "\n"+image+"\n") {
			t.Fatalf("%s installs %s, but %s holds:\n%s(build both with the same IMG)", installYAML, image, imageTar, out)
		}
		t.Logf("imported %s from %s", image, imageTar)
	})

	step("dist/install.yaml applies as it is", func(t *testing.T) {
		out, err := k.run(ctx, "apply", "--server-side", "--field-manager=node-test", "-f", installYAML)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubectl apply --server-side -f %s:\n%s", installYAML, out)
	})

	step("the Deployment becomes Available", func(t *testing.T) {
		eventually(t, 4*time.Minute, "Deployment "+deploymentName+" Available", func() error {
			return deploymentAvailable(ctx, c)
		})
		pod, err := readyPod(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pod %s on node %s, IP %s, Ready (the kubelet's readiness probe passed)", pod.Name, pod.Spec.NodeName, pod.Status.PodIP)
		if pod.Spec.NodeName != env.Node.Name {
			t.Errorf("pod on node %q, want %q", pod.Spec.NodeName, env.Node.Name)
		}
	})

	step("the container runs as the securityContext says", func(t *testing.T) {
		pod, err := readyPod(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		cs := pod.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].Name != "manager" || !strings.HasPrefix(cs[0].ContainerID, "containerd://") {
			t.Fatalf("container statuses %+v", cs)
		}
		if cs[0].RestartCount != 0 {
			t.Errorf("the manager restarted %d times (liveness probe or crash)", cs[0].RestartCount)
		}
		run, err := inspectContainer(ctx, env.Node, strings.TrimPrefix(cs[0].ContainerID, "containerd://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the manager container as the kubelet and runc ran it:\n%s", run)
		checks := []struct {
			what string
			ok   bool
		}{
			{"OCI process.user.uid 65532", run.UID == 65532},
			{"OCI process.user.gid 65532", run.GID == 65532},
			{"OCI root.readonly", run.ReadonlyRootfs},
			{"OCI process.noNewPrivileges", run.NoNewPrivileges},
			{"OCI no bounding capabilities", len(run.BoundingCaps) == 0},
			{"OCI RuntimeDefault seccomp profile (default action errno)", run.Seccomp == "SCMP_ACT_ERRNO"},
			{"args: /minionvault operator", len(run.Args) > 1 && run.Args[0] == "/minionvault" && run.Args[1] == "operator"},
			{"kernel: Uid 65532 (real, effective, saved, fs)", run.Status["Uid"] == "65532 65532 65532 65532"},
			{"kernel: Gid 65532", run.Status["Gid"] == "65532 65532 65532 65532"},
			{"kernel: NoNewPrivs 1", run.Status["NoNewPrivs"] == "1"},
			{"kernel: Seccomp 2 (filter)", run.Status["Seccomp"] == "2"},
			{"kernel: no effective capabilities", run.Status["CapEff"] == "0000000000000000"},
			{"kernel: no bounding capabilities", run.Status["CapBnd"] == "0000000000000000"},
			{"kernel: / mounted read-only", strings.HasPrefix(run.RootMount, "ro,") || strings.HasPrefix(run.RootMount, "ro ")},
			{"cgroup: below the node's kubepods", strings.Contains(run.CgroupPaths, env.Node.CgroupRoot+"/kubepods")},
		}
		for _, ch := range checks {
			if !ch.ok {
				t.Errorf("not as the Deployment asks: %s", ch.what)
			}
		}
	})

	step("the leader-election Lease is held by the Pod", func(t *testing.T) {
		pod, err := readyPod(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "Lease "+leaseName, func() error {
			return leaseHeldBy(ctx, c, pod.Name)
		})
	})

	step("Vault: kubernetes auth and an audit log", func(t *testing.T) {
		setupVault(ctx, t, env, audit.path)
	})

	step("a VaultConnection with kubernetes auth, a template and bindings become Ready", func(t *testing.T) {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}))
		must(t, c.Create(ctx, &v1alpha1.VaultConnection{
			ObjectMeta: metav1.ObjectMeta{Name: connectionName},
			Spec: v1alpha1.VaultConnectionSpec{
				// The node's address: the Pod reaches Vault there.
				Address: env.Vault.Addr,
				Auth:    v1alpha1.VaultAuth{Kubernetes: &v1alpha1.KubernetesAuth{Role: vaultRole, Audiences: []string{"vault"}}},
			},
		}))
		must(t, c.Create(ctx, template()))
		for i := range bindingsBeforeRestart {
			must(t, c.Create(ctx, binding(fmt.Sprintf("web%02d", i))))
		}
		eventually(t, 2*time.Minute, "VaultConnection Ready", func() error {
			vc := &v1alpha1.VaultConnection{}
			if err := c.Get(ctx, client.ObjectKey{Name: connectionName}, vc); err != nil {
				return err
			}
			return readyCondition(vc.Status.Conditions, vc.Generation)
		})
		waitBindingsReady(ctx, t, c, bindingsBeforeRestart)
		eventually(t, time.Minute, "MinionTemplate Ready", func() error {
			mt := &v1alpha1.MinionTemplate{}
			if err := c.Get(ctx, client.ObjectKey{Name: templateName}, mt); err != nil {
				return err
			}
			return readyCondition(mt.Status.Conditions, mt.Generation)
		})
		checkVaultObjects(ctx, t, env, bindingsBeforeRestart)

		// Vault logged the operator in with kubernetes auth (it reviews the
		// token with the API server's TokenReview on every login).
		reqs, err := audit.requests(0)
		if err != nil {
			t.Fatal(err)
		}
		logins := 0
		for _, e := range reqs {
			if e.Request.Path == "auth/kubernetes/login" {
				logins++
			}
		}
		if logins == 0 {
			t.Error("no kubernetes login in Vault's audit log")
		}
		pod, err := readyPod(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		metrics := podMetrics(ctx, t, pod)
		if n, _ := metricValue(metrics, `minionvault_vault_logins_total{method="kubernetes",result="success"}`); n < 1 {
			t.Errorf("the operator's metrics count %v successful kubernetes logins, want at least 1", n)
		}
		t.Logf("binding %s/web00 converged through pod %s with kubernetes auth: %d kubernetes logins in Vault's audit log", tenant, pod.Name, logins)
	})

	step("the metrics endpoint answers through its Service", func(t *testing.T) {
		svc := &corev1.Service{}
		must(t, c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: metricsService}, svc))
		url := fmt.Sprintf("http://%s:8080/metrics", svc.Spec.ClusterIP)
		var body string
		eventually(t, time.Minute, "GET "+url, func() (err error) {
			body, err = httpGet(ctx, url)
			return err
		})
		n := bindingReconciles(body)
		if n < float64(bindingsBeforeRestart) {
			t.Errorf("GET %s: %v successful binding reconciles, want at least %d", url, n, bindingsBeforeRestart)
		}
		t.Logf("GET %s (kube-proxy to the Pod): %d bytes, %v successful binding reconciles", url, len(body), n)
	})

	step("kubectl rollout restart makes no Vault write", func(t *testing.T) {
		old, err := readyPod(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		offset, err := audit.size()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.run(ctx, "-n", namespace, "rollout", "restart", "deployment/"+deploymentName); err != nil {
			t.Fatal(err)
		}
		if _, err := k.run(ctx, "-n", namespace, "rollout", "status", "deployment/"+deploymentName, "--timeout=4m"); err != nil {
			t.Fatal(err)
		}
		var pod *corev1.Pod
		eventually(t, 2*time.Minute, "a new Pod, Ready and leading", func() error {
			if pod, err = readyPod(ctx, c); err != nil {
				return err
			}
			if pod.Name == old.Name {
				return fmt.Errorf("still the old pod %s", pod.Name)
			}
			return leaseHeldBy(ctx, c, pod.Name)
		})
		// The new leader has gone through every binding: its reconcile
		// count covers them, and each was found in place.
		eventually(t, 2*time.Minute, "the new Pod reconciled every binding", func() error {
			n := bindingReconciles(podMetrics(ctx, t, pod))
			if n < float64(bindingsBeforeRestart) {
				return fmt.Errorf("%v successful binding reconciles", n)
			}
			return nil
		})
		waitBindingsReady(ctx, t, c, bindingsBeforeRestart)
		reqs, err := audit.requests(offset)
		if err != nil {
			t.Fatal(err)
		}
		var writes, other []string
		for _, e := range reqs {
			switch {
			case e.isWrite() && !e.isLogin():
				writes = append(writes, e.String())
			default:
				other = append(other, e.String())
			}
		}
		t.Logf("Vault requests from the restart on (pod %s -> %s): %d, of which writes other than logins: %d", old.Name, pod.Name, len(reqs), len(writes))
		t.Logf("requests that are not writes, or are logins: %s", summarize(other))
		if len(writes) != 0 {
			t.Errorf("the restart wrote to Vault %d times:\n%s", len(writes), strings.Join(writes, "\n"))
		}
	})

	step("deleting the Pod mid-convergence loses nothing", func(t *testing.T) {
		old, err := readyPod(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		total := bindingsBeforeRestart + bindingsMidConvergence
		for i := bindingsBeforeRestart; i < total; i++ {
			must(t, c.Create(ctx, binding(fmt.Sprintf("web%02d", i))))
		}
		// Delete the Pod as soon as the operator is under way: some new
		// bindings Ready, not all.
		// Polled tightly: on an idle machine the operator makes several
		// bindings Ready per second.
		var ready int
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if ready = countReady(ctx, c); ready > bindingsBeforeRestart {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new binding Ready within a minute (%d Ready)", ready)
			}
		}
		must(t, c.Delete(ctx, old))
		t.Logf("deleted pod %s with %d of %d bindings Ready", old.Name, ready, total)
		if ready >= total {
			t.Fatalf("all %d bindings were Ready before the Pod went: raise bindingsMidConvergence", total)
		}
		eventually(t, 3*time.Minute, "a new Pod, Ready and leading", func() error {
			pod, err := readyPod(ctx, c)
			if err != nil {
				return err
			}
			if pod.Name == old.Name {
				return fmt.Errorf("still the old pod %s", pod.Name)
			}
			return leaseHeldBy(ctx, c, pod.Name)
		})
		waitBindingsReady(ctx, t, c, total)
		checkVaultObjects(ctx, t, env, total)
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func unstructuredContainers(obj map[string]any) ([]map[string]any, bool, error) {
	spec, _ := obj["spec"].(map[string]any)
	tpl, _ := spec["template"].(map[string]any)
	podSpec, _ := tpl["spec"].(map[string]any)
	list, ok := podSpec["containers"].([]any)
	var out []map[string]any
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, ok, nil
}

func leaseHeldBy(ctx context.Context, c client.Client, pod string) error {
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: leaseName}, lease); err != nil {
		return err
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	// controller-runtime's identity is <hostname>_<uuid>; a Pod's hostname is its name.
	if !strings.HasPrefix(holder, pod+"_") {
		return fmt.Errorf("lease held by %q, not pod %s", holder, pod)
	}
	return nil
}

// vaultSetUp: setupVault's work is done once per package (TestHelmChart
// and TestInstall share the node and its Vault), and its error kept.
var vaultSetUp struct {
	once sync.Once
	desc string
	err  error
}

// setupVault writes the operator policy, enables a file audit device and
// the kubernetes auth method against the node's API server: Vault reviews
// each login's token with a TokenReview, as a reviewer ServiceAccount
// bound to system:auth-delegator. The reviewer lives in a namespace of its
// own, so that it outlives an installation that is removed (TestHelmChart
// uninstalls its release and the operator's namespace with it).
func setupVault(ctx context.Context, t *testing.T, env *testenv.Env, auditPath string) {
	t.Helper()
	vaultSetUp.once.Do(func() { vaultSetUp.desc, vaultSetUp.err = configureVault(ctx, env, auditPath) })
	if vaultSetUp.err != nil {
		t.Fatal(vaultSetUp.err)
	}
	t.Log(vaultSetUp.desc)
}

func configureVault(ctx context.Context, env *testenv.Env, auditPath string) (string, error) {
	root := env.Vault.Client
	c := env.Client
	if err := root.Sys().PutPolicyWithContext(ctx, operatorPolicy, vaultpolicy.OperatorPolicy); err != nil {
		return "", fmt.Errorf("operator policy: %w", err)
	}
	if err := root.Sys().EnableAuditWithOptionsWithContext(ctx, "file", &vaultapi.EnableAuditOptions{
		Type: "file", Options: map[string]string{"file_path": auditPath},
	}); err != nil {
		return "", fmt.Errorf("audit device: %w", err)
	}
	if _, err := os.Stat(auditPath); err != nil {
		return "", fmt.Errorf("the audit device wrote no file: %w", err)
	}

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: reviewerNamespace}}); err != nil {
		return "", err
	}
	reviewer := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "vault-token-reviewer", Namespace: reviewerNamespace}}
	if err := c.Create(ctx, reviewer); err != nil {
		return "", err
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vault-token-reviewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: reviewer.Name, Namespace: reviewer.Namespace}},
	}); err != nil {
		return "", err
	}
	expiry := int64(3600)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	if err := c.SubResource("token").Create(ctx, reviewer, tr); err != nil {
		return "", fmt.Errorf("the reviewer's token: %w", err)
	}

	if err := root.Sys().EnableAuthWithOptionsWithContext(ctx, "kubernetes", &vaultapi.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		return "", fmt.Errorf("kubernetes auth: %w", err)
	}
	if _, err := root.Logical().WriteWithContext(ctx, "auth/kubernetes/config", map[string]any{
		"kubernetes_host":      env.Config.Host,
		"kubernetes_ca_cert":   string(env.Config.CAData),
		"token_reviewer_jwt":   tr.Status.Token,
		"disable_local_ca_jwt": true,
	}); err != nil {
		return "", fmt.Errorf("kubernetes auth config: %w", err)
	}
	if _, err := root.Logical().WriteWithContext(ctx, "auth/kubernetes/role/"+vaultRole, map[string]any{
		"bound_service_account_names":      []string{serviceAccount},
		"bound_service_account_namespaces": []string{namespace},
		"audience":                         "vault",
		"token_policies":                   []string{operatorPolicy},
		"token_no_default_policy":          true,
		"token_ttl":                        "1h",
	}); err != nil {
		return "", fmt.Errorf("kubernetes auth role: %w", err)
	}
	return fmt.Sprintf("Vault at %s: kubernetes auth against %s, audit log %s", env.Vault.Addr, env.Config.Host, auditPath), nil
}

func template() *v1alpha1.MinionTemplate {
	return &v1alpha1.MinionTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: templateName},
		Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: connectionName},
			Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/{minion}", "node_role_{pillar[roles]}"}},
			Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			PolicyDocuments: []v1alpha1.PolicyDocument{{Name: "node_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{
				{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}},
		},
	}
}

func binding(minion string) *v1alpha1.MinionBinding {
	pillar := v1alpha1.NewDocument([]byte(`{"roles": ["web"]}`))
	grains := v1alpha1.NewDocument([]byte(`{"id": "` + minion + `"}`))
	return &v1alpha1.MinionBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: minion},
		Spec: v1alpha1.MinionBindingSpec{
			MinionID: minion, TemplateRef: v1alpha1.MinionTemplateReference{Name: templateName},
			Grains: &grains, Pillar: &pillar,
		},
	}
}

func readyCondition(conds []metav1.Condition, generation int64) error {
	cond := apimeta.FindStatusCondition(conds, v1alpha1.ReadyCondition)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration < generation {
		return fmt.Errorf("Ready condition %+v", cond)
	}
	return nil
}

func countReady(ctx context.Context, c client.Client) int {
	var list v1alpha1.MinionBindingList
	if err := c.List(ctx, &list, client.InNamespace(tenant)); err != nil {
		return 0
	}
	n := 0
	for i := range list.Items {
		b := &list.Items[i]
		if readyCondition(b.Status.Conditions, b.Generation) == nil && b.Status.ObservedGeneration == b.Generation {
			n++
		}
	}
	return n
}

func waitBindingsReady(ctx context.Context, t *testing.T, c client.Client, want int) {
	t.Helper()
	eventually(t, 3*time.Minute, fmt.Sprintf("%d bindings Ready", want), func() error {
		if n := countReady(ctx, c); n != want {
			return fmt.Errorf("%d of %d Ready", n, want)
		}
		return nil
	})
}

// checkVaultObjects: every binding's AppRole role and entity are in Vault.
func checkVaultObjects(ctx context.Context, t *testing.T, env *testenv.Env, n int) {
	t.Helper()
	for i := range n {
		minion := fmt.Sprintf("web%02d", i)
		role, err := env.Vault.Client.Logical().ReadWithContext(ctx, "auth/"+testenv.AppRoleMount+"/role/"+minion)
		if err != nil || role == nil {
			t.Errorf("AppRole role %s: %v, %v", minion, role, err)
		}
		entity, err := env.Vault.Client.Logical().ReadWithContext(ctx, "identity/entity/name/salt_minion_"+minion)
		if err != nil || entity == nil {
			t.Errorf("entity salt_minion_%s: %v, %v", minion, entity, err)
		}
	}
	pol, err := env.Vault.Client.Sys().GetPolicyWithContext(ctx, "node_role_web")
	if err != nil || pol == "" {
		t.Errorf("policy node_role_web: %q, %v", pol, err)
	}
}

// podMetrics reads the operator Pod's metrics at its Pod IP.
func podMetrics(ctx context.Context, t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	body, err := httpGet(ctx, fmt.Sprintf("http://%s:8080/metrics", pod.Status.PodIP))
	if err != nil {
		t.Fatalf("metrics of pod %s: %v", pod.Name, err)
	}
	return body
}

// bindingReconciles counts the binding reconciles that did not fail
// (controller-runtime's result label: success, or requeue_after for the
// periodic resync).
func bindingReconciles(metrics string) float64 {
	all, _ := metricValue(metrics, `controller_runtime_reconcile_total{controller="minionbinding",`)
	failed, _ := metricValue(metrics, `controller_runtime_reconcile_total{controller="minionbinding",result="error"}`)
	return all - failed
}

// summarize counts requests by their description.
func summarize(list []string) string {
	counts := map[string]int{}
	var order []string
	for _, s := range list {
		if counts[s] == 0 {
			order = append(order, s)
		}
		counts[s]++
	}
	var parts []string
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%dx %s", counts[s], s))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// managerImage is the image of the manager container in the operator's
// Deployment in the manifests at path (install.yaml).
func managerImage(path string) (string, error) {
	objs, err := decodeManifests(path)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != deploymentName {
			continue
		}
		containers, _, _ := unstructuredContainers(o.Object)
		for _, ctr := range containers {
			if image, _ := ctr["image"].(string); ctr["name"] == "manager" && image != "" {
				return image, nil
			}
		}
	}
	return "", fmt.Errorf("%s has no Deployment %s with a manager container", path, deploymentName)
}
