//go:build integration

package cli

// audit drift and --verify against a real Vault dev server: the samples
// applied by the operator's own plans, executed (entity with the owner marker,
// alias named by the chosen role ID, role), no minion ever logged in; then
// Vault changed behind the manifests' back; --verify with exactly the
// rights docs/audit.md lists.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/minionvault/minion-vault-operator/internal/audit"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The rights docs/audit.md lists for the online audit and for --verify.
const auditReaderPolicy = `path "sys/policies/acl" { capabilities = ["list"] }
path "sys/policies/acl/*" { capabilities = ["read"] }
path "sys/auth" { capabilities = ["read"] }
path "auth/%MOUNT%/role" { capabilities = ["list"] }
path "auth/%MOUNT%/role/*" { capabilities = ["read"] }
path "identity/entity/id" { capabilities = ["list"] }
path "identity/entity/id/*" { capabilities = ["read"] }
path "identity/group/id/*" { capabilities = ["read"] }
`

const auditVerifyPolicy = `path "auth/token/create/minionvault-audit-verify" { capabilities = ["update"] }
path "auth/token/revoke" { capabilities = ["update"] }
path "identity/entity-alias" {
  capabilities = ["update"]
  allowed_parameters = {
    "name"           = ["minionvault-audit-*"]
    "mount_accessor" = ["%TOKEN_ACCESSOR%"]
    "canonical_id"   = []
  }
}
path "identity/entity-alias/id/*" { capabilities = ["delete"] }
path "sys/capabilities" { capabilities = ["update"] }
`

