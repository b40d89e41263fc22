package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// apply brings the minion's role, entity and alias to what res renders,
// writing only what differs. Its cost is what the fleet pays per binding:
//
//   - a binding applied before, Vault in sync: three reads (the role, its
//     role ID, the entity with its aliases) and no write;
//   - a new binding: the role written without reading it first (nothing
//     records it, so it is written either way), its role ID read, the
//     entity read and created, the alias created: three writes, two reads.
//
// The mount's accessor comes from the client's cache (sys/auth is read once
// per connection, and again when Vault changes).
func (r *MinionBindingReconciler) apply(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, res *render.Result, sc *bindingScope) error {
	log := ctrl.LoggerFrom(ctx)
	sc.hash = desiredHash(sc.conn, res)
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
	applied := st.LastAppliedHash != "" && st.Connection == sc.conn && st.AppRole != nil &&
		st.AppRole.Mount == mount && strings.EqualFold(st.AppRole.Name, role)
	if applied || r.readBeforeEveryWrite {
		actualRole, err := vc.ReadRole(ctx, mount, role)
		if err != nil {
			return fmt.Errorf("reading AppRole %s/%s: %w", mount, role, err)
		}
		if differs, why := roleDiffers(res.AppRole.Params, actualRole); differs && write("AppRole "+mount+"/"+role, why) {
			if err := vc.WriteRole(ctx, mount, role, roleParams(res.AppRole.Params)); err != nil {
				return fmt.Errorf("writing AppRole %s/%s: %w", mount, role, err)
			}
		}
	} else if write("AppRole "+mount+"/"+role, "not written by this binding yet") {
		if err := vc.WriteRole(ctx, mount, role, roleParams(res.AppRole.Params)); err != nil {
			return fmt.Errorf("writing AppRole %s/%s: %w", mount, role, err)
		}
	}
	roleID, err := vc.ReadRoleID(ctx, mount, role)
	if err != nil {
		return fmt.Errorf("reading the role ID of AppRole %s/%s: %w", mount, role, err)
	}
	sc.roleID = roleID

	entity, err := vc.ReadEntityByName(ctx, res.EntityName)
	if err != nil {
		return fmt.Errorf("reading entity %s: %w", res.EntityName, err)
	}
	var actualMD map[string]string
	if entity != nil {
		actualMD = entity.Metadata
	}
	var previous []string
	if st.Entity != nil {
		for k := range st.Entity.Metadata {
			previous = append(previous, k)
		}
	}
	desired := desiredMetadata(actualMD, res.EntityMetadata, previous)
	sc.metadata = map[string]string{}
	for _, kv := range res.EntityMetadata {
		sc.metadata[kv.Key] = kv.Value
	}
	if entity == nil {
		if !write("entity "+res.EntityName, "entity does not exist") {
			return nil // detect-only, and nothing to link an alias to
		}
		id, err := vc.WriteEntityByName(ctx, res.EntityName, desired)
		if err != nil {
			return fmt.Errorf("creating entity %s: %w", res.EntityName, err)
		}
		if id == "" {
			// Created by someone else between our read and write: Vault
			// updated it instead. Read it for its ID and aliases.
			if entity, err = vc.ReadEntityByName(ctx, res.EntityName); err != nil || entity == nil {
				return fmt.Errorf("reading entity %s after writing it: %w", res.EntityName, vaultState(err, "the entity vanished"))
			}
		} else {
			entity = &vault.Entity{ID: id, Name: res.EntityName, Metadata: desired}
		}
	} else if differs, why := metadataDiffers(desired, actualMD); differs && write("entity "+res.EntityName, why) {
		if _, err := vc.WriteEntityByName(ctx, res.EntityName, desired); err != nil {
			return fmt.Errorf("writing entity %s: %w", res.EntityName, err)
		}
	}
	sc.entityID = entity.ID
	sc.entity = entity
	if roleID == "" {
		return nil // detect-only with the role missing: nothing to link
	}
	return r.applyAlias(ctx, vc, mount, entity, sc, write)
}

// applyAlias links the entity to the AppRole login: an alias named by the
// role ID on the AppRole mount. Vault keeps one alias per entity and mount,
// and one per name and mount, so the alias is never created twice: the
// entity's alias on the mount is renamed when the role was re-created (its
// role ID changed), and a create moves an alias of that name that a
// minion's login attached to an entity Vault made up for it.
func (r *MinionBindingReconciler) applyAlias(ctx context.Context, vc vault.Client, mount string, entity *vault.Entity, sc *bindingScope, write func(what, why string) bool) error {
	accessor, err := vc.MountAccessor(ctx, mount)
	if err != nil {
		return fmt.Errorf("reading the accessor of auth/%s: %w", mount, err)
	}
	if accessor == "" {
		return vaultState(nil, fmt.Sprintf("no auth method is mounted at auth/%s", mount))
	}
	var onMount *vault.Alias
	for i, a := range entity.Aliases {
		if a.MountAccessor == accessor {
			onMount = &entity.Aliases[i]
		}
	}
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
	_, err = vc.CreateEntityAlias(ctx, sc.roleID, accessor, entity.ID)
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
func desiredHash(conn string, res *render.Result) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(conn)
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

// errVaultState is Vault's state refusing the operator (a mount missing,
// an object vanishing between two requests): repaired by Vault or the next
// try, so it is retried with backoff like vault.Conflict.
type errVaultState struct {
	msg string
	err error
}

func (e *errVaultState) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *errVaultState) Unwrap() error { return e.err }

// vaultState returns err when it is a Vault error, else a state error.
func vaultState(err error, msg string) error {
	if err != nil {
		return err
	}
	return &errVaultState{msg: msg}
}
