//go:build integration

// Package install tests the installation manifests: config/default, which
// `make build-installer` renders into dist/install.yaml. The render is
// applied with server-side dry-run against a real API server (so every
// object is valid, admission included: the manager's Deployment must meet
// the "restricted" Pod Security Standard of its namespace without a single
// warning), and the security properties of the Deployment and the RBAC are
// asserted: least privilege, no wildcards, every rule of the manager's
// ClusterRole accounted for.
//
// Run it with `make integration`, or alone:
//
//	go test -tags integration -count=1 ./test/install
package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/internal/cli"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

// The API server, and Vault for TestOperatorRunsWithTheInstalledRBAC.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

// What config/default installs, by name.
const (
	namespace      = "minion-vault-system"
	deploymentName = "minion-vault-controller-manager"
	serviceAccount = "minion-vault-controller-manager"
	managerRole    = "minion-vault-manager-role"
	fieldOwner     = "minionvault-install-test"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// kubectl is the kubectl whose kustomize renders config/default: the one
// `make build-installer` uses (bin/kubectl, from `make tools`).
func kubectl() (string, error) {
	if p := os.Getenv("TEST_ASSET_KUBECTL"); p != "" {
		return p, nil
	}
	dir := os.Getenv(testenv.EnvToolsDir)
	if dir == "" {
		if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
			dir = d
		} else {
			root, err := testenv.ModuleRoot()
			if err != nil {
				return "", err
			}
			dir = filepath.Join(root, "bin")
		}
	}
	p := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("kubectl not found (%v): run `make tools`", err)
	}
	return p, nil
}

var rendered struct {
	once sync.Once
	objs []*unstructured.Unstructured
	err  error
}

// render runs `kubectl kustomize config/default` once and decodes the objects.
func render(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	rendered.once.Do(func() {
		rendered.objs, rendered.err = renderDefault()
	})
	if rendered.err != nil {
		t.Fatal(rendered.err)
	}
	// Each test gets its own copies: some modify them.
	out := make([]*unstructured.Unstructured, len(rendered.objs))
	for i, o := range rendered.objs {
		out[i] = o.DeepCopy()
	}
	return out
}

func renderDefault() ([]*unstructured.Unstructured, error) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return nil, err
	}
	k, err := kubectl()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(k, "kustomize", filepath.Join(root, "config", "default"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl kustomize config/default: %v\n%s", err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(&stdout, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decoding the render: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		return nil, errors.New("kubectl kustomize config/default rendered no objects")
	}
	return objs, nil
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// warnings collects the API server's warnings (Warning headers).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

// warningClient is a client of the test API server that records warnings.
func warningClient(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	env := testenv.Get(t)
	cfg := rest.CopyConfig(env.Config)
	w := &warnings{}
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// ensureNamespace applies the rendered Namespace for real: a dry-run of an
// object in a namespace that does not exist fails.
func ensureNamespace(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	ns := find(objs, "Namespace", namespace)
	if ns == nil {
		t.Fatalf("the render has no Namespace %s", namespace)
	}
	if err := c.Apply(testContext(t), client.ApplyConfigurationFromUnstructured(ns.DeepCopy()), client.FieldOwner(fieldOwner)); err != nil {
		t.Fatalf("applying Namespace %s: %v", namespace, err)
	}
}

func dryRunApply(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.DryRunAll)
}

// TestDryRunApply applies every object of the render with server-side
// dry-run, as `kubectl apply --server-side --dry-run=server -f
// dist/install.yaml` would: schema, defaulting and admission (Pod Security
// of the namespace) all run; nothing is stored.
func TestDryRunApply(t *testing.T) {
	objs := render(t)
	c, w := warningClient(t)
	ensureNamespace(t, c, objs)
	w.take()

	counts := map[string]int{}
	for _, o := range objs {
		counts[o.GetKind()]++
		what := o.GetKind() + " " + o.GetName()
		if err := dryRunApply(testContext(t), c, o); err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		for _, warning := range w.take() {
			t.Errorf("%s: the API server warns: %s", what, warning)
		}
	}
	// Guard against a render that lost a part (a dropped resources entry).
	want := map[string]int{
		"Namespace": 1, "CustomResourceDefinition": 3, "ServiceAccount": 1,
		"Role": 3, "RoleBinding": 3, "ClusterRole": 7, "ClusterRoleBinding": 1,
		"Service": 1, "Deployment": 1,
	}
	for kind, n := range want {
		if counts[kind] != n {
			t.Errorf("the render has %d %s objects, want %d", counts[kind], kind, n)
		}
	}
	for kind := range counts {
		if _, ok := want[kind]; !ok {
			t.Errorf("the render has an unexpected kind %s: add it to this test", kind)
		}
	}
	// Every namespaced object lands in the operator's namespace.
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && ns != namespace {
			t.Errorf("%s %s is in namespace %q, want %q", o.GetKind(), o.GetName(), ns, namespace)
		}
	}
}

