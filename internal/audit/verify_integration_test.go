//go:build integration

package audit

// Verify against a real Vault dev server (internal/testing/testenv, Vault only).
// The CLI's TestIntegrationAuditDrift runs drift and --verify on the
// samples the operator's plans applied; this one makes the evaluator
// wrong, which only the engine can.

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{NoKubernetes: true})
}

// An evaluator that is wrong is caught: a policy Vault holds as a read,
// read by the evaluator as a deny.
func TestIntegrationVerifyCatchesAWrongEvaluator(t *testing.T) {
	ctx := context.Background()
	env := testenv.Get(t).Vault
	root := env.Client
	mount := testenv.AppRoleMount
	const role = "verify-web01"
	if err := root.Sys().PutPolicyWithContext(ctx, "verify-extra", `path "secret/data/extra" { capabilities = ["read"] }`); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Logical().Write("auth/"+mount+"/role/"+role, map[string]any{"token_policies": []string{"verify-extra"}}); err != nil {
		t.Fatal(err)
	}
	s, err := root.Logical().Read("auth/" + mount + "/role/" + role + "/role-id")
	if err != nil {
		t.Fatal(err)
	}
	auths, err := root.Sys().ListAuthWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The entity the operator would have written, its alias named by the
	// role ID.
	e, err := root.Logical().Write("identity/entity", map[string]any{"name": "salt_minion_" + role})
	if err != nil {
		t.Fatal(err)
	}
	entityID := e.Data["id"].(string)
	if _, err := root.Logical().Write("identity/entity-alias", map[string]any{"name": s.Data["role_id"], "canonical_id": entityID,
		"mount_accessor": auths[mount+"/"].Accessor}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Logical().Write("auth/token/roles/minionvault-audit-verify", map[string]any{
		"allowed_policies_glob": []string{"*"}, "disallowed_policies": []string{"root"},
		"allowed_entity_aliases": []string{VerifyAliasPrefix + "*"}, "renewable": false,
		"token_explicit_max_ttl": "5m", "token_type": "service",
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = root.Logical().Delete("identity/entity/id/" + entityID)
		_, _ = root.Logical().Delete("auth/" + mount + "/role/" + role)
		_ = root.Sys().DeletePolicy("verify-extra")
	})

	t.Setenv("VAULT_ADDR", env.Addr)
	t.Setenv("VAULT_TOKEN", env.RootToken)
	online, err := LoadOnline(ctx, mount, "")
	if err != nil {
		t.Fatal(err)
	}
	m := online.byID[role]
	if m == nil || m.live == nil || m.live.ID != entityID {
		t.Fatalf("minion %s: %+v", role, m)
	}
	// This minion only, whatever else the Vault holds.
	online.minions = []*Minion{m}
	right, err := verifyFleet(ctx, online, VerifyOptions{N: 10, Role: "minionvault-audit-verify", Seed: 3}, []string{"secret/data/extra", "sys/mounts"})
	if err != nil {
		t.Fatal(err)
	}
	if len(right.Disagreements) != 0 || right.Agreed == 0 || len(right.Minions) != 1 || right.Minions[0].Skipped != "" {
		t.Fatalf("the evaluator as it is: %+v", right)
	}

	docs := maps.Clone(online.docs)
	docs["verify-extra"] = `path "secret/data/extra" { capabilities = ["deny"] }`
	if online.ev, err = acl.New(docs, acl.Options{Mode: online.ev.Mode()}); err != nil {
		t.Fatal(err)
	}
	wrong, err := verifyFleet(ctx, online, VerifyOptions{N: 10, Role: "minionvault-audit-verify", Seed: 3}, []string{"secret/data/extra", "sys/mounts"})
	if err != nil {
		t.Fatal(err)
	}
	if len(wrong.Disagreements) != 1 || wrong.Disagreements[0].Role != role || wrong.Disagreements[0].Path != "secret/data/extra" ||
		!slices.Equal(wrong.Disagreements[0].Evaluator, []string{"deny"}) || !slices.Equal(wrong.Disagreements[0].Vault, []string{"read"}) {
		t.Fatalf("a wrong evaluator: %+v", wrong.Disagreements)
	}
	// The aliases Verify attached are gone again.
	e, err = root.Logical().Read("identity/entity/id/" + entityID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range e.Data["aliases"].([]any) {
		if a.(map[string]any)["mount_accessor"] == auths["token/"].Accessor {
			t.Fatalf("an alias is left on the token mount: %v", a)
		}
	}
}
