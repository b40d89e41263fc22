//go:build integration

// Package chart tests the Helm chart (charts/minion-vault-operator) with the
// helm that `make integration-tools` builds (hack/tools/helm): helm lint,
// and helm template compared object by object, as parsed YAML, with
// dist/install.yaml, so that the chart installs what `make build-installer`
// installs; then what each value changes. test/node installs and upgrades
// it on a real node.
//
// Run it with `make integration`, or alone:
//
//	make bin/helm bin/kubectl build-installer
//	go test -tags integration -count=1 ./test/chart
//
// MINIONVAULT_INSTALL_YAML points at another dist/install.yaml.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

const (
	namespace      = "minion-vault-system"
	deploymentName = "minion-vault-controller-manager"
	release        = "minion-vault"
)

// paths are the tools and files the tests use.
type paths struct {
	helm, kubectl, root, chart, installYAML string
}

func setup(t *testing.T) paths {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := os.Getenv(testenv.EnvToolsDir)
	if tools == "" {
		tools = filepath.Join(root, "bin")
	}
	p := paths{
		helm:        filepath.Join(tools, "helm"),
		kubectl:     filepath.Join(tools, "kubectl"),
		root:        root,
		chart:       filepath.Join(root, "charts", "minion-vault-operator"),
		installYAML: os.Getenv("MINIONVAULT_INSTALL_YAML"),
	}
	if p.installYAML == "" {
		p.installYAML = filepath.Join(root, "dist", "install.yaml")
	}
	for _, f := range []string{p.helm, p.kubectl, p.installYAML} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v: run `make integration-tools` (or make bin/helm bin/kubectl build-installer) first", err)
		}
	}
	return p
}

