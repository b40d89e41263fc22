package cli

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// replay makes the writes a plan prints, in order, as an administrator
// following the printed plan would: what the plan leaves to the write
// itself (vault.Placeholder: a new entity's ID, a new role's ID) comes
// from the writes before it in the same block. It needs nothing of the
// planner but its output, so a test that converges Vault with it also
// proves the printed plan says everything the reconcilers would write.
func replay(ctx context.Context, c vault.Client, changes []vault.Change) error {
	roleID, err := newRoleIDOf(changes)
	if err != nil {
		return err
	}
	var entityID string
	for _, ch := range changes {
		var err error
		switch ch.Kind {
		case "acl-policy":
			name := strings.TrimPrefix(ch.Path, "sys/policies/acl/")
			if ch.Action == vault.ChangeDelete {
				err = c.DeletePolicy(ctx, name)
				break
			}
			text, ok := ch.After.(string)
			if !ok {
				return fmt.Errorf("%s %s: the policy text is a %T", ch.Action, ch.Path, ch.After)
			}
			err = c.WritePolicy(ctx, name, text)
		case "entity":
			name := strings.TrimPrefix(ch.Path, "identity/entity/name/")
			if ch.Action == vault.ChangeDelete {
				err = c.DeleteEntityByName(ctx, name)
				break
			}
			md, ok := ch.After.(map[string]string)
			if !ok {
				return fmt.Errorf("%s %s: the metadata is a %T", ch.Action, ch.Path, ch.After)
			}
			var id string
			if id, err = c.WriteEntityByName(ctx, name, md); id != "" {
				entityID = id
			}
		case "approle-role":
			mount, name, _ := strings.Cut(strings.TrimPrefix(ch.Path, "auth/"), "/role/")
			if ch.Action == vault.ChangeDelete {
				err = c.DeleteRole(ctx, mount, name)
				break
			}
			params, ok := ch.After.(map[string]any)
			if !ok {
				return fmt.Errorf("%s %s: the parameters are a %T", ch.Action, ch.Path, ch.After)
			}
			if params["role_id"] == vault.Placeholder {
				params = maps.Clone(params) // the plan's own stays as printed
				params["role_id"] = roleID
			}
			err = c.WriteRole(ctx, mount, name, params)
		case "entity-alias":
			fields, _ := ch.After.(map[string]any)
			known := func(key, assigned string) string {
				if v := fmt.Sprint(fields[key]); v != vault.Placeholder {
					return v
				}
				return assigned
			}
			id := strings.TrimPrefix(ch.Path, "identity/entity-alias/id/")
			switch ch.Action {
			case vault.ChangeCreate:
				_, err = c.CreateEntityAlias(ctx, known("name", roleID), fmt.Sprint(fields["mount_accessor"]), known("canonical_id", entityID))
			case vault.ChangeUpdate:
				err = c.UpdateEntityAlias(ctx, id, known("name", roleID), "", "")
			case vault.ChangeDelete:
				err = c.DeleteEntityAlias(ctx, id)
			}
		default:
			return fmt.Errorf("%s %s: unknown kind %q", ch.Action, ch.Path, ch.Kind)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", ch.Action, ch.Path, err)
		}
	}
	return nil
}

// newRoleIDOf chooses the ID of the role a binding's block creates, as the
// operator does for the owner the block's entity marker names: the alias,
// named by the role ID, may come before the role in the block.
func newRoleIDOf(changes []vault.Change) (string, error) {
	var (
		owner      ownership.Owner
		ownerKnown bool
	)
	for _, ch := range changes {
		if md, ok := ch.After.(map[string]string); ok && ch.Kind == "entity" {
			owner, ownerKnown = ownership.ParseMarker(md[ownership.MarkerKey])
		}
	}
	for _, ch := range changes {
		params, ok := ch.After.(map[string]any)
		if ch.Kind != "approle-role" || !ok || params["role_id"] != vault.Placeholder {
			continue
		}
		mount, name, ok := strings.Cut(strings.TrimPrefix(ch.Path, "auth/"), "/role/")
		if !ok {
			return "", fmt.Errorf("%s %s: not a role's path", ch.Action, ch.Path)
		}
		if !ownerKnown {
			return "", fmt.Errorf("%s %s: a new role ID, but no owner marker in the block", ch.Action, ch.Path)
		}
		var random [16]byte
		_, _ = rand.Read(random[:]) // never fails (crypto/rand)
		return ownership.NewRoleID(owner, ownership.RolePlace{Mount: mount, Role: name}, random), nil
	}
	return "", nil
}