func TestIntegrationAuditDrift(t *testing.T) {
	ctx := context.Background()
	env := testenv.Get(t).Vault
	root := env.Client
	dir := copySamples(t)
	mount := testenv.AppRoleMount

	in, err := readPlanInput([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	c, err := vault.New(ctx, vault.Config{Address: env.Addr, Auth: vault.Auth{Token: env.RootToken}, Timeout: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	applyManifests(t, c, in)
	entityOf := func(name string) map[string]any {
		t.Helper()
		s, err := root.Logical().Read("identity/entity/name/salt_minion_" + name)
		if err != nil || s == nil {
			t.Fatalf("entity of %s: %v", name, err)
		}
		return s.Data
	}
	// Another test of the package may have disabled one.
	for _, n := range []string{"db01", "web01", "build01"} {
		if _, err := root.Logical().Write("identity/entity/id/"+entityOf(n)["id"].(string), map[string]any{"disabled": false}); err != nil {
			t.Fatal(err)
		}
	}
	if md, _ := entityOf("web01")["metadata"].(map[string]any); md["minionvault-owner"] == nil {
		t.Fatalf("no owner marker on the entity: %v", md)
	}

	t.Setenv("VAULT_ADDR", env.Addr)
	t.Setenv("VAULT_TOKEN", env.RootToken)
	drift := func(wantCode int, args ...string) audit.DriftReport {
		t.Helper()
		code, out, errOut := runAudit(t, append([]string{"drift", "-f", dir, "--minion-mount", mount, "-o", "json"}, args...)...)
		if code != wantCode {
			t.Fatalf("drift %v: exit %d, want %d: %s%s", args, code, wantCode, out, errOut)
		}
		var r audit.DriftReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := drift(0); r.Summary.Extra != 0 || r.Summary.Missing != 0 || r.Summary.Paths == 0 {
		t.Fatalf("in sync: %+v %+v", r.Summary, r.Minions)
	}

	// Behind the manifests' back: a group gives web01 a policy, db01's role
	// loses salt_role_db, and a role no binding renders.
	if err := root.Sys().PutPolicyWithContext(ctx, "drift-extra", `path "secret/data/extra" { capabilities = ["read"] }`); err != nil {
		t.Fatal(err)
	}
	g, err := root.Logical().Write("identity/group", map[string]any{"name": "drift-group", "policies": []string{"drift-extra"},
		"member_entity_ids": []string{entityOf("web01")["id"].(string)}})
	if err != nil {
		t.Fatal(err)
	}
	gid := g.Data["id"].(string)
	role, err := root.Logical().Read("auth/" + mount + "/role/db01")
	if err != nil {
		t.Fatal(err)
	}
	dbPolicies := role.Data["token_policies"]
	var kept []string
	for _, p := range strs(dbPolicies) {
		if p != "salt_role_db" {
			kept = append(kept, p)
		}
	}
	if _, err := root.Logical().Write("auth/"+mount+"/role/db01", map[string]any{"token_policies": kept}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Logical().Write("auth/"+mount+"/role/drift-rogue", map[string]any{"token_policies": []string{"drift-extra"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = root.Logical().Delete("identity/group/id/" + gid)
		_, _ = root.Logical().Write("auth/"+mount+"/role/db01", map[string]any{"token_policies": dbPolicies})
		_, _ = root.Logical().Delete("auth/" + mount + "/role/drift-rogue")
		_ = root.Sys().DeletePolicy("drift-extra")
	})

	r := drift(1)
	changes := map[string]string{}
	for _, m := range r.Minions {
		if m.Status != "" {
			changes[m.Minion] = m.Status
		}
		for _, ch := range m.Changes {
			s := ""
			if len(ch.Extra) > 0 {
				s += "+" + strings.Join(ch.Extra, ",+") + " " + ch.Why
			}
			if len(ch.Missing) > 0 {
				s += "-" + strings.Join(ch.Missing, ",-")
			}
			changes[m.Minion+" "+ch.Path] = strings.TrimSpace(s)
		}
	}
	for k, want := range map[string]string{
		"web01 secret/data/extra": "+read drift-extra secret/data/extra (exact match)",
		// saltstack/minions still gives read through roles__0.
		"db01 salt/data/roles/db":       "-list",
		"drift-rogue":                   "not in the manifests",
		"drift-rogue secret/data/extra": "+read drift-extra secret/data/extra (exact match)",
	} {
		if changes[k] != want {
			t.Errorf("%s: %q, want %q (all: %q)", k, changes[k], want, changes)
		}
	}
	if r.Summary.Extra != 2 || r.Summary.Missing < 1 || r.Verify != nil {
		t.Fatalf("summary %+v", r.Summary)
	}
	code, out, errOut := runAudit(t, "drift", "-f", dir, "--minion-mount", mount, "--path", "secret/data/extra")
	if code != 1 || !strings.HasPrefix(out, "2 of 4 minions have access in Vault the manifests do not give, 1 lack access the manifests give") {
		t.Fatalf("drift table: exit %d: %s%s", code, out, errOut)
	}
	t.Logf("drift table:\n%s", out)

	// --verify with the rights docs/audit.md lists, and nothing else.
	if _, err := root.Logical().Write("auth/token/roles/minionvault-audit-verify", map[string]any{
		"allowed_policies_glob": []string{"*"}, "disallowed_policies": []string{"root"},
		"allowed_entity_aliases": []string{audit.VerifyAliasPrefix + "*"}, "renewable": false,
		"token_explicit_max_ttl": "5m", "token_type": "service",
	}); err != nil {
		t.Fatal(err)
	}
	if err := root.Sys().PutPolicyWithContext(ctx, "audit-reader-drift", strings.ReplaceAll(auditReaderPolicy, "%MOUNT%", mount)); err != nil {
		t.Fatal(err)
	}
	auths0, err := root.Sys().ListAuthWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Sys().PutPolicyWithContext(ctx, "audit-verify", strings.ReplaceAll(auditVerifyPolicy, "%TOKEN_ACCESSOR%", auths0["token/"].Accessor)); err != nil {
		t.Fatal(err)
	}
	tok, err := root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{"audit-reader-drift", "audit-verify"}, NoDefaultPolicy: true, TTL: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT_TOKEN", tok.Auth.ClientToken)
	// The verifier cannot attach any other alias.
	verifier, err := root.Clone()
	if err != nil {
		t.Fatal(err)
	}
	verifier.SetToken(tok.Auth.ClientToken)
	for _, body := range []map[string]any{
		{"name": "someone", "canonical_id": entityOf("web01")["id"], "mount_accessor": auths0["token/"].Accessor},
		{"name": audit.VerifyAliasPrefix + "x", "canonical_id": entityOf("web01")["id"], "mount_accessor": auths0[mount+"/"].Accessor},
	} {
		if _, err := verifier.Logical().Write("identity/entity-alias", body); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("the verifier attaches %v: %v", body, err)
		}
	}
	secretIDs := func() int {
		n := 0
		for _, role := range []string{"db01", "web01", "build01"} {
			s, err := root.Logical().List("auth/" + mount + "/role/" + role + "/secret-id")
			if err != nil {
				t.Fatal(err)
			}
			if s != nil {
				n += len(strs(s.Data["keys"]))
			}
		}
		return n
	}
	// An alias an interrupted run left on web01's entity is used and
	// removed.
	tokenAccessor := func() string {
		auths, err := root.Sys().ListAuthWithContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return auths["token/"].Accessor
	}()
	webID := entityOf("web01")["id"].(string)
	if _, err := root.Logical().Write("identity/entity-alias", map[string]any{"name": audit.VerifyAliasPrefix + webID, "canonical_id": webID, "mount_accessor": tokenAccessor}); err != nil {
		t.Fatal(err)
	}
	before := secretIDs()
	r = drift(1, "--verify", "10", "--verify-seed", "7", "--path", "secret/data/extra", "--path", "sys/mounts")
	v := r.Verify
	if v == nil || v.Seed != 7 || len(v.Disagreements) != 0 || v.Agreed == 0 {
		t.Fatalf("verify: %+v", v)
	}
	var verified, skipped []string
	for _, m := range v.Minions {
		if m.Skipped != "" {
			skipped = append(skipped, m.Role+": "+m.Skipped)
		} else {
			verified = append(verified, m.Role)
		}
	}
	slices.Sort(verified)
	// drift-rogue has no entity: it is not among those sampled.
	if !slices.Equal(verified, []string{"build01", "db01", "web01"}) || len(skipped) != 0 {
		t.Fatalf("verified %q, skipped %q", verified, skipped)
	}
	t.Logf("verify: %d answers agree, minions %+v", v.Agreed, v.Minions)
	if after := secretIDs(); after != before {
		t.Fatalf("secret IDs %d before, %d after", before, after)
	}
	// Nothing is left behind: no alias on the token mount, no token.
	auths, err := root.Sys().ListAuthWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"db01", "web01", "build01"} {
		aliases, _ := entityOf(n)["aliases"].([]any)
		for _, a := range aliases {
			if a.(map[string]any)["mount_accessor"] == auths["token/"].Accessor {
				t.Fatalf("%s keeps an alias on the token mount: %v", n, a)
			}
		}
	}
	acc, err := root.Logical().List("auth/token/accessors")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range strs(acc.Data["keys"]) {
		s, err := root.Logical().Write("auth/token/lookup-accessor", map[string]any{"accessor": a})
		if err == nil && s != nil && s.Data["display_name"] == "token-audit-verify" {
			t.Fatalf("a verification token is left: %v", s.Data)
		}
	}

	// An evaluator that is wrong is caught: internal/audit's
	// TestIntegrationVerifyCatchesAWrongEvaluator.

	// A disabled entity: Vault makes no token for it, and the report says
	// so instead of comparing.
	t.Setenv("VAULT_TOKEN", env.RootToken)
	if _, err := root.Logical().Write("identity/entity/id/"+entityOf("web01")["id"].(string), map[string]any{"disabled": true}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = root.Logical().Write("identity/entity/id/"+entityOf("web01")["id"].(string), map[string]any{"disabled": false})
	}()
	r = drift(1, "--verify", "10", "--verify-seed", "7")
	if len(r.Verify.Disagreements) != 0 {
		t.Fatalf("disabled entity: %+v", r.Verify)
	}
	for _, m := range r.Verify.Minions {
		if m.Role == "web01" && !strings.Contains(m.Skipped, "disabled") {
			t.Fatalf("disabled entity: %+v", m)
		}
	}
}

// strs is a list of Vault's answer as strings.
func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}
