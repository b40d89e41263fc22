package devenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/config/samples"
)

func TestLoadManifestsOfTheBuiltInSamples(t *testing.T) {
	objs, err := LoadManifests(samples.FS)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, o := range objs {
		refs = append(refs, o.Ref())
	}
	// kustomization.yaml's order, kinds ranked: connection, template, bindings.
	want := "VaultConnection vault, MinionTemplate salt-minions, MinionBinding default/web01, MinionBinding default/db01, MinionBinding default/build01"
	if got := strings.Join(refs, ", "); got != want {
		t.Fatalf("objects:\n got %s\nwant %s", got, want)
	}
	// Integers stay integers (the API server's schema wants an integer).
	n, ok, _ := unstructured.NestedInt64(objs[1].Object, "spec", "appRole", "tokenNumUses")
	if !ok || n != 10 {
		t.Fatalf("tokenNumUses = %v %v", n, ok)
	}
	secrets, other := TokenSecrets(objs)
	if len(other) != 0 || len(secrets) != 1 || secrets[0] != (TokenSecret{Namespace: "minion-vault-system", Name: "vault-token", Key: "token"}) {
		t.Fatalf("TokenSecrets = %+v, %v", secrets, other)
	}
}

func TestLoadManifestsWithoutKustomization(t *testing.T) {
	fsys := fstest.MapFS{
		"b.yaml":             {Data: []byte("apiVersion: minionvault.dev/v1alpha1\nkind: MinionBinding\nmetadata: {name: b}\nspec: {minionID: b}\n---\n# only a comment\n")},
		"a.yml":              {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n---\napiVersion: minionvault.dev/v1alpha1\nkind: VaultConnection\nmetadata: {name: v}\n")},
		"README.md":          {Data: []byte("not a manifest")},
		"sub/c.yaml":         {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")},
		"notes/ignored.yaml": {Data: []byte("garbage: [")},
	}
	objs, err := LoadManifests(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, o := range objs {
		refs = append(refs, o.Ref()+"@"+o.File)
	}
	want := "ConfigMap x/a@a.yml, VaultConnection v@a.yml, MinionBinding default/b@b.yaml"
	if got := strings.Join(refs, ", "); got != want {
		t.Fatalf("objects:\n got %s\nwant %s", got, want)
	}

	if _, err := LoadManifests(fstest.MapFS{"x.yaml": {Data: []byte("kind: Thing\nmetadata: {name: a}\n")}}); err == nil {
		t.Fatal("a folder without one manifest loaded")
	}
	if _, err := LoadManifests(fstest.MapFS{"x.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")}}); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("nameless object: %v", err)
	}
	_, err = LoadManifests(fstest.MapFS{"kustomization.yaml": {Data: []byte("resources: [../base]\n")}})
	if err == nil || !strings.Contains(err.Error(), "kubectl apply -k") {
		t.Fatalf("remote kustomization resource: %v", err)
	}
}

func TestRewriteVaultAddress(t *testing.T) {
	objs, err := LoadManifests(samples.FS)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := RewriteVaultAddress(objs, "http://127.0.0.1:41234")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(changed, ",") != "vault" {
		t.Fatalf("changed %v", changed)
	}
	vc := &v1alpha1.VaultConnection{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, vc); err != nil {
		t.Fatal(err)
	}
	if vc.Spec.Address != "http://127.0.0.1:41234" {
		t.Fatalf("address %q", vc.Spec.Address)
	}
	// The rest is as it was.
	if vc.Spec.Auth.Token == nil || vc.Spec.Auth.Token.SecretRef.Name != "vault-token" || vc.Spec.Timeout == nil || vc.Spec.Timeout.Duration.String() != "30s" {
		t.Fatalf("spec changed: %+v", vc.Spec)
	}
	for _, o := range objs[1:] {
		if _, found, _ := unstructured.NestedString(o.Object, "spec", "address"); found {
			t.Fatalf("%s got an address", o.Ref())
		}
	}
}

