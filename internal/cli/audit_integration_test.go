//go:build integration

package cli

// The offline audit against a real Vault dev server (internal/testing/testenv,
// Vault only): the samples are applied to Vault by the operator's own
// plans (plan's, executed for real), each minion logs in through its
// AppRole, and what `audit` computes from the manifests alone must be what
// sys/capabilities answers for that minion's token.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/minionvault/minion-vault-operator/internal/audit"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{NoKubernetes: true})
}

func TestIntegrationAuditMatchesVault(t *testing.T) {
	ctx := context.Background()
	env := testenv.Get(t).Vault
	root := env.Client
	dir := copySamples(t)
	// A policy the template assigns but does not render, as a file.
	replaceIn(t, dir+"/miniontemplate.yaml", "      - 'salt_role_{pillar[roles]}'\n", "      - 'salt_role_{pillar[roles]}'\n      - 'saltstack/extra-{minion}'\n")
	writeAuditFile(t, dir+"/web01.hcl", "# policy: saltstack/extra-web01\n"+`path "salt/data/minions/web01/*" { capabilities = ["read", "list"] }
path "salt/data/+/web01" { capabilities = ["read"] }
path "salt/*" { capabilities = ["deny"] }
`)
	if err := root.Sys().PutPolicyWithContext(ctx, "saltstack/extra-web01", mustRead(t, dir+"/web01.hcl")); err != nil {
		t.Fatal(err)
	}

	in, err := readPlanInput([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	c, err := vault.New(ctx, vault.Config{Address: env.Addr, Auth: vault.Auth{Token: env.RootToken}, Timeout: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := applyManifests(t, c, in)
	for _, b := range plan.Bindings {
		if b.Refused != nil {
			t.Fatalf("binding %s refused: %+v", b.Name, b.Refused)
		}
	}

	auths, err := root.Sys().ListAuthWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	accessor := auths[testenv.AppRoleMount+"/"].Accessor
	f, err := audit.Load([]string{dir}, audit.Options{VaultVersion: "1.21.4", Accessor: accessor})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Minions()) != 3 {
		t.Fatalf("%d minions", len(f.Minions()))
	}

	// Every path the policies name, the minions' own, and a few more.
	set := map[string]bool{}
	for _, p := range f.Paths() {
		set[p] = true
	}
	for _, p := range []string{"salt/data/roles/web/", "salt/data/roles/", "salt/metadata/roles/db/", "salt/data/minions/web01/x",
		"salt/data/env/prod", "salt/data/env/staging", "sys/mounts", "secret/data/x", "cubbyhole/x"} {
		set[p] = true
	}
	var paths []string
	for p := range set {
		// The entity ID is Vault's: offline it is a stand-in.
		if !strings.HasPrefix(p, "identity/entity/id/") && !slices.Contains([]string{"data", "auth", "warnings", "capabilities"}, p) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)

	agreed := 0
	for _, m := range f.Minions() {
		token := minionLogin(t, root, m.Role())
		got, err := capabilities(root, token, paths)
		if err != nil {
			t.Fatal(err)
		}
		// what-can's explanations: the evaluator's answer on each path.
		for _, x := range audit.WhatCan(f, m, paths).Explain {
			if x.Error != "" {
				t.Fatalf("%s %s: %v", m.ID(), x.Path, x.Error)
			}
			if want := got[x.Path]; !reflect.DeepEqual(x.Capabilities, want) {
				t.Errorf("%s %q: audit %v, Vault %v (%+v)", m.ID(), x.Path, x.Capabilities, want, x)
				continue
			}
			agreed++
		}
	}
	t.Logf("%d answers of %d minions on %d paths agree with Vault", agreed, len(f.Minions()), len(paths))

	// Online: the same answers read from Vault alone, through the
	// command, as the contract checked from outside asks for them.
	t.Setenv("VAULT_ADDR", env.Addr)
	t.Setenv("VAULT_TOKEN", env.RootToken)
	for _, m := range f.Minions() {
		token := minionLogin(t, root, m.Role())
		want, err := capabilities(root, token, paths)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"what-can", m.Role(), "--vault", "--minion-mount", testenv.AppRoleMount, "-o", "json"}
		for _, p := range paths {
			args = append(args, "--path", p)
		}
		code, out, errOut := runAudit(t, args...)
		if code != 0 {
			t.Fatalf("what-can --vault: exit %d: %s", code, errOut)
		}
		var r struct{ Paths map[string][]string }
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Paths, want) {
			for _, p := range paths {
				if !reflect.DeepEqual(r.Paths[p], want[p]) {
					t.Errorf("what-can %s --vault %q: %v, Vault %v", m.Role(), p, r.Paths[p], want[p])
				}
			}
		}
	}
	code, out, errOut := runAudit(t, "who-can", "salt/data/roles/db", "--vault", "--minion-mount", testenv.AppRoleMount, "-o", "json")
	if code != 0 {
		t.Fatalf("who-can --vault: exit %d: %s", code, errOut)
	}
	var wc struct {
		Minions []struct {
			Role         string
			Capabilities []string
		}
	}
	if err := json.Unmarshal([]byte(out), &wc); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range wc.Minions {
		roles = append(roles, m.Role+"="+strings.Join(m.Capabilities, ","))
	}
	if !reflect.DeepEqual(roles, []string{"db01=list,read", "web01=list,read"}) {
		t.Fatalf("who-can --vault: %v", roles)
	}

	// The rights docs/audit.md lists are enough.
	reader := `path "sys/policies/acl" { capabilities = ["list"] }
path "sys/policies/acl/*" { capabilities = ["read"] }
path "sys/auth" { capabilities = ["read"] }
path "auth/` + testenv.AppRoleMount + `/role" { capabilities = ["list"] }
path "auth/` + testenv.AppRoleMount + `/role/*" { capabilities = ["read"] }
path "identity/entity/id" { capabilities = ["list"] }
path "identity/entity/id/*" { capabilities = ["read"] }
path "identity/group/id/*" { capabilities = ["read"] }
`
	if err := root.Sys().PutPolicyWithContext(ctx, "audit-reader", reader); err != nil {
		t.Fatal(err)
	}
	rt, err := root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{"audit-reader"}, NoDefaultPolicy: true, TTL: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT_TOKEN", rt.Auth.ClientToken)
	if code, _, errOut := runAudit(t, "who-can", "salt/data/roles/db", "--vault", "--minion-mount", testenv.AppRoleMount, "-o", "json"); code != 0 {
		t.Fatalf("who-can --vault with the documented rights: exit %d: %s", code, errOut)
	}
	t.Setenv("VAULT_TOKEN", env.RootToken)

	// A disabled entity: Vault answers an error for every path of the
	// minion, and so does what-can, with an object holding "error".
	token := minionLogin(t, root, "db01")
	ent, err := root.Logical().Read("identity/entity/name/salt_minion_db01")
	if err != nil || ent == nil {
		t.Fatalf("entity of db01: %v", err)
	}
	if _, err := root.Logical().Write("identity/entity/id/"+ent.Data["id"].(string), map[string]any{"disabled": true}); err != nil {
		t.Fatal(err)
	}
	if _, err := capabilities(root, token, []string{"salt/data/roles/db", "x"}); err == nil || !strings.Contains(err.Error(), "invalid token") {
		t.Fatalf("Vault answers %v for a disabled entity", err)
	}
	code, out, errOut = runAudit(t, "what-can", "db01", "--vault", "--minion-mount", testenv.AppRoleMount, "--path", "salt/data/roles/db", "-o", "json")
	if code != 0 {
		t.Fatalf("what-can --vault: exit %d: %s", code, errOut)
	}
	var dr struct{ Paths map[string]map[string]string }
	if err := json.Unmarshal([]byte(out), &dr); err != nil || dr.Paths["salt/data/roles/db"]["error"] != "invalid token" {
		t.Fatalf("what-can of a disabled entity: %v %s", err, out)
	}

	// who-can on a path the policy file decides: its longer prefix beats
	// its own salt/* deny, and the other minions have no rule there.
	r := audit.WhoCan(f, audit.WhoCanQuery{Path: "salt/data/minions/web01/x"})
	var names []string
	for _, m := range r.Minions {
		names = append(names, m.Minion)
	}
	if !reflect.DeepEqual(names, []string{"web01"}) || r.Minions[0].Pattern != "salt/data/minions/web01/*" {
		t.Fatalf("who-can salt/data/minions/web01/x: %+v", r.Minions)
	}
}

func mustRead(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// minionLogin logs in with the AppRole role the operator wrote, with a new
// secret ID.
func minionLogin(t *testing.T, root *vaultapi.Client, role string) string {
	t.Helper()
	mount := "auth/" + testenv.AppRoleMount + "/role/" + role
	s, err := root.Logical().Read(mount + "/role-id")
	if err != nil {
		t.Fatal(err)
	}
	roleID := s.Data["role_id"].(string)
	s, err = root.Logical().Write(mount+"/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	anon, err := root.Clone()
	if err != nil {
		t.Fatal(err)
	}
	anon.ClearToken()
	login, err := anon.Logical().Write("auth/"+testenv.AppRoleMount+"/login", map[string]any{"role_id": roleID, "secret_id": s.Data["secret_id"]})
	if err != nil {
		t.Fatal(err)
	}
	return login.Auth.ClientToken
}

func capabilities(c *vaultapi.Client, token string, paths []string) (map[string][]string, error) {
	s, err := c.Logical().Write("sys/capabilities", map[string]any{"token": token, "paths": paths})
	if err != nil {
		var re *vaultapi.ResponseError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("%d %v", re.StatusCode, re.Errors)
		}
		return nil, err
	}
	out := map[string][]string{}
	for k, v := range s.Data {
		l, _ := v.([]any)
		for _, x := range l {
			out[k] = append(out[k], fmt.Sprint(x))
		}
	}
	return out, nil
}
