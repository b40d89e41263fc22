package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/uuid"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// apply brings the minion's role, entity and alias to what res renders,
// writing only what differs, and only to objects Vault proves the
// binding's (pkg/ownership): everything is read and decided before the
// first write, so a refusal writes nothing. Its cost is what the fleet pays
// per binding:
//
//   - a binding applied before, Vault in sync: three reads (the role, its
//     role ID, the entity with its aliases and marker) and no write;
//   - a new binding: the role and the entity read (both absent), then the
//     entity created with the owner marker, its alias created under a role
//     ID the operator chooses, and the role created with that role ID:
//     three writes, two reads. A crash between any two leaves only objects
//     that are proven the binding's (the marked entity, its alias).
//
// The mount's accessor comes from the client's cache (sys/auth is read once
// per connection, and again when Vault changes).
func (r *MinionBindingReconciler) apply(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, res *render.Result, sc *bindingScope) error {
	log := ctrl.LoggerFrom(ctx)
	sc.hash = desiredHash(sc.vault, res)
	st := &obj.Status
	sc.created = st.LastAppliedHash == ""
	// Nothing changed on our side since the last successful apply: any
	// difference found now was made in Vault by someone else.
	unchanged := st.LastAppliedHash == sc.hash
	detectOnly := tpl.Spec.DriftDetection == v1alpha1.DriftDetectionDetectOnly
	write := func(what, why string) bool {
		if unchanged {
			sc.drift = append(sc.drift, what+": "+why)
			if detectOnly {
				return false
			}
			sc.corrected = true
		}
		sc.written = append(sc.written, what)
		log.Info("Writing to Vault", "object", what, "reason", why)
		return true
	}

	mount, role := res.AppRole.Mount, res.AppRole.RoleName
	accessor, err := vc.MountAccessor(ctx, mount)
	if err != nil {
		return fmt.Errorf("reading the accessor of auth/%s: %w", mount, err)
	}
	if accessor == "" {
		return vaultState(nil, fmt.Sprintf("no auth method is mounted at auth/%s", mount))
	}
	obs, err := r.observe(ctx, vc, obj, mount, role, accessor, res.EntityName)
	if err != nil {
		return err
	}
	entityDecision, roleDecision, err := r.decide(ctx, obj, tpl, obs)
	if err != nil {
		return err
	}
	if sc.beforeWrite != nil {
		if err := sc.beforeWrite(); err != nil {
			return err
		}
	}
	entity := obs.entity

	// The entity: created with the marker, or its metadata (the marker
	// and the list of rendered keys included) brought to the rendering.
	var actualMD map[string]string
	if entity != nil {
		actualMD = entity.Metadata
	}
	desired, err := ownership.Metadata(actualMD, res.EntityMetadata, obs.self)
	if err != nil {
		return &errInvalidInput{err: err}
	}
	sc.metadata = map[string]string{}
	for _, kv := range res.EntityMetadata {
		sc.metadata[kv.Key] = kv.Value
	}
	switch {
	case entityDecision == ownership.Create:
		if !write("entity "+res.EntityName, "entity does not exist") {
			return nil // detect-only, and nothing to link a role to
		}
		id, err := vc.WriteEntityByName(ctx, res.EntityName, desired)
		if err != nil {
			return fmt.Errorf("creating entity %s: %w", res.EntityName, err)
		}
		if id == "" {
			// Someone created it between our read and write: read it and
			// decide again.
			return vaultState(nil, fmt.Sprintf("entity %s appeared while the operator created it", res.EntityName))
		}
		entity = &vault.Entity{ID: id, Name: res.EntityName, Metadata: desired}
	case entityDecision == ownership.Take && !obs.entityProven:
		// Not drift: the marker makes the entity provably the binding's.
		log.Info("Taking over entity", "entity", res.EntityName, "entityID", entity.ID, "previousOwner", obs.entityClaim.Describe())
		sc.written = append(sc.written, "entity "+res.EntityName)
		sc.taken = append(sc.taken, "entity "+res.EntityName)
		if _, err := vc.WriteEntityByName(ctx, res.EntityName, desired); err != nil {
			return fmt.Errorf("writing the owner marker of entity %s: %w", res.EntityName, err)
		}
		entity.Metadata = desired
	default:
		if differs, why := metadataDiffers(desired, actualMD); differs && write("entity "+res.EntityName, why) {
			if _, err := vc.WriteEntityByName(ctx, res.EntityName, desired); err != nil {
				return fmt.Errorf("writing entity %s: %w", res.EntityName, err)
			}
			entity.Metadata = desired
		}
	}
	sc.entityID = entity.ID
	sc.entity = entity

	// The role: created under the role ID of the entity's alias, or linked
	// to the entity and brought to the rendering.
	what := "AppRole " + mount + "/" + role
	if roleDecision == ownership.Create {
		if !write(what, "role does not exist") {
			return nil
		}
		// A new role ID, as Vault would choose it, linked first: the alias
		// is named by it before the role exists (a role deleted by hand
		// comes back with a new one, like a role Vault re-created).
		id := r.roleID()
		if onMount := aliasOn(entity, accessor); onMount != nil {
			if err := vc.UpdateEntityAlias(ctx, onMount.ID, id, "", ""); err != nil {
				return wrapAlias(err, mount)
			}
			onMount.Name = id
		} else {
			aliasID, err := vc.CreateEntityAlias(ctx, id, accessor, entity.ID)
			if err != nil {
				return wrapAlias(err, mount)
			}
			entity.Aliases = append(entity.Aliases, vault.Alias{ID: aliasID, Name: id, MountAccessor: accessor, CanonicalID: entity.ID})
		}
		params := roleParams(res.AppRole.Params)
		params["role_id"] = id
		if err := vc.WriteRole(ctx, mount, role, params); err != nil {
			return fmt.Errorf("writing AppRole %s: %w", what, err)
		}
		sc.roleID = id
		return nil
	}
	sc.roleID = obs.roleID
	if roleDecision == ownership.Take {
		sc.taken = append(sc.taken, what)
	}
	if err := r.applyAlias(ctx, vc, mount, accessor, entity, sc, write); err != nil {
		return err
	}
	if differs, why := roleDiffers(res.AppRole.Params, obs.role); differs && write(what, why) {
		if err := vc.WriteRole(ctx, mount, role, roleParams(res.AppRole.Params)); err != nil {
			return fmt.Errorf("writing AppRole %s: %w", what, err)
		}
	}
	return nil
}