// TestPodSecurityIsChecked shows that TestDryRunApply's "no warnings" means
// something: the same dry-run of a Deployment that breaks the restricted
// profile draws a Pod Security warning from this API server.
func TestPodSecurityIsChecked(t *testing.T) {
	objs := render(t)
	c, w := warningClient(t)
	ensureNamespace(t, c, objs)
	w.take()

	d := find(objs, "Deployment", deploymentName)
	if d == nil {
		t.Fatalf("the render has no Deployment %s", deploymentName)
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		t.Fatal("the Deployment has no containers")
	}
	first := containers[0].(map[string]any)
	if err := unstructured.SetNestedField(first, true, "securityContext", "allowPrivilegeEscalation"); err != nil {
		t.Fatal(err)
	}
	containers[0] = first
	if err := unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	if err := dryRunApply(testContext(t), c, d); err != nil {
		t.Fatalf("dry-run of the Deployment with allowPrivilegeEscalation: %v", err)
	}
	got := w.take()
	if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "PodSecurity") }) {
		t.Fatalf("a manager with allowPrivilegeEscalation drew no Pod Security warning (warnings: %q): is the namespace label pod-security.kubernetes.io/enforce gone, or PodSecurity admission off?", got)
	}
}

func managerContainer(t *testing.T, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == "manager" {
			return c
		}
	}
	t.Fatal("the Deployment has no container named manager")
	return nil
}

// expandArgs substitutes $(VAR) in args as the kubelet does, for the
// variables the manager gets from the downward API.
func expandArgs(args []string, vars map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range vars {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		out[i] = a
	}
	return out
}

