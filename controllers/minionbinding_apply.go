package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// apply reads the minion's role, entity and alias, and writes only what
// differs: a binding already in sync costs four reads (role, role ID, entity, mount accessor) and no write.
func (r *MinionBindingReconciler) apply(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, res *render.Result, sc *bindingScope) error {
	log := ctrl.LoggerFrom(ctx)
	sc.hash = desiredHash(res)
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
	actualRole, err := vc.ReadRole(ctx, mount, role)
	if err != nil {
		return err
	}
	if differs, why := roleDiffers(res.AppRole.Params, actualRole); differs && write("AppRole "+mount+"/"+role, why) {
		if err := vc.WriteRole(ctx, mount, role, roleParams(res.AppRole.Params)); err != nil {
			return err
		}
	}
	if sc.roleID, err = vc.ReadRoleID(ctx, mount, role); err != nil {
		return err
	}

	entity, err := vc.ReadEntityByName(ctx, res.EntityName)
	if err != nil {
		return err
	}
	var actualMD map[string]string
	if entity != nil {
		actualMD = entity.Metadata
	}
	previous := make([]string, 0)
	if st.Entity != nil {
		for k := range st.Entity.Metadata {
			previous = append(previous, k)
		}
	}
	desired := desiredMetadata(actualMD, res.EntityMetadata, previous)
	if entity == nil {
		if write("entity "+res.EntityName, "entity does not exist") {
			if entity, err = vc.WriteEntityByName(ctx, res.EntityName, desired); err != nil {
				return err
			}
		}
	} else if differs, why := metadataDiffers(desired, actualMD); differs && write("entity "+res.EntityName, why) {
		if entity, err = vc.WriteEntityByName(ctx, res.EntityName, desired); err != nil {
			return err
		}
	}
	sc.metadata = map[string]string{}
	for _, kv := range res.EntityMetadata {
		sc.metadata[kv.Key] = kv.Value
	}
	if entity == nil || sc.roleID == "" {
		return nil // detect-only with the objects missing: nothing to link
	}
	sc.entityID = entity.ID
	return r.applyAlias(ctx, vc, mount, entity, sc, write)
}

// applyAlias links the entity to the AppRole login: an alias named by the
// role ID on the AppRole mount. It looks before it creates, so a crash
// between two writes never leaves a duplicate, and it moves an alias that
// points at another entity.
func (r *MinionBindingReconciler) applyAlias(ctx context.Context, vc vault.Client, mount string, entity *vault.Entity, sc *bindingScope, write func(what, why string) bool) error {
	accessor, err := vc.MountAccessor(ctx, mount)
	if err != nil {
		return err
	}
	for _, a := range entity.Aliases {
		if a.Name == sc.roleID && a.MountAccessor == accessor {
			return nil
		}
	}
	existing, err := vc.LookupEntityAlias(ctx, sc.roleID, accessor)
	if err != nil {
		return err
	}
	if existing != nil {
		if existing.CanonicalID == entity.ID {
			return nil
		}
		if write("entity alias "+sc.roleID, "alias points at entity "+existing.CanonicalID) {
			return vc.UpdateEntityAlias(ctx, existing.ID, sc.roleID, accessor, entity.ID)
		}
		return nil
	}
	if write("entity alias "+sc.roleID, "alias does not exist") {
		_, err := vc.CreateEntityAlias(ctx, sc.roleID, accessor, entity.ID)
		return err
	}
	return nil
}

// desiredHash fingerprints what the binding renders for Vault, to tell
// "we changed" from "Vault drifted".
func desiredHash(res *render.Result) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
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

// finalize removes the minion's Vault objects (unless the template says
// Retain) and then the finalizer. It never wedges: an object never written,
// objects already gone, or a connection that no longer exists let the
// deletion finish; only an unreachable Vault, or a connection that cannot
// log in yet (its Secret is missing), makes it wait and retry.
func (r *MinionBindingReconciler) finalize(ctx context.Context, obj *v1alpha1.MinionBinding, sc *bindingScope) error {
	log := ctrl.LoggerFrom(ctx)
	st := &obj.Status
	// The template's current policy; if the template is gone, the one it
	// had when the binding was last applied (a Retain is not lost by
	// deleting the template first).
	policy := v1alpha1.DeletionPolicyDelete
	if st.DeletionPolicy != "" {
		policy = st.DeletionPolicy
	}
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, typesName(obj.Spec.TemplateRef.Name), tpl); err == nil {
		policy = tpl.Spec.EffectiveDeletionPolicy()
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	written := st.AppRole != nil || st.Entity != nil
	switch {
	case !written:
		log.V(1).Info("Nothing was written to Vault; removing the finalizer")
	case policy == v1alpha1.DeletionPolicyRetain:
		emit(r.Recorder, obj, "Normal", "Retained", "Delete", "Vault objects retained (deletionPolicy Retain)")
	default:
		vc, conn, err := r.Connections.Get(ctx, st.Connection)
		switch {
		case err != nil && isWaiting(err) && conn != nil:
			// The connection exists but cannot log in yet (its Secret is
			// missing): wait rather than leave an AppRole that still works.
			// (The Warning event comes with the condition's transition.)
			sc.wait(v1alpha1.DeletionBlockedReason, "waiting to delete the Vault objects: "+err.Error())
			return nil
		case err != nil && isWaiting(err):
			// The connection is gone: nothing can reach that Vault any more.
			emit(r.Recorder, obj, "Warning", v1alpha1.DeletionBlockedReason, "Delete",
				"Vault objects left in place: %v", err)
		case err != nil:
			sc.fail(v1alpha1.DeletionBlockedReason, "deleting Vault objects: "+err.Error())
			return err
		default:
			if err := r.deleteVaultObjects(ctx, vc, st); err != nil {
				sc.fail(v1alpha1.DeletionBlockedReason, "deleting Vault objects: "+err.Error())
				return err
			}
			emit(r.Recorder, obj, "Normal", "Deleted", "Delete", "AppRole, entity alias and entity deleted from Vault")
		}
	}
	base := obj.DeepCopy()
	if controllerutil.RemoveFinalizer(obj, v1alpha1.Finalizer) {
		if err := r.Patch(ctx, obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	sc.outcome = outcome{kind: outcomeReady, reason: v1alpha1.SucceededReason, message: "deleted"}
	return nil
}

func (r *MinionBindingReconciler) deleteVaultObjects(ctx context.Context, vc vault.Client, st *v1alpha1.MinionBindingStatus) error {
	if st.AppRole != nil {
		if st.AppRole.RoleID != "" {
			accessor, err := vc.MountAccessor(ctx, st.AppRole.Mount)
			if err != nil {
				return err
			}
			if a, err := vc.LookupEntityAlias(ctx, st.AppRole.RoleID, accessor); err != nil {
				return err
			} else if a != nil {
				if err := vc.DeleteEntityAlias(ctx, a.ID); err != nil {
					return err
				}
			}
		}
		if err := vc.DeleteRole(ctx, st.AppRole.Mount, st.AppRole.Name); err != nil {
			return err
		}
	}
	if st.Entity != nil && st.Entity.Name != "" {
		if err := vc.DeleteEntityByName(ctx, st.Entity.Name); err != nil {
			return err
		}
	}
	return nil
}
