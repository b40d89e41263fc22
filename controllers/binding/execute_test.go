package binding

import (
	"context"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// The executor applies a new binding's plan in order, linking the entity
// it creates to the alias and the role by their IDs; a failure stops it,
// and what was done before is reported.
func TestExecuteCarriesIDsAndStopsAtTheFirstFailure(t *testing.T) {
	ctx := context.Background()
	res := planResult("salt-minions", "salt_minion_web01", "web")
	newPlan := func(v *vaulttest.Fake) bindingPlan {
		acc, _ := v.MountAccessor(ctx, "salt-minions")
		o := world(res, proof{self: planSelf}, observed{})
		o.accessor = acc
		plan, err := planBinding(res, o, planMode{newRoleID: newID})
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}

	v := vaulttest.NewFake()
	v.EnableAuth("salt-minions")
	ex, err := execute(ctx, v, newPlan(v).at(0))
	if err != nil || len(ex.done) != 3 || ex.roleID != newID || ex.entityID == "" {
		t.Fatalf("executed %+v, %v", ex, err)
	}
	e, _ := v.ReadEntityByName(ctx, "salt_minion_web01")
	if id, _ := v.ReadRoleID(ctx, "salt-minions", "web01"); e == nil || e.ID != ex.entityID || len(e.Aliases) != 1 || e.Aliases[0].Name != newID || id != newID {
		t.Fatalf("entity %+v, role ID %q", e, id)
	}
	if m, _ := ownership.ParseMarker(e.Metadata[ownership.MarkerKey]); !m.Same(planSelf) {
		t.Errorf("marker %q", e.Metadata[ownership.MarkerKey])
	}

	v = vaulttest.NewFake()
	v.EnableAuth("salt-minions")
	v.FailNext("CreateEntityAlias", &vault.Error{Op: "write identity/entity-alias", StatusCode: 503})
	ex, err = execute(ctx, v, newPlan(v).at(0))
	if err == nil || len(ex.done) != 1 || ex.done[0].object != objEntity || ex.entityID == "" || ex.roleID != "" || v.Calls("WriteRole") != 0 {
		t.Fatalf("a failed alias: executed %+v, %v, %d role writes", ex, err, v.Calls("WriteRole"))
	}
}