func TestDeployment(t *testing.T) {
	objs := render(t)
	u := find(objs, "Deployment", deploymentName)
	if u == nil {
		t.Fatalf("the render has no Deployment %s", deploymentName)
	}
	d := convert[appsv1.Deployment](t, u)
	ps := &d.Spec.Template.Spec
	c := managerContainer(t, d)

	if ps.ServiceAccountName != serviceAccount {
		t.Errorf("serviceAccountName = %q, want %q", ps.ServiceAccountName, serviceAccount)
	}
	if find(objs, "ServiceAccount", ps.ServiceAccountName) == nil {
		t.Errorf("the ServiceAccount %q of the Deployment is not in the render", ps.ServiceAccountName)
	}
	if g := ps.TerminationGracePeriodSeconds; g == nil || *g < 10 {
		t.Errorf("terminationGracePeriodSeconds = %v, want at least 10", g)
	}
	if !strings.HasPrefix(c.Image, "ghcr.io/minionvault/minion-vault-operator:") {
		t.Errorf("image = %q, want ghcr.io/minionvault/minion-vault-operator:<tag>", c.Image)
	}

	// Security: non-root, read-only root filesystem, no privilege escalation,
	// no capabilities, the runtime's seccomp profile.
	psc, sc := ps.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod securityContext.seccompProfile is not RuntimeDefault")
	}
	if sc == nil {
		t.Fatal("the manager container has no securityContext")
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("securityContext.runAsNonRoot is not true")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("securityContext.runAsUser = %v, want a non-root UID (65532, the distroless nonroot user)", sc.RunAsUser)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("securityContext.readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("securityContext.allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("securityContext.privileged is true")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("securityContext.capabilities = %+v, want drop [ALL] and no add", sc.Capabilities)
	}
	if ps.HostNetwork || ps.HostPID || ps.HostIPC {
		t.Error("the pod shares a host namespace")
	}
	if ps.AutomountServiceAccountToken != nil && !*ps.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is false: the manager needs its token to reach the API server")
	}

	// Resources: requests and limits for CPU and memory.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[r]
		lim, okLim := c.Resources.Limits[r]
		if !okReq || !okLim {
			t.Errorf("resources: %s request set %v, limit set %v; want both", r, okReq, okLim)
			continue
		}
		if req.Cmp(lim) > 0 {
			t.Errorf("resources: %s request %s above the limit %s", r, req.String(), lim.String())
		}
	}

	// Probes on the manager's health endpoints.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: no HTTP probe", name)
			return
		}
		if p.HTTPGet.Path != path {
			t.Errorf("%s: path %q, want %q", name, p.HTTPGet.Path, path)
		}
		port := p.HTTPGet.Port.IntVal
		if p.HTTPGet.Port.StrVal != "" {
			port = ports[p.HTTPGet.Port.StrVal]
		}
		if port != 8081 {
			t.Errorf("%s: port %s (%d), want the health probe port 8081", name, p.HTTPGet.Port.String(), port)
		}
	}
	probe("livenessProbe", c.LivenessProbe, "/healthz")
	probe("readinessProbe", c.ReadinessProbe, "/readyz")
	if ports["http-metrics"] != 8080 {
		t.Errorf("container port http-metrics = %d, want 8080", ports["http-metrics"])
	}

	// The arguments: the operator subcommand with leader election on, and
	// flags that the real command line accepts.
	if len(c.Command) != 0 {
		t.Errorf("command = %q: leave it to the image's ENTRYPOINT", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "operator" {
		t.Fatalf("args = %q, want the operator subcommand first", c.Args)
	}
	for _, want := range []string{"--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args = %q, want %s", c.Args, want)
		}
	}
	vars := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.namespace":
				vars[e.Name] = d.Namespace
			case "spec.serviceAccountName":
				vars[e.Name] = ps.ServiceAccountName
			}
		}
	}
	args := expandArgs(c.Args, vars)
	if want := "--service-account=" + namespace + "/" + serviceAccount; !slices.Contains(args, want) {
		t.Errorf("args (variables expanded) = %q, want %s (Vault kubernetes auth)", args, want)
	}
	if want := "--secret-namespace=" + namespace; !slices.Contains(args, want) {
		t.Errorf("args (variables expanded) = %q, want %s (the Role secret-reader's namespace)", args, want)
	}
	var out, errOut bytes.Buffer
	if code := cli.Main(append(slices.Clone(args), "--help"), &out, &errOut); code != 0 {
		t.Errorf("minionvault %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}

	// The metrics Service reaches the manager's pods on the metrics port.
	su := find(objs, "Service", "minion-vault-controller-manager-metrics")
	if su == nil {
		t.Fatal("the render has no metrics Service")
	}
	svc := convert[corev1.Service](t, su)
	if len(svc.Spec.Selector) == 0 {
		t.Error("the metrics Service has no selector")
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the metrics Service selects %s=%s, which the manager's pods do not have", k, v)
		}
	}
	var metricsPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == "http-metrics" {
			metricsPort = &svc.Spec.Ports[i]
		}
	}
	if metricsPort == nil || metricsPort.Port != 8080 || (metricsPort.TargetPort.StrVal != "http-metrics" && metricsPort.TargetPort.IntVal != 8080) {
		t.Errorf("metrics Service port = %+v, want http-metrics 8080 to the container's http-metrics", metricsPort)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the Deployment selects %s=%s, which its pod template does not have", k, v)
		}
	}
}

// rule is one permission: API group, resource (with subresource), verb.
type rule struct{ group, resource, verb string }

func (r rule) String() string {
	g := r.group
	if g == "" {
		g = "core"
	}
	return g + " " + r.resource + " " + r.verb
}

