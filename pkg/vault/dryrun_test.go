package vault

import (
	"context"
	"errors"
	"testing"
)

// A DryRun never writes a binding's objects, and records the policy
// writes it is asked for, answering later reads from them.
func TestDryRunWritesNothing(t *testing.T) {
	ctx := context.Background()
	fake := NewFake()
	fake.EnableAuth("salt-minions")
	d := NewDryRun(fake)
	if err := d.WriteRole(ctx, "salt-minions", "web01", map[string]any{"token_ttl": 60}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("WriteRole: %v", err)
	}
	if _, err := d.WriteEntityByName(ctx, "e", map[string]string{"a": "b"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("WriteEntityByName: %v", err)
	}
	if _, err := d.CreateEntityAlias(ctx, "r", "acc", "e"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("CreateEntityAlias: %v", err)
	}
	if err := d.WritePolicy(ctx, "p", `path "x" { capabilities = ["read"] }`); err != nil {
		t.Fatal(err)
	}
	if hcl, found, err := d.ReadPolicy(ctx, "p"); err != nil || !found || hcl == "" {
		t.Errorf("the recorded policy reads as %q %v %v", hcl, found, err)
	}
	if err := d.DeletePolicy(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if cs := d.Changes(); len(cs) != 2 || cs[0].Action != "create" || cs[1].Action != "delete" {
		t.Errorf("changes %+v", cs)
	}
	if fake.Writes() != 0 {
		t.Errorf("%d writes reached Vault", fake.Writes())
	}
}
