package binding

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// executed is what execute did: the actions done, in order, and the IDs
// Vault assigned on the way.
type executed struct {
	done []vaultAction
	// entityID is the entity created, roleID the role ID a role was
	// created with ("" when none was).
	entityID, roleID string
}

// execute applies actions in order against vc, carrying a created
// entity's ID forward to the alias that links it, and stops at the first
// failure: what was done is in the result either way. Held actions
// (detect-only) and a role's take (its alias actions link it) make no
// call.
func execute(ctx context.Context, vc vault.Client, actions []vaultAction) (executed, error) {
	log := ctrl.LoggerFrom(ctx)
	var ex executed
	for _, a := range actions {
		if a.held {
			continue
		}
		if a.call != callNone {
			msg := "Writing to Vault"
			if a.kind == actDelete {
				msg = "Deleting from Vault"
			}
			log.Info(msg, "object", a.what, "reason", a.why, "drift", a.drift)
		}
		if err := ex.run(ctx, vc, a); err != nil {
			return ex, err
		}
		ex.done = append(ex.done, a)
	}
	return ex, nil
}

func (ex *executed) run(ctx context.Context, vc vault.Client, a vaultAction) error {
	switch a.call {
	case callWriteEntity:
		id, err := vc.WriteEntityByName(ctx, a.name, a.metadata)
		if err != nil {
			return fmt.Errorf("writing entity %s: %w", a.name, err)
		}
		if a.kind == actCreate {
			if id == "" {
				// Someone created it between our read and write: read it
				// and decide again.
				return outcome.VaultState(nil, fmt.Sprintf("entity %s appeared while the operator created it", a.name))
			}
			ex.entityID = id
		}
	case callDeleteEntity:
		if err := vc.DeleteEntityByName(ctx, a.name); err != nil {
			return fmt.Errorf("deleting entity %s: %w", a.name, err)
		}
	case callCreateAlias:
		canonical := a.entityID
		if canonical == "" {
			canonical = ex.entityID
		}
		if _, err := vc.CreateEntityAlias(ctx, a.aliasName, a.accessor, canonical); err != nil {
			return fmt.Errorf("writing the entity alias %s: %w", a.aliasName, err)
		}
	case callUpdateAlias:
		if err := vc.UpdateEntityAlias(ctx, a.aliasID, a.aliasName, "", ""); err != nil {
			return fmt.Errorf("renaming the entity alias %s to %s: %w", a.aliasID, a.aliasName, err)
		}
	case callDeleteAlias:
		if err := vc.DeleteEntityAlias(ctx, a.aliasID); err != nil {
			return fmt.Errorf("deleting entity alias %s: %w", a.aliasID, err)
		}
	case callWriteRole:
		if err := vc.WriteRole(ctx, a.mount, a.name, a.params); err != nil {
			return fmt.Errorf("writing %s: %w", a.what, err)
		}
		if a.roleID != "" {
			ex.roleID = a.roleID
		}
	case callDeleteRole:
		if err := vc.DeleteRole(ctx, a.mount, a.name); err != nil {
			return fmt.Errorf("deleting %s: %w", a.what, err)
		}
	}
	return nil
}
