package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// removePlacement deletes what the binding created at p and does not need
// at cur (nil: the binding is being deleted, nothing is needed): the alias
// on p's mount, the role lower(minionID) there, the entity named there.
//
// The record may have been edited by someone who may edit the binding but
// not other minions' objects, so what it names is checked against Vault: a
// role is only ever the one named by the binding's own minion ID (which no
// other binding may claim), and an entity is deleted only if it is the one
// status recorded, or it has no alias, or its aliases are named by role IDs
// of this minion's roles. An entity that fails the check is left, with a
// warning.
func (r *MinionBindingReconciler) removePlacement(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, p placement, cur *placement, sc *bindingScope) error {
	log := ctrl.LoggerFrom(ctx).WithValues("connection", p.Connection, "mount", p.Mount, "entity", p.Entity)
	roleName := strings.ToLower(obj.Spec.MinionID)
	roleStale := cur == nil || !p.sameRole(*cur)
	entityStale := cur == nil || !p.sameEntity(*cur)

	// The role IDs that name this minion's aliases: the one status
	// recorded, the current role's, and the stale role's (read before the
	// role is deleted).
	ours := []string{}
	if st := obj.Status.AppRole; st != nil && st.RoleID != "" {
		ours = append(ours, st.RoleID)
	}
	if sc.roleID != "" {
		ours = append(ours, sc.roleID)
	}
	// The old mount's accessor; "" when nothing is mounted there any more
	// (then no role or alias of it is left either).
	accessor, err := vc.MountAccessor(ctx, p.Mount)
	if err != nil {
		return fmt.Errorf("reading the accessor of auth/%s: %w", p.Mount, err)
	}
	if roleStale && accessor != "" {
		id, err := vc.ReadRoleID(ctx, p.Mount, roleName)
		if err != nil {
			return fmt.Errorf("reading the role ID of AppRole %s/%s: %w", p.Mount, roleName, err)
		}
		if id != "" {
			ours = append(ours, id)
		}
	}

	if entityStale {
		e, err := vc.ReadEntityByName(ctx, p.Entity)
		if err != nil {
			return fmt.Errorf("reading entity %s: %w", p.Entity, err)
		}
		switch {
		case e == nil:
		case entityIsOurs(e, obj.Status.Entity, ours):
			log.Info("Deleting entity", "entityID", e.ID)
			if err := vc.DeleteEntityByName(ctx, p.Entity); err != nil {
				return fmt.Errorf("deleting entity %s: %w", p.Entity, err)
			}
			sc.deleted = append(sc.deleted, "entity "+p.Entity)
		default:
			emit(r.Recorder, obj, "Warning", "EntityNotOwned", "Delete",
				"entity %s was left in Vault: it is recorded in annotation %s but its aliases belong to other logins", p.Entity, v1alpha1.VaultObjectsAnnotation)
		}
	} else if roleStale && sc.entity != nil && accessor != "" {
		// The entity stays (it is the current one); its alias on the old
		// mount goes with the old role.
		for _, a := range sc.entity.Aliases {
			if a.MountAccessor == accessor {
				log.Info("Deleting the entity alias of the old AppRole mount", "alias", a.Name)
				if err := vc.DeleteEntityAlias(ctx, a.ID); err != nil {
					return fmt.Errorf("deleting entity alias %s: %w", a.Name, err)
				}
			}
		}
	}

	if roleStale && accessor != "" {
		log.Info("Deleting AppRole", "role", roleName)
		if err := vc.DeleteRole(ctx, p.Mount, roleName); err != nil {
			return fmt.Errorf("deleting AppRole %s/%s: %w", p.Mount, roleName, err)
		}
		sc.deleted = append(sc.deleted, "AppRole "+p.Mount+"/"+roleName)
	}
	return nil
}

// entityIsOurs: the entity is the one status recorded, or it has no alias
// (so no login can use it), or every alias it has is named by a role ID of
// this minion.
func entityIsOurs(e *vault.Entity, recorded *v1alpha1.EntityStatus, roleIDs []string) bool {
	if recorded != nil && recorded.ID != "" && recorded.ID == e.ID {
		return true
	}
	for _, a := range e.Aliases {
		if !slices.Contains(roleIDs, a.Name) {
			return false
		}
	}
	return true
}