// flatten spreads policy rules into single permissions; the resourceNames
// of a rule go into the resource as resource[name].
func flatten(rules []rbacv1.PolicyRule) []rule {
	var out []rule
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					if n != "" {
						n = res + "[" + n + "]"
					} else {
						n = res
					}
					for _, v := range r.Verbs {
						out = append(out, rule{g, n, v})
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// managerRules are the permissions of the manager's ClusterRole, with what
// needs them. The ClusterRole is generated from the +kubebuilder:rbac markers
// in controllers/ (config/rbac/role.yaml); what only the manager's namespace
// needs is in namespaced Roles. A new marker fails this test until its
// permission is added here, with a reason.
var managerRules = []rbacv1.PolicyRule{
	// MinionTemplate ConfigMap sources.
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
	// A binding's namespace labels, for the templates' namespaceSelector.
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
	// Events on bindings and templates (the events.k8s.io recorder).
	{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	// The reconciled kinds; patch adds and removes the finalizer.
	{APIGroups: []string{"minionvault.dev"}, Resources: []string{"minionbindings", "miniontemplates"}, Verbs: []string{"get", "list", "watch", "patch"}},
	// VaultConnections are only read.
	{APIGroups: []string{"minionvault.dev"}, Resources: []string{"vaultconnections"}, Verbs: []string{"get", "list", "watch"}},
	// Status of the three kinds: one merge patch per reconcile.
	{APIGroups: []string{"minionvault.dev"}, Resources: []string{"minionbindings/status", "miniontemplates/status", "vaultconnections/status"}, Verbs: []string{"patch"}},
	// kubebuilder's convention for kinds with a finalizer (setting
	// blockOwnerDeletion on owner references under
	// OwnerReferencesPermissionEnforcement); unused by the controllers today.
	{APIGroups: []string{"minionvault.dev"}, Resources: []string{"minionbindings/finalizers", "miniontemplates/finalizers"}, Verbs: []string{"update"}},
}

// namespacedRules are the manager's Roles in its own namespace.
var namespacedRules = map[string][]rule{
	// Leader election: the Lease, and the core/v1 Events the elector records.
	"minion-vault-leader-election-role": flatten([]rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}),
	// TokenRequest for its own ServiceAccount only (Vault kubernetes auth).
	"minion-vault-token-requester": flatten([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{serviceAccount}, Verbs: []string{"create"}},
	}),
	// VaultConnection secretRefs (token, AppRole secret ID, CA), which
	// must be in this namespace (--secret-namespace), watched so that an
	// edited Secret means a new login.
	"minion-vault-secret-reader": flatten([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
	}),
}

func TestRBAC(t *testing.T) {
	objs := render(t)

	// No wildcards anywhere, in any Role or ClusterRole.
	for _, o := range objs {
		var rules []rbacv1.PolicyRule
		switch o.GetKind() {
		case "ClusterRole":
			rules = convert[rbacv1.ClusterRole](t, o).Rules
		case "Role":
			rules = convert[rbacv1.Role](t, o).Rules
		default:
			continue
		}
		if len(rules) == 0 {
			t.Errorf("%s %s has no rules", o.GetKind(), o.GetName())
		}
		for _, r := range rules {
			for _, f := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
				for _, s := range f {
					if strings.Contains(s, "*") {
						t.Errorf("%s %s has a wildcard %q in %+v", o.GetKind(), o.GetName(), s, r)
					}
				}
			}
			if len(r.NonResourceURLs) != 0 {
				t.Errorf("%s %s grants non-resource URLs %q", o.GetKind(), o.GetName(), r.NonResourceURLs)
			}
			for _, v := range r.Verbs {
				if v == "escalate" || v == "bind" || v == "impersonate" {
					t.Errorf("%s %s grants %q", o.GetKind(), o.GetName(), v)
				}
			}
		}
	}

	// The manager's ClusterRole: exactly the permissions listed above.
	cr := find(objs, "ClusterRole", managerRole)
	if cr == nil {
		t.Fatalf("the render has no ClusterRole %s", managerRole)
	}
	got := flatten(convert[rbacv1.ClusterRole](t, cr).Rules)
	want := flatten(managerRules)
	for _, r := range got {
		if !slices.Contains(want, r) {
			t.Errorf("ClusterRole %s grants %s, which is not known to be needed (add it to managerRules with a reason)", managerRole, r)
		}
	}
	for _, r := range want {
		if !slices.Contains(got, r) {
			t.Errorf("ClusterRole %s lacks %s", managerRole, r)
		}
	}
	for _, r := range got {
		if r.resource == "serviceaccounts/token" || r.resource == "leases" || r.resource == "secrets" {
			t.Errorf("ClusterRole %s grants %s cluster-wide: only its own namespace needs it (a namespaced Role grants it)", managerRole, r)
		}
	}

	// The namespaced Roles.
	for name, want := range namespacedRules {
		o := find(objs, "Role", name)
		if o == nil {
			t.Errorf("the render has no Role %s", name)
			continue
		}
		if o.GetNamespace() != namespace {
			t.Errorf("Role %s is in %q, want %q", name, o.GetNamespace(), namespace)
		}
		if got := flatten(convert[rbacv1.Role](t, o).Rules); !slices.Equal(got, want) {
			t.Errorf("Role %s grants %v, want %v", name, got, want)
		}
	}

	// Every binding grants its role to the manager's ServiceAccount, and the
	// manager's roles are all bound.
	manager := rbacv1.Subject{Kind: "ServiceAccount", Name: serviceAccount, Namespace: namespace}
	bound := map[string]bool{}
	for _, o := range objs {
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		switch o.GetKind() {
		case "ClusterRoleBinding":
			b := convert[rbacv1.ClusterRoleBinding](t, o)
			ref, subjects = b.RoleRef, b.Subjects
		case "RoleBinding":
			b := convert[rbacv1.RoleBinding](t, o)
			ref, subjects = b.RoleRef, b.Subjects
		default:
			continue
		}
		if find(objs, ref.Kind, ref.Name) == nil {
			t.Errorf("%s %s refers to %s %s, which is not in the render", o.GetKind(), o.GetName(), ref.Kind, ref.Name)
		}
		if !slices.Equal(subjects, []rbacv1.Subject{manager}) {
			t.Errorf("%s %s binds %+v, want only the manager's ServiceAccount", o.GetKind(), o.GetName(), subjects)
		}
		bound[ref.Kind+"/"+ref.Name] = true
	}
	for _, r := range []string{"ClusterRole/" + managerRole, "Role/minion-vault-leader-election-role", "Role/minion-vault-token-requester", "Role/minion-vault-secret-reader"} {
		if !bound[r] {
			t.Errorf("%s is not bound to the manager", r)
		}
	}

	// The roles for people: only the MinionBinding editor joins the built-in
	// admin and edit roles (tenants); templates and connections decide what
	// the operator does in Vault and reads from Secrets, so their editors are
	// bound explicitly. Viewers join view and can only read.
	const (
		aggAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
		aggEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
		aggView  = "rbac.authorization.k8s.io/aggregate-to-view"
	)
	for _, tc := range []struct {
		name                    string
		admin, edit, view, read bool
	}{
		{"minion-vault-minionbinding-editor-role", true, true, false, false},
		{"minion-vault-minionbinding-viewer-role", false, false, true, true},
		{"minion-vault-miniontemplate-editor-role", false, false, false, false},
		{"minion-vault-miniontemplate-viewer-role", false, false, true, true},
		{"minion-vault-vaultconnection-editor-role", false, false, false, false},
		{"minion-vault-vaultconnection-viewer-role", false, false, true, true},
	} {
		o := find(objs, "ClusterRole", tc.name)
		if o == nil {
			t.Errorf("the render has no ClusterRole %s", tc.name)
			continue
		}
		l := o.GetLabels()
		for label, want := range map[string]bool{aggAdmin: tc.admin, aggEdit: tc.edit, aggView: tc.view} {
			if got := l[label] == "true"; got != want {
				t.Errorf("ClusterRole %s: label %s set %v, want %v", tc.name, label, got, want)
			}
		}
		for _, r := range flatten(convert[rbacv1.ClusterRole](t, o).Rules) {
			if r.group != "minionvault.dev" {
				t.Errorf("ClusterRole %s grants %s outside minionvault.dev", tc.name, r)
			}
			if tc.read && r.verb != "get" && r.verb != "list" && r.verb != "watch" {
				t.Errorf("viewer ClusterRole %s grants %s", tc.name, r)
			}
		}
	}
}

