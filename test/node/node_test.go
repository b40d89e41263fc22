//go:build integration

// Package node installs the operator for real: on a single-node cluster
// that internal/localenv starts (containerd, runc, CNI, the kubelet,
// kube-controller-manager, kube-scheduler and kube-proxy around the test
// API server), from `make image`'s image and `make build-installer`'s
// dist/install.yaml, applied as they are. The operator then runs as a Pod,
// with the securityContext, probes, ServiceAccount token and leader
// election of the installation, against a Vault dev server that the Pod
// reaches on the node's address.
//
// Run it with `make integration` (which builds the image and
// dist/install.yaml first), or alone:
//
//	make node-tools image build-installer
//	go test -tags integration -count=1 -v ./test/node
//
// MINIONVAULT_IMAGE_TAR and MINIONVAULT_INSTALL_YAML point at another image
// tar and installation (they must name the same image).
package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{Node: true, NoCRDs: true}) }

// What dist/install.yaml installs.
const (
	namespace      = "minion-vault-system"
	deploymentName = "minion-vault-controller-manager"
	serviceAccount = "minion-vault-controller-manager"
	metricsService = "minion-vault-controller-manager-metrics"
	leaseName      = "minion-vault-operator.minionvault.dev"
)

// artifacts are the image tar and the installation the test installs.
func artifacts(t *testing.T) (imageTar, installYAML string) {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	imageTar = os.Getenv("MINIONVAULT_IMAGE_TAR")
	if imageTar == "" {
		imageTar = filepath.Join(root, "bin", "image", "minion-vault-operator.tar")
	}
	installYAML = os.Getenv("MINIONVAULT_INSTALL_YAML")
	if installYAML == "" {
		installYAML = filepath.Join(root, "dist", "install.yaml")
	}
	for _, f := range []string{imageTar, installYAML} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v: run `make image build-installer` (the same IMG for both) first", err)
		}
	}
	return imageTar, installYAML
}

// decodeManifests reads the objects of a multi-document YAML file.
func decodeManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) != 0 {
			objs = append(objs, u)
		}
	}
}

// kubectl runs the tools folder's kubectl as a cluster admin.
type kubectl struct {
	bin, kubeconfig string
}

func newKubectl(t *testing.T, env *testenv.Env) *kubectl {
	t.Helper()
	dir := os.Getenv(testenv.EnvToolsDir)
	if dir == "" {
		root, err := testenv.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "bin")
	}
	u, err := env.Kubernetes.AddUser(envtest.User{Name: "node-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubectl{bin: filepath.Join(dir, "kubectl"), kubeconfig: kc}
}

func (k *kubectl) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// eventually polls f every 250 ms until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// operatorPods are the manager's Pods, newest first.
func operatorPods(ctx context.Context, c client.Client) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		return nil, err
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[j].CreationTimestamp.Before(&pods.Items[i].CreationTimestamp)
	})
	return pods.Items, nil
}

// readyPod is the one running, Ready operator Pod that is not being deleted.
func readyPod(ctx context.Context, c client.Client) (*corev1.Pod, error) {
	pods, err := operatorPods(ctx, c)
	if err != nil {
		return nil, err
	}
	var ready []corev1.Pod
	var states []string
	for _, p := range pods {
		ok := p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
		isReady := false
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				isReady = true
			}
		}
		if ok && isReady {
			ready = append(ready, p)
		}
		states = append(states, fmt.Sprintf("%s %s ready=%v deleting=%v", p.Name, p.Status.Phase, isReady, p.DeletionTimestamp != nil))
	}
	if len(ready) != 1 {
		return nil, fmt.Errorf("%d ready operator pods (%s)", len(ready), strings.Join(states, "; "))
	}
	return &ready[0], nil
}

// deploymentAvailable is nil once the Deployment has rolled out completely:
// its newest ReplicaSet's one replica is updated, ready and available.
func deploymentAvailable(ctx context.Context, c client.Client) error {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deploymentName}, d); err != nil {
		return err
	}
	available := false
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
			available = true
		}
	}
	s := d.Status
	if !available || s.ObservedGeneration < d.Generation || s.UpdatedReplicas != 1 || s.ReadyReplicas != 1 || s.AvailableReplicas != 1 || s.Replicas != 1 {
		return fmt.Errorf("deployment status %+v", s)
	}
	return nil
}

// podReport describes the operator Pods for a failure message: status,
// events, and the last lines of their containers' logs on the node.
func podReport(ctx context.Context, env *testenv.Env) string {
	var b strings.Builder
	pods, _ := operatorPods(ctx, env.Client)
	for _, p := range pods {
		st, _ := json.MarshalIndent(p.Status, "", "  ")
		fmt.Fprintf(&b, "\n--- pod %s status ---\n%s", p.Name, st)
		var events corev1.EventList
		_ = env.Client.List(ctx, &events, client.InNamespace(namespace))
		for _, e := range events.Items {
			if e.InvolvedObject.Name == p.Name {
				fmt.Fprintf(&b, "\nevent: %s %s: %s", e.Type, e.Reason, e.Message)
			}
		}
	}
	logs, _ := filepath.Glob(filepath.Join(env.Node.PodLogsDir, namespace+"_*", "*", "*.log"))
	for _, l := range logs {
		fmt.Fprintf(&b, "\n--- %s ---\n%s", strings.TrimPrefix(l, env.Node.PodLogsDir+"/"), tail(l, 30))
	}
	fmt.Fprintf(&b, "\n--- kubelet.log ---\n%s", tail(filepath.Join(env.Node.Dir, "kubelet.log"), 20))
	return b.String()
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// httpGet fetches url from the test process (the host, outside the Pods).
func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}

// metricValue sums the samples of a metric whose name and labels start
// with prefix, such as `minionvault_vault_logins_total{method="kubernetes"`.
func metricValue(text, prefix string) (float64, bool) {
	var sum float64
	found := false
	s := bufio.NewScanner(strings.NewReader(text))
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}
