package vault_test

import (
	"context"
	"errors"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// A vault.ReadOnly client refuses every write and reads through.
func TestReadOnlyWritesNothing(t *testing.T) {
	ctx := context.Background()
	fake := vaulttest.NewFake()
	fake.EnableAuth("salt-minions")
	if err := fake.WritePolicy(ctx, "p", `path "x" { capabilities = ["read"] }`); err != nil {
		t.Fatal(err)
	}
	written := fake.Writes()
	d := vault.ReadOnly(fake)
	writes := map[string]error{
		"WriteRole":          d.WriteRole(ctx, "salt-minions", "web01", map[string]any{"token_ttl": 60}),
		"DeleteRole":         d.DeleteRole(ctx, "salt-minions", "web01"),
		"DeleteEntityByName": d.DeleteEntityByName(ctx, "e"),
		"UpdateEntityAlias":  d.UpdateEntityAlias(ctx, "id", "n", "acc", "e"),
		"DeleteEntityAlias":  d.DeleteEntityAlias(ctx, "id"),
		"WritePolicy":        d.WritePolicy(ctx, "q", `path "x" {}`),
		"DeletePolicy":       d.DeletePolicy(ctx, "p"),
	}
	_, writes["WriteEntityByName"] = d.WriteEntityByName(ctx, "e", map[string]string{"a": "b"})
	_, writes["CreateEntityAlias"] = d.CreateEntityAlias(ctx, "r", "acc", "e")
	for op, err := range writes {
		if !errors.Is(err, vault.ErrReadOnly) {
			t.Errorf("%s: %v", op, err)
		}
	}
	if hcl, found, err := d.ReadPolicy(ctx, "p"); err != nil || !found || hcl == "" {
		t.Errorf("ReadPolicy through it: %q %v %v", hcl, found, err)
	}
	if fake.Writes() != written {
		t.Errorf("%d writes reached Vault", fake.Writes()-written)
	}
}