// roleID chooses the role ID of a new role.
func (r *MinionBindingReconciler) roleID() string {
	if r.newRoleID != nil {
		return r.newRoleID()
	}
	return string(uuid.NewUUID())
}

// aliasOn returns the entity's alias on the mount with accessor, if any
// (Vault keeps at most one per entity and mount).
func aliasOn(e *vault.Entity, accessor string) *vault.Alias {
	if e == nil {
		return nil
	}
	for i, a := range e.Aliases {
		if a.MountAccessor == accessor {
			return &e.Aliases[i]
		}
	}
	return nil
}

// applyAlias links the entity to the AppRole login: an alias named by the
// role ID on the AppRole mount. Vault keeps one alias per entity and mount,
// and one per name and mount, so the alias is never created twice: the
// entity's alias on the mount is renamed when the role was re-created (its
// role ID changed), and a create moves an alias of that name that a
// minion's login attached to an entity Vault made up for it.
func (r *MinionBindingReconciler) applyAlias(ctx context.Context, vc vault.Client, mount, accessor string, entity *vault.Entity, sc *bindingScope, write func(what, why string) bool) error {
	onMount := aliasOn(entity, accessor)
	what := "entity alias " + sc.roleID
	switch {
	case onMount != nil && onMount.Name == sc.roleID:
		return nil
	case onMount != nil:
		if !write(what, fmt.Sprintf("the entity's alias on %s is %s; the role's ID is now %s (the role was re-created)", mount, onMount.Name, sc.roleID)) {
			return nil
		}
		err := vc.UpdateEntityAlias(ctx, onMount.ID, sc.roleID, "", "")
		if err == nil || !vault.Conflict(err) {
			return wrapAlias(err, mount)
		}
		// A minion logged in with the new role ID before us, and Vault
		// gave that login an entity of its own with an alias of this name:
		// drop our stale alias and move that one here.
		ctrl.LoggerFrom(ctx).Info("Moving the alias of a login to the minion's entity", "alias", sc.roleID, "entity", entity.Name)
		if err := vc.DeleteEntityAlias(ctx, onMount.ID); err != nil {
			return wrapAlias(err, mount)
		}
	default:
		if !write(what, "the entity has no alias on "+mount) {
			return nil
		}
	}
	_, err := vc.CreateEntityAlias(ctx, sc.roleID, accessor, entity.ID)
	return wrapAlias(err, mount)
}

func wrapAlias(err error, mount string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("writing the entity alias on auth/%s: %w", mount, err)
}

// desiredHash fingerprints what the binding renders for Vault, to tell
// "we changed" from "Vault drifted".
func desiredHash(vaultKey string, res *render.Result) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(vaultKey)
	_ = enc.Encode(res.AppRole)
	_ = enc.Encode(res.EntityName)
	md := make([]string, 0, len(res.EntityMetadata))
	for _, kv := range res.EntityMetadata {
		md = append(md, kv.Key+"="+kv.Value)
	}
	sort.Strings(md)
	_ = enc.Encode(md)
	return hex.EncodeToString(h.Sum(nil))[:16]
}
