package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// applyManifests converges a Vault: it plans, then makes the writes the
// plan prints, the templates' then the bindings', as the reconcilers would.
func applyManifests(t *testing.T, c vault.Client, in *planInput) *PlanResult {
	t.Helper()
	ctx := context.Background()
	p, err := buildPlan(ctx, c, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range p.Templates {
		if err := replay(ctx, c, tp.Changes); err != nil {
			t.Fatalf("template %s: %v", tp.Name, err)
		}
	}
	for _, b := range p.Bindings {
		if err := replay(ctx, c, b.Changes); err != nil {
			t.Fatalf("binding %s/%s: %v", b.Namespace, b.Name, err)
		}
	}
	return p
}

func converge(t *testing.T, fake *vaulttest.Fake, in *planInput) { applyManifests(t, fake, in) }

func samplesInput(t *testing.T, edit func(dir string)) *planInput {
	t.Helper()
	dir := copySamples(t)
	if edit != nil {
		edit(dir)
	}
	in, err := readPlanInput([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func replaceIn(t *testing.T, file, old, new string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func changesOf(p *PlanResult) []string {
	var out []string
	for _, t := range p.Templates {
		for _, c := range t.Changes {
			out = append(out, c.Action+" "+c.Path)
		}
	}
	for _, b := range p.Bindings {
		for _, c := range b.Changes {
			out = append(out, c.Action+" "+c.Path)
		}
	}
	return out
}

func TestPlanNewMinionsThenInSyncThenAnEdit(t *testing.T) {
	ctx := context.Background()
	fake := vaulttest.NewFake()
	fake.EnableAuth("salt-minions")

	// Empty Vault: everything is created, nothing written.
	p, err := buildPlan(ctx, vault.ReadOnly(fake), samplesInput(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if fake.Writes() != 0 {
		t.Fatalf("a plan wrote %d times to Vault", fake.Writes())
	}
	got := changesOf(p)
	for _, want := range []string{
		"create sys/policies/acl/salt_role_web", "create sys/policies/acl/saltstack/minions",
		"create auth/salt-minions/role/web01", "create identity/entity/name/salt_minion_web01", "create identity/entity-alias",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("plan lacks %q: %q", want, got)
		}
	}
	if s := p.Summary; s.Update != 0 || s.Delete != 0 || s.Refused != 0 || s.Create != len(got) {
		t.Errorf("summary %+v for %d changes", s, len(got))
	}

	// Converged: the same manifests plan to nothing.
	converge(t, fake, samplesInput(t, nil))
	p, err = buildPlan(ctx, vault.ReadOnly(fake), samplesInput(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := changesOf(p); len(got) != 0 {
		t.Errorf("in sync, yet the plan has %q", got)
	}

	// web01 loses "db" and gains "mail": its role and entity change, a new
	// policy appears; db01 still renders salt_role_db, so nothing is deleted.
	p, err = buildPlan(ctx, vault.ReadOnly(fake), samplesInput(t, func(dir string) {
		replaceIn(t, filepath.Join(dir, "minionbinding-web01.yaml"), "roles: [web, db]", "roles: [web, mail]")
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"create sys/policies/acl/salt_role_mail", "update identity/entity/name/salt_minion_web01", "update auth/salt-minions/role/web01"}
	if got := changesOf(p); !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
	var entity vault.Change
	for _, b := range p.Bindings {
		if b.Name == "web01" {
			entity = b.Changes[0]
		}
	}
	var text strings.Builder
	writeBlock(&text, []vault.Change{entity}, nil)
	for _, line := range []string{`~ roles: "db,web" -> "mail,web"`, `~ roles__0: "db" -> "mail"`} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("entity diff lacks %q:\n%s", line, text.String())
		}
	}

	// build01 is removed from the only role rendering salt_role_ci: the
	// policy the template owns is deleted.
	p, err = buildPlan(ctx, vault.ReadOnly(fake), samplesInput(t, func(dir string) {
		replaceIn(t, filepath.Join(dir, "minionbinding-build01.yaml"), "roles: [ci, web]", "roles: [web]")
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := changesOf(p); !slices.Contains(got, "delete sys/policies/acl/salt_role_ci") {
		t.Errorf("changes %q lack the deletion of salt_role_ci", got)
	}
}

func TestPlanRefusals(t *testing.T) {
	ctx := context.Background()
	fake := vaulttest.NewFake()
	fake.EnableAuth("salt-minions")
	fake.WritePolicy(ctx, "salt_role_web", `path "x" { capabilities = ["read"] }`)
	p, err := buildPlan(ctx, vault.ReadOnly(fake), samplesInput(t, func(dir string) {
		replaceIn(t, filepath.Join(dir, "minionbinding-db01.yaml"), "roles: [db]", "roles: ['*']")
		replaceIn(t, filepath.Join(dir, "minionbinding-build01.yaml"), "minionID: build01", "minionID: web01")
		replaceIn(t, filepath.Join(dir, "minionbinding-build01.yaml"), "id: build01", "id: web01")
		replaceIn(t, filepath.Join(dir, "minionbinding-web01.yaml"), "namespace: default", "namespace: other")
	}))
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, b := range p.Bindings {
		if b.Refused != nil {
			reasons[b.Name] = b.Refused.Reason
		}
	}
	want := map[string]string{"db01": "ValidationFailed", "web01": "NamespaceNotAllowed"}
	for k, v := range want {
		if reasons[k] != v {
			t.Errorf("%s refused with %q, want %q (all: %v)", k, reasons[k], v, reasons)
		}
	}
	// build01 now claims minion ID web01 too; without creation times the
	// first in namespace/name order keeps it: default/build01.
	if reasons["build01"] != "" {
		t.Errorf("build01 refused: %v", reasons)
	}
	if tp := p.Templates[0]; tp.Refused == nil || tp.Refused.Reason != "PolicyNotOwned" || !strings.Contains(tp.Refused.Message, "salt_role_web") {
		t.Errorf("template %+v, want PolicyNotOwned for salt_role_web", tp.Refused)
	}
	if fake.Writes() != 1 {
		t.Errorf("writes %d, want only the test's own", fake.Writes())
	}
}

// Bindings that render one policy name differently: the template is
// refused with its reconciler's own message, and none of its policies is
// planned.
func TestPlanRefusesAPolicyConflict(t *testing.T) {
	ctx := context.Background()
	fake := vaulttest.NewFake()
	fake.EnableAuth("salt-minions")
	p, err := buildPlan(ctx, vault.ReadOnly(fake), samplesInput(t, func(dir string) {
		// Names are lowercased, rule paths are not.
		replaceIn(t, filepath.Join(dir, "minionbinding-build01.yaml"), "roles: [ci, web]", "roles: [ci, Web]")
	}))
	if err != nil {
		t.Fatal(err)
	}
	tp := p.Templates[0]
	if tp.Refused == nil || tp.Refused.Reason != "ValidationFailed" || len(tp.Changes) != 0 ||
		tp.Refused.Message != `policy "salt_role_web" renders differently for MinionBindings default/build01 and default/web01` {
		t.Errorf("template %+v, refused %+v", tp, tp.Refused)
		for _, b := range p.Bindings {
			t.Logf("%s %+v", b.Name, b.Refused)
		}
	}
}

func TestLineDiff(t *testing.T) {
	tests := []struct {
		before, after string
		want          []string
	}{
		{"", "a\nb\n", []string{"+ a", "+ b"}},
		{"a\nb\n", "", []string{"- a", "- b"}},
		{"a\nb\nc\n", "a\nx\nc\n", []string{"  a", "- b", "+ x", "  c"}},
		{"a\nb\n", "a\nb\n", []string{"  a", "  b"}},
		{"a\n", "b\na\n", []string{"+ b", "  a"}},
	}
	for _, tc := range tests {
		if got := lineDiff(tc.before, tc.after); !slices.Equal(got, tc.want) {
			t.Errorf("lineDiff(%q, %q) = %q, want %q", tc.before, tc.after, got, tc.want)
		}
	}
}

func TestMapDiff(t *testing.T) {
	got := mapDiff(map[string]any{"a": "1", "b": "2", "c": []any{"x"}}, map[string]any{"a": "1", "b": "3", "d": 4})
	want := []string{`~ b: "2" -> "3"`, `- c: ["x"]`, `+ d: 4`}
	if !slices.Equal(got, want) {
		t.Errorf("mapDiff = %q, want %q", got, want)
	}
}

func TestPlanVaultConfig(t *testing.T) {
	in := samplesInput(t, nil) // the samples' VaultConnection: http://127.0.0.1:8200, 30s
	tests := []struct {
		name    string
		o       planOptions
		env     map[string]string
		check   func(cfg vault.Config) bool
		wantErr string
	}{
		{"the VaultConnection's address, a token from the environment", planOptions{}, map[string]string{"VAULT_TOKEN": "t"},
			func(c vault.Config) bool { return c.Address == "http://127.0.0.1:8200" && c.Auth.Token == "t" }, ""},
		{"flags override", planOptions{address: "https://v:8200", namespace: "ns"}, map[string]string{"VAULT_TOKEN": "t", "VAULT_ADDR": "http://ignored"},
			func(c vault.Config) bool { return c.Address == "https://v:8200" && c.Namespace == "ns" }, ""},
		{"AppRole", planOptions{roleID: "r", appRoleMount: "approle"}, map[string]string{"VAULT_SECRET_ID": "s"},
			func(c vault.Config) bool {
				return c.Auth.AppRole != nil && c.Auth.AppRole.SecretID == "s" && c.Auth.Token == ""
			}, ""},
		{"kubernetes", planOptions{k8sRole: "plan", k8sMount: "kubernetes", jwtFile: "/nonexistent"}, nil,
			func(c vault.Config) bool { return c.Auth.Kubernetes != nil && c.Auth.Kubernetes.Role == "plan" }, ""},
		{"no credentials", planOptions{}, nil, nil, "no Vault credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"VAULT_TOKEN", "VAULT_ADDR", "VAULT_SECRET_ID", "VAULT_NAMESPACE", "VAULT_CACERT"} {
				t.Setenv(k, tc.env[k])
			}
			cfg, err := planVaultConfig(tc.o, in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(cfg) {
				t.Fatalf("config %+v, err %v", cfg, err)
			}
		})
	}
}

// A binding read from the cluster carries its record of where it wrote: a
// switch shows the removals at the old place, a deletion those of the
// finalizer (none without it).
func TestPlanUsesTheClusterRecord(t *testing.T) {
	ctx := context.Background()
	fake := vaulttest.NewFake()
	fake.EnableAuth("salt-minions")
	fake.EnableAuth("other-mount")
	converge(t, fake, samplesInput(t, nil))
	written := fake.Writes()
	info, _ := fake.ServerInfo(ctx)
	record := `  finalizers: [minionvault.dev/finalizer]
  annotations:
    minionvault.dev/vault-objects: '[{"vault":"` + info.ClusterID + `","connection":"vault","mount":"salt-minions","entity":"salt_minion_web01"}]'
`
	fromCluster := func(extra string) func(dir string) {
		return func(dir string) {
			replaceIn(t, filepath.Join(dir, "minionbinding-web01.yaml"), "  namespace: default\n", "  namespace: default\n"+record+extra)
		}
	}

	p, err := buildPlan(ctx, vault.ReadOnly(fake), samplesInput(t, fromCluster("")))
	if err != nil {
		t.Fatal(err)
	}
	if got := changesOf(p); len(got) != 0 {
		t.Errorf("in sync with its record, yet %q", got)
	}

	p, err = buildPlan(ctx, vault.ReadOnly(fake), samplesInput(t, func(dir string) {
		fromCluster("")(dir)
		replaceIn(t, filepath.Join(dir, "miniontemplate.yaml"), "    mount: salt-minions\n", "    mount: other-mount\n")
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"create auth/other-mount/role/web01", "delete auth/salt-minions/role/web01", "delete identity/entity-alias/id/"} {
		if !slices.ContainsFunc(changesOf(p), func(c string) bool { return strings.HasPrefix(c, want) }) {
			t.Errorf("a switch of mount: %q lacks %q", changesOf(p), want)
		}
	}

	p, err = buildPlan(ctx, vault.ReadOnly(fake), samplesInput(t, fromCluster("  deletionTimestamp: \"2026-12-03T10:00:00Z\"\n")))
	if err != nil {
		t.Fatal(err)
	}
	var web01 []string
	for _, b := range p.Bindings {
		if b.Name == "web01" {
			for _, c := range b.Changes {
				web01 = append(web01, c.Action+" "+c.Path)
			}
		}
	}
	if want := []string{"delete auth/salt-minions/role/web01", "delete identity/entity/name/salt_minion_web01"}; !slices.Equal(web01, want) {
		t.Errorf("a deletion: %q, want %q", web01, want)
	}
	if fake.Writes() != written {
		t.Errorf("the plans wrote %d times to Vault", fake.Writes()-written)
	}
}