// removeStale removes every recorded placement other than cur and returns
// the placements still to be recorded. With a Retain policy the objects
// stay in Vault and only the record forgets them.
func (r *MinionBindingReconciler) removeStale(ctx context.Context, obj *v1alpha1.MinionBinding, recorded []placement, cur *placement, policy v1alpha1.DeletionPolicy, sc *bindingScope) ([]placement, error) {
	keep := []placement{}
	var errs []error
	for _, p := range recorded {
		if cur != nil && p.same(*cur) {
			keep = append(keep, p)
			continue
		}
		if policy == v1alpha1.DeletionPolicyRetain {
			emit(r.Recorder, obj, "Normal", "Retained", "Reconcile", "%s retained (deletionPolicy Retain)", p)
			continue
		}
		vc, conn, err := r.Connections.Get(ctx, p.Connection)
		switch {
		case err != nil && isWaiting(err) && conn == nil:
			// The connection is gone: nothing can reach that Vault any more.
			emit(r.Recorder, obj, "Warning", v1alpha1.DeletionBlockedReason, "Delete", "%s left in Vault: %v", p, err)
			continue
		case err != nil:
			keep = append(keep, p)
			errs = append(errs, err)
			continue
		}
		if err := r.removePlacement(ctx, vc, obj, p, cur, sc); err != nil {
			keep = append(keep, p)
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return keep, fmt.Errorf("removing %d of %d placements: %w", len(errs), len(recorded), errs[0])
	}
	return keep, nil
}

// record patches the binding's annotation to ps, if it differs.
func (r *MinionBindingReconciler) record(ctx context.Context, obj *v1alpha1.MinionBinding, ps []placement) error {
	base := obj.DeepCopy()
	setPlacements(obj, ps)
	if base.Annotations[v1alpha1.VaultObjectsAnnotation] == obj.Annotations[v1alpha1.VaultObjectsAnnotation] {
		return nil
	}
	if err := r.Patch(ctx, obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating annotation %s: %w", v1alpha1.VaultObjectsAnnotation, err)
	}
	return nil
}

// finalize removes every Vault object the binding recorded (unless the
// deletion policy says Retain), then the finalizer. It never wedges: objects
// never written or already gone, and a connection that no longer exists,
// let the deletion finish; only an unreachable Vault, or a connection that
// cannot log in yet (its Secret is missing), makes it wait and retry.
func (r *MinionBindingReconciler) finalize(ctx context.Context, obj *v1alpha1.MinionBinding, sc *bindingScope) error {
	log := ctrl.LoggerFrom(ctx)
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
		return nil
	}
	// The template's current policy; if the template is gone, the one it
	// had when the binding was last applied (a Retain is not lost by
	// deleting the template first).
	policy := v1alpha1.DeletionPolicyDelete
	if obj.Status.DeletionPolicy != "" {
		policy = obj.Status.DeletionPolicy
	}
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, typesName(obj.Spec.TemplateRef.Name), tpl); err == nil {
		policy = tpl.Spec.EffectiveDeletionPolicy()
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	recorded, err := recordedPlacements(obj)
	if err != nil {
		// Never wedge on a broken record: what status names is still known.
		emit(r.Recorder, obj, "Warning", v1alpha1.DeletionBlockedReason, "Delete", "%v; deleting what status records", err)
		recorded = nil
		if st := obj.Status; st.AppRole != nil && st.Entity != nil && st.Connection != "" {
			recorded = []placement{{Connection: st.Connection, Mount: st.AppRole.Mount, Entity: st.Entity.Name}}
		}
	}
	// A connection that exists but cannot log in yet (its Secret is
	// missing): wait rather than leave an AppRole that still works.
	for _, p := range recorded {
		if _, conn, err := r.Connections.Get(ctx, p.Connection); err != nil && isWaiting(err) && conn != nil && policy != v1alpha1.DeletionPolicyRetain {
			sc.wait(v1alpha1.DeletionBlockedReason, "waiting to delete the Vault objects: "+err.Error())
			return nil
		}
	}
	switch {
	case len(recorded) == 0:
		log.V(1).Info("Nothing was written to Vault; removing the finalizer")
	default:
		keep, err := r.removeStale(ctx, obj, recorded, nil, policy, sc)
		if err != nil {
			// Remember what is gone already; the finalizer stays.
			sc.fail(v1alpha1.DeletionBlockedReason, "deleting Vault objects: "+err.Error())
			return errors.Join(err, r.record(ctx, obj, keep))
		}
		if len(sc.deleted) > 0 {
			emit(r.Recorder, obj, "Normal", "Deleted", "Delete", "Deleted from Vault: %s", strings.Join(sc.deleted, ", "))
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