func (p paths) run(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	out, err := p.try(bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (p paths) try(bin string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = p.root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// template is `helm template` of the chart with these --set values.
func (p paths) template(t *testing.T, set ...string) []byte {
	t.Helper()
	out, err := p.tryTemplate(set...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (p paths) tryTemplate(set ...string) ([]byte, error) {
	args := []string{"template", release, p.chart}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return p.try(p.helm, args...)
}

// object is one parsed manifest.
type object = map[string]any

// decode parses a multi-document YAML stream into objects by key.
func decode(data []byte) (map[string]object, error) {
	objs := map[string]object{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var o object
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(o) == 0 {
			continue
		}
		k := key(o)
		if _, dup := objs[k]; dup {
			return nil, fmt.Errorf("%s twice", k)
		}
		objs[k] = o
	}
}

func key(o object) string {
	meta, _ := o["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	return fmt.Sprintf("%v %v %s/%s", o["apiVersion"], o["kind"], ns, name)
}

// compare lists every difference between two sets of objects: objects only
// in one, and for objects in both the paths where they differ.
func compare(want, got map[string]object) []string {
	var diffs []string
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			diffs = append(diffs, "missing: "+k)
			continue
		}
		for _, d := range diff("", w, g) {
			diffs = append(diffs, k+": "+d)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, "extra: "+k)
		}
	}
	sort.Strings(diffs)
	return diffs
}

// diff walks two parsed values and names the paths where they differ.
func diff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		var out []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing (want %v)", path, k, short(wv)))
				continue
			}
			out = append(out, diff(path+"."+k, wv, gv)...)
		}
		for k, gv := range g {
			if _, ok := w[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: extra %v", path, k, short(gv)))
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []string
		for i := range w {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []string{fmt.Sprintf("%s: want %v, got %v", path, short(want), short(got))}
}

func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// imageValues are the --set values that name install.yaml's image, the one
// thing `make build-installer IMG=...` changes in config/default's output.
func imageValues(t *testing.T, install map[string]object) []string {
	t.Helper()
	ref := ""
	for _, o := range install {
		if o["kind"] == "Deployment" {
			ref = containerField(o, "manager", "image")
		}
	}
	if ref == "" {
		t.Fatal("install.yaml has no Deployment with a manager container")
	}
	repo, tag, digest := splitImage(ref)
	return []string{"image.repository=" + repo, "image.tag=" + tag, "image.digest=" + digest}
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

// container is the named container of a Deployment.
func container(o object, name string) map[string]any {
	spec, _ := o["spec"].(map[string]any)
	tpl, _ := spec["template"].(map[string]any)
	pod, _ := tpl["spec"].(map[string]any)
	list, _ := pod["containers"].([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	return nil
}

func containerField(o object, name, field string) string {
	s, _ := container(o, name)[field].(string)
	return s
}

func mustDecode(t *testing.T, what string, data []byte) map[string]object {
	t.Helper()
	objs, err := decode(data)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return objs
}

func reportDiffs(t *testing.T, what string, diffs []string) {
	t.Helper()
	if len(diffs) != 0 {
		t.Errorf("%s: %d differences:\n%s", what, len(diffs), strings.Join(diffs, "\n"))
	}
}

// TestLint: helm lint, strict, with the default values and with every
// optional part on.
func TestLint(t *testing.T) {
	p := setup(t)
	out := p.run(t, p.helm, "lint", "--strict", p.chart)
	t.Logf("helm lint --strict:\n%s", out)
	out = p.run(t, p.helm, "lint", "--strict", p.chart,
		"--set", "metrics.serviceMonitor.enabled=true",
		"--set", "vaultConnection.create=true,vaultConnection.address=https://vault.example.com:8200,vaultConnection.auth.token.value=s.x",
		"--set", "crds.keep=false")
	t.Logf("helm lint --strict, everything on:\n%s", out)
}

// TestTemplateMatchesInstallYAML is the chart's promise: with default
// values it renders the objects of dist/install.yaml, field by field. The
// image is the one value `make build-installer IMG=...` sets, so the chart
// gets install.yaml's image; and with no value at all it renders what
// config/default renders with its own image (kubectl kustomize).
func TestTemplateMatchesInstallYAML(t *testing.T) {
	p := setup(t)
	data, err := os.ReadFile(p.installYAML)
	if err != nil {
		t.Fatal(err)
	}
	install := mustDecode(t, p.installYAML, data)
	if len(install) < 10 {
		t.Fatalf("%s holds %d objects", p.installYAML, len(install))
	}
	chart := mustDecode(t, "helm template", p.template(t, imageValues(t, install)...))
	reportDiffs(t, "helm template (install.yaml's image) against "+p.installYAML, compare(install, chart))
	t.Logf("helm template with install.yaml's image: %d objects, %d in %s", len(chart), len(install), p.installYAML)

	kustomized := mustDecode(t, "kubectl kustomize config/default", p.run(t, p.kubectl, "kustomize", "config/default"))
	defaults := mustDecode(t, "helm template", p.template(t))
	reportDiffs(t, "helm template (default values) against kubectl kustomize config/default", compare(kustomized, defaults))
	t.Logf("helm template with default values: %d objects, %d in kubectl kustomize config/default", len(defaults), len(kustomized))
}

// TestCompareFindsDifferences: the comparison above fails when one field,
// one object or one list item differs (a comparison that passes on
// anything would prove nothing).
func TestCompareFindsDifferences(t *testing.T) {
	p := setup(t)
	base := p.template(t)
	mutations := map[string]func(map[string]object){
		"a changed field": func(objs map[string]object) {
			for _, o := range objs {
				if o["kind"] == "Deployment" {
					container(o, "manager")["image"] = "example.com/other:1"
				}
			}
		},
		"a removed object": func(objs map[string]object) {
			for k, o := range objs {
				if o["kind"] == "Service" {
					delete(objs, k)
				}
			}
		},
		"an added label": func(objs map[string]object) {
			for _, o := range objs {
				if o["kind"] == "Namespace" {
					o["metadata"].(map[string]any)["labels"].(map[string]any)["extra"] = "x"
				}
			}
		},
		"a dropped argument": func(objs map[string]object) {
			for _, o := range objs {
				if o["kind"] == "Deployment" {
					c := container(o, "manager")
					c["args"] = c["args"].([]any)[1:]
				}
			}
		},
	}
	for name, mutate := range mutations {
		want := mustDecode(t, "helm template", base)
		got := mustDecode(t, "helm template", base)
		if d := compare(want, got); len(d) != 0 {
			t.Fatalf("the same output compares unequal: %v", d)
		}
		mutate(got)
		d := compare(want, got)
		if len(d) == 0 {
			t.Errorf("%s: no difference found", name)
		}
		t.Logf("%s: %v", name, d)
	}
}

// TestValues: what each value changes, and the values the chart refuses.
func TestValues(t *testing.T) {
	p := setup(t)
	defaults := mustDecode(t, "helm template", p.template(t))
	deployment := func(objs map[string]object) object {
		t.Helper()
		d, ok := objs["apps/v1 Deployment "+namespace+"/"+deploymentName]
		if !ok {
			t.Fatalf("no Deployment %s/%s", namespace, deploymentName)
		}
		return d
	}
	args := func(o object) []string {
		var out []string
		for _, a := range container(o, "manager")["args"].([]any) {
			out = append(out, a.(string))
		}
		return out
	}
	// only: the objects differ from the defaults' exactly at these paths.
	only := func(t *testing.T, got map[string]object, want ...string) {
		t.Helper()
		d := compare(defaults, got)
		if strings.Join(d, "\n") != strings.Join(want, "\n") {
			t.Errorf("differences from the defaults:\n%s\nwant:\n%s", strings.Join(d, "\n"), strings.Join(want, "\n"))
		}
	}
	dep := "apps/v1 Deployment " + namespace + "/" + deploymentName + ": "
	// connection is the VaultConnection name renders and, when secret is
	// not empty, the Secret of its credential: no other object is added
	// to the defaults.
	connection := func(t *testing.T, got map[string]object, name, secret string) (vc, sec object) {
		t.Helper()
		vc, added := got["minionvault.dev/v1alpha1 VaultConnection /"+name], 1
		if secret != "" {
			sec, added = got["v1 Secret "+namespace+"/"+secret], 2
		}
		if vc == nil || (secret != "" && sec == nil) || len(got) != len(defaults)+added {
			t.Fatalf("want the defaults, VaultConnection %s and Secret %q: %v", name, secret, compare(defaults, got))
		}
		return vc, sec
	}
	auth := func(vc object) map[string]any { return vc["spec"].(map[string]any)["auth"].(map[string]any) }
	stringData := func(sec object) map[string]any { return sec["stringData"].(map[string]any) }

	t.Run("image digest and pull policy", func(t *testing.T) {
		got := mustDecode(t, "helm template", p.template(t, "image.repository=registry.example/mvo", "image.tag=v1",
			"image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "image.pullPolicy=IfNotPresent"))
		only(t, got,
			dep+".spec.template.spec.containers[0].image: want ghcr.io/minionvault/minion-vault-operator:latest, got registry.example/mvo@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			dep+".spec.template.spec.containers[0].imagePullPolicy: extra IfNotPresent")
	})

	t.Run("a tag of digits alone", func(t *testing.T) {
		// --set reads 7874208 as a number: a short commit hash can be one.
		got := mustDecode(t, "helm template", p.template(t, "image.repository=registry.example/mvo", "image.tag=7874208"))
		only(t, got, dep+".spec.template.spec.containers[0].image: want ghcr.io/minionvault/minion-vault-operator:latest, got registry.example/mvo:7874208")
	})

	t.Run("a tag of digits alone in a values file or reused by an upgrade", func(t *testing.T) {
		// A values file, and the values helm upgrade --reuse-values takes
		// from the release (JSON), give the number as a float64, which
		// toString wrote 5.933801e+06: CI's upgrade of a release
		// installed with --set image.tag=5933801 stalled on an invalid
		// image name.
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte("image:\n  repository: registry.example/mvo\n  tag: 5933801\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := p.try(p.helm, "template", release, p.chart, "-f", values)
		if err != nil {
			t.Fatal(err)
		}
		only(t, mustDecode(t, "helm template", out), dep+".spec.template.spec.containers[0].image: want ghcr.io/minionvault/minion-vault-operator:latest, got registry.example/mvo:5933801")
		// A tag that is a number with a fraction stays as written.
		out, err = p.try(p.helm, "template", release, p.chart, "--set", "image.repository=registry.example/mvo", "--set-json", "image.tag=1.5")
		if err != nil {
			t.Fatal(err)
		}
		only(t, mustDecode(t, "helm template", out), dep+".spec.template.spec.containers[0].image: want ghcr.io/minionvault/minion-vault-operator:latest, got registry.example/mvo:1.5")
	})

	t.Run("replicas, resources, leader election, extra args", func(t *testing.T) {
		got := mustDecode(t, "helm template", p.template(t, "replicaCount=2", "resources.limits.memory=1Gi",
			"leaderElection.leaseDuration=30s", "leaderElection.retryPeriod=2s", "extraArgs={--concurrency=8,--cluster-id=prod}"))
		d := deployment(got)
		if n := d["spec"].(map[string]any)["replicas"]; n != float64(2) {
			t.Errorf("replicas %v", n)
		}
		want := []string{"operator", "--leader-elect", "--leader-election-lease-duration=30s", "--leader-election-retry-period=2s",
			"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--service-account=$(POD_NAMESPACE)/$(SERVICE_ACCOUNT)",
			"--secret-namespace=$(POD_NAMESPACE)", "--concurrency=8", "--cluster-id=prod"}
		if a := args(d); !reflect.DeepEqual(a, want) {
			t.Errorf("args %q, want %q", a, want)
		}
		limits := container(d, "manager")["resources"].(map[string]any)["limits"].(map[string]any)
		if limits["memory"] != "1Gi" || limits["cpu"] != "1" {
			t.Errorf("limits %v", limits)
		}
		got = mustDecode(t, "helm template", p.template(t, "leaderElection.enabled=false"))
		if a := args(deployment(got)); strings.Contains(strings.Join(a, " "), "leader") {
			t.Errorf("leader election off, args %q", a)
		}
	})

	t.Run("namespace", func(t *testing.T) {
		got := mustDecode(t, "helm template", p.template(t, "namespace.name=ops-vault"))
		for k, o := range got {
			if strings.Contains(k, namespace) {
				t.Errorf("%s is still in %s", k, namespace)
			}
			subjects, _ := o["subjects"].([]any)
			for _, s := range subjects {
				if ns := s.(map[string]any)["namespace"]; ns != "ops-vault" {
					t.Errorf("%s: subject in %v", k, ns)
				}
			}
		}
		if _, ok := got["v1 Namespace /ops-vault"]; !ok {
			t.Error("no Namespace ops-vault")
		}
		if len(got) != len(defaults) {
			t.Errorf("%d objects, the defaults %d", len(got), len(defaults))
		}
		got = mustDecode(t, "helm template", p.template(t, "namespace.create=false"))
		only(t, got, "missing: v1 Namespace /"+namespace)
	})

	t.Run("CRDs", func(t *testing.T) {
		got := mustDecode(t, "helm template", p.template(t, "crds.install=false"))
		only(t, got,
			"missing: apiextensions.k8s.io/v1 CustomResourceDefinition /minionbindings.minionvault.dev",
			"missing: apiextensions.k8s.io/v1 CustomResourceDefinition /miniontemplates.minionvault.dev",
			"missing: apiextensions.k8s.io/v1 CustomResourceDefinition /vaultconnections.minionvault.dev")
		got = mustDecode(t, "helm template", p.template(t, "crds.keep=false"))
		var want []string
		for _, n := range []string{"minionbindings", "miniontemplates", "vaultconnections"} {
			want = append(want, "apiextensions.k8s.io/v1 CustomResourceDefinition /"+n+".minionvault.dev: .metadata.annotations.helm.sh/resource-policy: missing (want keep)")
		}
		only(t, got, want...)
	})

	t.Run("pod placement and metadata", func(t *testing.T) {
		got := mustDecode(t, "helm template", p.template(t, "tolerations[0].operator=Exists", "podAnnotations.a=b",
			"podLabels.team=salt", "priorityClassName=system-cluster-critical", "affinity.nodeAffinity.x=y"))
		only(t, got,
			dep+".spec.template.metadata.annotations.a: extra b",
			dep+".spec.template.metadata.labels.team: extra salt",
			dep+".spec.template.spec.affinity: extra map[nodeAffinity:map[x:y]]",
			dep+".spec.template.spec.priorityClassName: extra system-cluster-critical",
			dep+".spec.template.spec.tolerations: extra [map[operator:Exists]]")
	})

	t.Run("metrics Service and ServiceMonitor", func(t *testing.T) {
		got := mustDecode(t, "helm template", p.template(t, "metrics.serviceMonitor.enabled=true",
			"metrics.serviceMonitor.labels.release=prom", "metrics.serviceMonitor.interval=30s"))
		sm, ok := got["monitoring.coreos.com/v1 ServiceMonitor "+namespace+"/minion-vault-controller-manager-metrics"]
		if !ok {
			t.Fatalf("no ServiceMonitor: %v", compare(defaults, got))
		}
		if len(got) != len(defaults)+1 {
			t.Errorf("%d objects, want the defaults' %d and the ServiceMonitor", len(got), len(defaults))
		}
		spec := sm["spec"].(map[string]any)
		ep := spec["endpoints"].([]any)[0].(map[string]any)
		sel := spec["selector"].(map[string]any)["matchLabels"].(map[string]any)
		svc := defaults["v1 Service "+namespace+"/minion-vault-controller-manager-metrics"]
		svcLabels := svc["metadata"].(map[string]any)["labels"].(map[string]any)
		for k, v := range sel {
			if svcLabels[k] != v {
				t.Errorf("the ServiceMonitor selects %s=%v, the Service has %v", k, v, svcLabels[k])
			}
		}
		if ep["port"] != "http-metrics" || ep["interval"] != "30s" ||
			sm["metadata"].(map[string]any)["labels"].(map[string]any)["release"] != "prom" {
			t.Errorf("ServiceMonitor %v does not select the metrics Service %v", sm, svc["metadata"])
		}
		got = mustDecode(t, "helm template", p.template(t, "metrics.service.enabled=false"))
		only(t, got, "missing: v1 Service "+namespace+"/minion-vault-controller-manager-metrics")
		if _, err := p.tryTemplate("metrics.service.enabled=false", "metrics.serviceMonitor.enabled=true"); err == nil ||
			!strings.Contains(err.Error(), "needs metrics.service.enabled") {
			t.Errorf("a ServiceMonitor without its Service: %v", err)
		}
	})

	t.Run("VaultConnection with a token", func(t *testing.T) {
		got := mustDecode(t, "helm template", p.template(t, "vaultConnection.create=true",
			"vaultConnection.address=https://vault.example.com:8200", "vaultConnection.auth.token.value=hvs.secret",
			"vaultConnection.tls.caSecretName=vault-ca", "vaultConnection.timeout=10s"))
		vc, secret := connection(t, got, "vault", "vault-vault-token")
		if v := stringData(secret)["token"]; v != "hvs.secret" {
			t.Errorf("Secret's token %v", v)
		}
		spec := vc["spec"].(map[string]any)
		want := map[string]any{
			"address": "https://vault.example.com:8200",
			"timeout": "10s",
			"tls":     map[string]any{"caSecretRef": map[string]any{"name": "vault-ca", "namespace": namespace}},
			"auth": map[string]any{"token": map[string]any{"secretRef": map[string]any{
				"name": "vault-vault-token", "namespace": namespace, "key": "token"}}},
		}
		if !reflect.DeepEqual(spec, want) {
			t.Errorf("VaultConnection spec %v, want %v", spec, want)
		}
		got = mustDecode(t, "helm template", p.template(t, "vaultConnection.create=true",
			"vaultConnection.address=https://vault.example.com:8200", "vaultConnection.auth.token.existingSecret=my-token"))
		if _, ok := got["v1 Secret "+namespace+"/vault-vault-token"]; ok {
			t.Error("a Secret beside existingSecret")
		}
		vc, _ = connection(t, got, "vault", "")
		ref := auth(vc)["token"].(map[string]any)["secretRef"].(map[string]any)
		if ref["name"] != "my-token" {
			t.Errorf("secretRef %v", ref)
		}
	})

	t.Run("VaultConnection with kubernetes auth", func(t *testing.T) {
		got := mustDecode(t, "helm template", p.template(t, "vaultConnection.create=true", "vaultConnection.name=vault-k8s",
			"vaultConnection.address=http://10.0.0.1:8200", "vaultConnection.auth.method=kubernetes",
			"vaultConnection.auth.kubernetes.role=operator", "vaultConnection.auth.kubernetes.audiences={vault}"))
		vc, _ := connection(t, got, "vault-k8s", "")
		// A hook: created once the release's CRDs are there (test/node
		// installs it so on a new cluster).
		if h := vc["metadata"].(map[string]any)["annotations"].(map[string]any)["helm.sh/hook"]; h != "post-install,post-upgrade" {
			t.Errorf("helm.sh/hook %v", h)
		}
		want := map[string]any{"kubernetes": map[string]any{"role": "operator", "audiences": []any{"vault"}}}
		if a := auth(vc); !reflect.DeepEqual(a, want) {
			t.Errorf("auth %v, want %v", a, want)
		}
	})

	t.Run("VaultConnection with AppRole auth", func(t *testing.T) {
		got := mustDecode(t, "helm template", p.template(t, "vaultConnection.create=true", "vaultConnection.name=vault-approle",
			"vaultConnection.address=https://vault.example.com:8200", "vaultConnection.auth.method=appRole",
			"vaultConnection.auth.appRole.roleID=0b4c5e9e-role", "vaultConnection.auth.appRole.mount=salt/approle",
			"vaultConnection.auth.appRole.secretID.value=s3cret-id"))
		vc, secret := connection(t, got, "vault-approle", "vault-approle-vault-secret-id")
		if v := stringData(secret)["secret-id"]; v != "s3cret-id" {
			t.Errorf("Secret's secret ID %v", v)
		}
		want := map[string]any{"appRole": map[string]any{"roleID": "0b4c5e9e-role", "mount": "salt/approle",
			"secretIDSecretRef": map[string]any{"name": "vault-approle-vault-secret-id", "namespace": namespace, "key": "secret-id"}}}
		if a := auth(vc); !reflect.DeepEqual(a, want) {
			t.Errorf("auth %v, want %v", a, want)
		}
		// An existing Secret, under a key of its own: no Secret from the chart.
		got = mustDecode(t, "helm template", p.template(t, "vaultConnection.create=true",
			"vaultConnection.address=https://vault.example.com:8200", "vaultConnection.auth.method=appRole",
			"vaultConnection.auth.appRole.roleID=0b4c5e9e-role", "vaultConnection.auth.appRole.secretID.existingSecret=operator-approle",
			"vaultConnection.auth.appRole.secretID.key=id"))
		vc, _ = connection(t, got, "vault", "")
		want = map[string]any{"appRole": map[string]any{"roleID": "0b4c5e9e-role",
			"secretIDSecretRef": map[string]any{"name": "operator-approle", "namespace": namespace, "key": "id"}}}
		if a := auth(vc); !reflect.DeepEqual(a, want) {
			t.Errorf("auth %v, want %v", a, want)
		}
		// A role ID and a secret ID of digits alone, from a values file
		// (float64s, as helm upgrade --reuse-values gives them), as written.
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte("vaultConnection:\n  create: true\n  address: https://vault.example.com:8200\n"+
			"  auth:\n    method: appRole\n    appRole:\n      roleID: 5933801\n      secretID:\n        value: 12345678901\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := p.try(p.helm, "template", release, p.chart, "-f", values)
		if err != nil {
			t.Fatal(err)
		}
		vc, secret = connection(t, mustDecode(t, "helm template", out), "vault", "vault-vault-secret-id")
		if id := auth(vc)["appRole"].(map[string]any)["roleID"]; id != "5933801" {
			t.Errorf("roleID %#v, want \"5933801\"", id)
		}
		if v := stringData(secret)["secret-id"]; v != "12345678901" {
			t.Errorf("secret ID %#v, want \"12345678901\"", v)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct {
			set  []string
			want string
		}{
			{[]string{"vaultConnection.create=true"}, "vaultConnection.address must be set"},
			{[]string{"vaultConnection.create=true", "vaultConnection.address=https://v:8200"}, "token.value or .existingSecret"},
			{[]string{"vaultConnection.create=true", "vaultConnection.address=https://v:8200", "vaultConnection.auth.method=kubernetes"}, "kubernetes.role must be set"},
			{[]string{"vaultConnection.create=true", "vaultConnection.address=https://v:8200", "vaultConnection.auth.method=appRole",
				"vaultConnection.auth.appRole.secretID.value=s"}, "appRole.roleID must be set"},
			{[]string{"vaultConnection.create=true", "vaultConnection.address=https://v:8200", "vaultConnection.auth.method=appRole",
				"vaultConnection.auth.appRole.roleID=r"}, "secretID.value or .existingSecret"},
			{[]string{"vaultConnection.create=true", "vaultConnection.address=https://v:8200", "vaultConnection.auth.method=ldap"}, "must be token, kubernetes or appRole"},
			{[]string{"image.tag=", "image.digest="}, "image.tag or image.digest"},
		} {
			_, err := p.tryTemplate(c.set...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %v, want an error with %q", c.set, err, c.want)
			}
		}
	})
}