func TestWriteTable(t *testing.T) {
	meta := func(ns string) runtime.RawExtension {
		return runtime.RawExtension{Raw: []byte(`{"kind":"PartialObjectMetadata","metadata":{"name":"x","namespace":"` + ns + `"}}`)}
	}
	table := &metav1.Table{
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string"},
			{Name: "Minion", Type: "string"},
			{Name: "Ready", Type: "string"},
			{Name: "Status", Type: "string", Priority: 1},
			{Name: "Policies", Type: "string", Priority: 1},
			{Name: "Age", Type: "date"},
		},
		Rows: []metav1.TableRow{
			{Cells: []any{"build01", "build01", "True", "ok", `["saltstack/minions","salt_role_ci"]`, "5s"}, Object: meta("default")},
			{Cells: []any{"db01", "db01", nil, "", nil, "12m"}, Object: meta("salt")},
		},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, table, true, "Policies"); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE   NAME      MINION    READY    POLICIES                               AGE
default     build01   build01   True     ["saltstack/minions","salt_role_ci"]   5s
salt        db01      db01      <none>   <none>                                 12m
`
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteTable(&b, table, false); err != nil {
		t.Fatal(err)
	}
	if first := strings.SplitN(b.String(), "\n", 2)[0]; strings.Join(strings.Fields(first), " ") != "NAME MINION READY AGE" {
		t.Fatalf("header without namespace and wide columns: %q", first)
	}
}

func TestFormatCell(t *testing.T) {
	for in, want := range map[any]string{nil: "<none>", "x": "x", float64(3): "3", 2.5: "2.5", true: "true", int64(7): "7"} {
		if got := formatCell(in); got != want {
			t.Errorf("formatCell(%v) = %q, want %q", in, got, want)
		}
	}
}

func obj(t *testing.T, js string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(js)); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestReadiness(t *testing.T) {
	for _, tc := range []struct {
		name, js string
		ready    bool
		why      string
	}{
		{"no status", `{"apiVersion":"minionvault.dev/v1alpha1","kind":"MinionBinding","metadata":{"name":"a","generation":1}}`, false, "no Ready condition"},
		{"ready", `{"apiVersion":"v1","kind":"X","metadata":{"generation":2},"status":{"observedGeneration":2,"conditions":[{"type":"Ready","status":"True","observedGeneration":2}]}}`, true, ""},
		{"old generation", `{"apiVersion":"v1","kind":"X","metadata":{"generation":3},"status":{"observedGeneration":2,"conditions":[{"type":"Ready","status":"True","observedGeneration":2}]}}`, false, "generation 3 not observed yet"},
		{"stalled", `{"apiVersion":"v1","kind":"X","metadata":{"generation":1},"status":{"observedGeneration":1,"conditions":[
			{"type":"Ready","status":"False","reason":"PolicyNotAllowed","message":"policy root is not allowed"},
			{"type":"Stalled","status":"True","reason":"PolicyNotAllowed","message":"fix the template"}]}}`,
			false, "Ready=False (PolicyNotAllowed): policy root is not allowed; Stalled: Stalled=True (PolicyNotAllowed): fix the template"},
		{"reconciling", `{"apiVersion":"v1","kind":"X","metadata":{"generation":1},"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"Unknown","reason":"Reconciling"}]}}`, false, "Ready=Unknown (Reconciling)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready, why := Readiness(obj(t, tc.js))
			if ready != tc.ready || !strings.Contains(why, tc.why) {
				t.Fatalf("Readiness = %v, %q; want %v, %q", ready, why, tc.ready, tc.why)
			}
		})
	}
}

func binding(name string, docs []string, metadata map[string]string) *v1alpha1.MinionBinding {
	b := &v1alpha1.MinionBinding{}
	b.Name = name
	b.Status.PolicyDocuments = docs
	b.Status.Entity = &v1alpha1.EntityStatus{Metadata: metadata}
	return b
}