// TestPermissions installs the RBAC objects for real and asks the API
// server what the manager's ServiceAccount may do: what it needs, and not
// the neighbouring permissions that least privilege leaves out.
func TestPermissions(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := testContext(t)
	installRBAC(t, c)

	user := "system:serviceaccount:" + namespace + ":" + serviceAccount
	allowed := func(a authorizationv1.ResourceAttributes) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &a,
		}}
		if err := c.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}
	res := func(verb, group, resource, sub, ns, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	for _, tc := range []struct {
		what string
		attr authorizationv1.ResourceAttributes
		want bool
	}{
		// kubectl auth can-i {get,list,watch} secrets -n <its namespace>
		{"read a Secret of a VaultConnection in its namespace", res("get", "", "secrets", "", namespace, "vault-token"), true},
		{"list Secrets in its namespace", res("list", "", "secrets", "", namespace, ""), true},
		{"watch Secrets in its namespace", res("watch", "", "secrets", "", namespace, ""), true},
		{"watch MinionBindings everywhere", res("watch", "minionvault.dev", "minionbindings", "", "", ""), true},
		{"patch a MinionBinding's status", res("patch", "minionvault.dev", "minionbindings", "status", "tenant-a", "web01"), true},
		{"record an event on a binding", res("create", "events.k8s.io", "events", "", "tenant-a", ""), true},
		{"request a token for its own ServiceAccount", res("create", "", "serviceaccounts", "token", namespace, serviceAccount), true},
		{"take the leader-election Lease", res("update", "coordination.k8s.io", "leases", "", namespace, "minion-vault-operator.minionvault.dev"), true},
		{"record a leader-election event", res("create", "", "events", "", namespace, ""), true},

		{"request a token for another ServiceAccount of its namespace", res("create", "", "serviceaccounts", "token", namespace, "default"), false},
		{"request a token for a ServiceAccount elsewhere", res("create", "", "serviceaccounts", "token", "kube-system", "default"), false},
		{"take a Lease of another namespace", res("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-controller-manager"), false},
		// kubectl auth can-i {get,list,watch} secrets -A, and -n tenant-a
		{"list Secrets cluster-wide", res("list", "", "secrets", "", "", ""), false},
		{"watch Secrets cluster-wide", res("watch", "", "secrets", "", "", ""), false},
		{"get a Secret in any namespace", res("get", "", "secrets", "", "", "vault-token"), false},
		{"read a Secret in another namespace", res("get", "", "secrets", "", "tenant-a", "vault-token"), false},
		{"list Secrets in another namespace", res("list", "", "secrets", "", "tenant-a", ""), false},
		{"watch Secrets in another namespace", res("watch", "", "secrets", "", "kube-system", ""), false},
		{"write a Secret", res("update", "", "secrets", "", "tenant-a", "vault-token"), false},
		{"write a Secret in its namespace", res("update", "", "secrets", "", namespace, "vault-token"), false},
		{"create a Secret", res("create", "", "secrets", "", namespace, ""), false},
		{"delete a MinionBinding", res("delete", "minionvault.dev", "minionbindings", "", "tenant-a", "web01"), false},
		{"create a MinionTemplate", res("create", "minionvault.dev", "miniontemplates", "", "", ""), false},
		{"edit a VaultConnection", res("patch", "minionvault.dev", "vaultconnections", "", "", "vault"), false},
		{"read Pods", res("list", "", "pods", "", "", ""), false},
	} {
		got, err := allowed(tc.attr)
		// The API server's authorizer learns new RBAC objects from its
		// informers: a grant just applied may take a moment to count (the
		// grants come first in the table, so the refusals are checked
		// against settled RBAC).
		for deadline := time.Now().Add(10 * time.Second); err == nil && tc.want && !got && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			got, err = allowed(tc.attr)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if got != tc.want {
			t.Errorf("the manager may %s: %v, want %v", tc.what, got, tc.want)
		}
	}
}

// installRBAC applies the ServiceAccount, Roles and bindings of config/default
// for real (server-side apply: idempotent across tests).
func installRBAC(t *testing.T, c client.Client) {
	t.Helper()
	objs := render(t)
	ensureNamespace(t, c, objs)
	ctx := testContext(t)
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner)); err != nil {
				t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
}