func TestPickBindingAndPolicy(t *testing.T) {
	web := binding("web01", []string{"saltstack/minions", "salt_role_web", "salt_role_db"}, map[string]string{"roles": "db,web", "roles__0": "db", "roles__1": "web"})
	db := binding("db01", []string{"saltstack/minions", "salt_role_db"}, map[string]string{"roles": "db", "roles__0": "db"})
	build := binding("build01", []string{"saltstack/minions", "salt_role_ci", "salt_role_web"}, map[string]string{"roles": "ci,web", "roles__0": "ci", "roles__1": "web"})
	all := []*v1alpha1.MinionBinding{db, web, build}
	if got := pickBinding(all); got != web {
		t.Fatalf("pickBinding = %s, want the first with the most roles__N: web01", got.Name)
	}
	managed := []string{"salt_role_ci", "salt_role_db", "salt_role_web", "saltstack/minions"}
	if got := pickPolicy(web, all, managed); got != "salt_role_db" {
		t.Fatalf("pickPolicy = %q, want salt_role_db (the first not every binding has)", got)
	}
	only := []*v1alpha1.MinionBinding{db}
	if got := pickPolicy(db, only, managed); got != "salt_role_db" {
		t.Fatalf("pickPolicy with one binding = %q", got)
	}
	if got := pickPolicy(web, all, nil); got != "" {
		t.Fatalf("pickPolicy without managed policies = %q", got)
	}
	if pickBinding(nil) != nil {
		t.Fatal("pickBinding(nil) is not nil")
	}
}

func TestSummary(t *testing.T) {
	objs, err := LoadManifests(samples.FS)
	if err != nil {
		t.Fatal(err)
	}
	want := "VaultConnection vault, MinionTemplate salt-minions and 3 MinionBindings"
	if got := summary(objs); got != want {
		t.Fatalf("summary = %q, want %q", got, want)
	}
}

func TestMissingToolsAndDisplay(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "etcd"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(MissingTools(dir), ","); got != "kube-apiserver,vault" {
		t.Fatalf("MissingTools = %s", got)
	}
	wd, _ := os.Getwd()
	if got := display(filepath.Join(wd, "x", "y")); got != filepath.Join("x", "y") {
		t.Fatalf("display below the working directory = %q", got)
	}
	if got := display(filepath.Join(wd, "kubeconfig")); got != "./kubeconfig" {
		t.Fatalf("display in the working directory = %q", got)
	}
	if got := display("/"); got != "/" {
		t.Fatalf("display elsewhere = %q", got)
	}
}

func TestIndentAndWriteKV(t *testing.T) {
	if got := indent("a\n\n  b\n", "> "); got != "> a\n\n>   b\n" {
		t.Fatalf("indent = %q", got)
	}
	var b bytes.Buffer
	writeKV(&b, "  ", map[string]string{"roles__1": "web", "roles": "db,web", "env": "prod"})
	want := "  env       prod\n  roles     db,web\n  roles__1  web\n"
	if b.String() != want {
		t.Fatalf("writeKV = %q, want %q", b.String(), want)
	}
}

func TestEmbeddedCRDs(t *testing.T) {
	crds, err := embeddedCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range crds {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "minionbindings.minionvault.dev,miniontemplates.minionvault.dev,vaultconnections.minionvault.dev" {
		t.Fatalf("CRDs %s", got)
	}
}

// The binary starts the servers through localenv and devenv: neither may
// link the testing package (its flags and init would come with it).
func TestTheBinaryDoesNotLinkTesting(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "github.com/minionvault/minion-vault-operator/cmd/minionvault")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" {
			t.Fatal("cmd/minionvault depends on the testing package: keep test helpers out of internal/localenv and internal/devenv")
		}
	}
	if !strings.Contains(string(out), "github.com/minionvault/minion-vault-operator/internal/localenv\n") {
		t.Fatal("cmd/minionvault does not use internal/localenv: is `minionvault dev` gone?")
	}
}
