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
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// removePlacement deletes what the binding has at p and does not need at
// cur (nil: the binding is being deleted, nothing is needed): the role
// lower(minionID) on p's mount and the entity named at p, each only when
// Vault proves it the binding's. The entity must carry the binding's owner
// marker (or, for the previous release's objects, the ID status recorded);
// the role must be linked to such an entity (the alias named by its role ID
// is on it). The record may have been edited by the tenant: what it names
// is only where to look. Objects not proven are left, and said so.
func (r *MinionBindingReconciler) removePlacement(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, p ownership.Placement, cur *ownership.Placement, sc *bindingScope) error {
	log := ctrl.LoggerFrom(ctx).WithValues("vault", p.Vault, "mount", p.Mount, "entity", p.Entity)
	self := r.owner(obj)
	roleName := strings.ToLower(obj.Spec.MinionID)
	roleStale := cur == nil || !p.SameRole(*cur)
	entityStale := cur == nil || !p.SameEntity(*cur)
	ours := func(e *vault.Entity) bool {
		return e != nil && ownership.Deletable(ownership.ClaimOf(true, e.Metadata, self), provenByStatus(obj, e))
	}

	// The old mount's accessor; "" when nothing is mounted there any more
	// (then no role or alias of it is left either).
	accessor, err := vc.MountAccessor(ctx, p.Mount)
	if err != nil {
		return fmt.Errorf("reading the accessor of auth/%s: %w", p.Mount, err)
	}
	var e *vault.Entity
	if entityStale {
		if e, err = vc.ReadEntityByName(ctx, p.Entity); err != nil {
			return fmt.Errorf("reading entity %s: %w", p.Entity, err)
		}
	}

	// The role first: its proof is the alias of the entity deleted below.
	if roleStale && accessor != "" {
		id, err := vc.ReadRoleID(ctx, p.Mount, roleName)
		if err != nil {
			return fmt.Errorf("reading the role ID of AppRole %s/%s: %w", p.Mount, roleName, err)
		}
		if id != "" {
			linked := false
			for _, cand := range []*vault.Entity{e, sc.entity} {
				if a := aliasOn(cand, accessor); a != nil && a.Name == id && ours(cand) {
					linked = true
				}
			}
			if !linked {
				holder, err := vc.LookupEntityByAlias(ctx, id, accessor)
				if err != nil {
					return fmt.Errorf("looking up the entity of AppRole %s/%s's role ID: %w", p.Mount, roleName, err)
				}
				linked = ours(holder)
			}
			if linked {
				log.Info("Deleting AppRole", "role", roleName)
				if err := vc.DeleteRole(ctx, p.Mount, roleName); err != nil {
					return fmt.Errorf("deleting AppRole %s/%s: %w", p.Mount, roleName, err)
				}
				sc.deleted = append(sc.deleted, "AppRole "+p.Mount+"/"+roleName)
			} else {
				sc.notOwned = append(sc.notOwned, fmt.Sprintf("AppRole %s/%s (not linked to an entity of this binding)", p.Mount, roleName))
			}
		}
	}

	switch {
	case entityStale && e == nil:
	case entityStale && ours(e):
		log.Info("Deleting entity", "entityID", e.ID)
		if err := vc.DeleteEntityByName(ctx, p.Entity); err != nil {
			return fmt.Errorf("deleting entity %s: %w", p.Entity, err)
		}
		sc.deleted = append(sc.deleted, "entity "+p.Entity)
	case entityStale:
		sc.notOwned = append(sc.notOwned, fmt.Sprintf("entity %s (it belongs to %s)", p.Entity, ownership.ClaimOf(true, e.Metadata, self).Describe()))
	case roleStale && accessor != "":
		// The entity stays (it is the current one, proven the binding's
		// by apply); its alias on the old mount goes with the old role.
		if a := aliasOn(sc.entity, accessor); a != nil {
			log.Info("Deleting the entity alias of the old AppRole mount", "alias", a.Name)
			if err := vc.DeleteEntityAlias(ctx, a.ID); err != nil {
				return fmt.Errorf("deleting entity alias %s: %w", a.Name, err)
			}
		}
	}
	return nil
}

// removeStale removes the objects of the placements in stale (none is
// cur) and returns the placements the record may forget: removed, retained
// (deletionPolicy Retain), or in a Vault no connection reaches any more.
func (r *MinionBindingReconciler) removeStale(ctx context.Context, obj *v1alpha1.MinionBinding, stale []ownership.Placement, cur *ownership.Placement, policy func(ownership.Placement) v1alpha1.DeletionPolicy, sc *bindingScope) ([]ownership.Placement, error) {
	var gone []ownership.Placement
	var errs []error
	for _, p := range stale {
		if policy(p) == v1alpha1.DeletionPolicyRetain {
			emit(r.Recorder, obj, "Normal", "Retained", "Reconcile", "%s retained (deletionPolicy Retain)", p)
			gone = append(gone, p)
			continue
		}
		vc, err := r.clientFor(ctx, p)
		switch {
		case err != nil && isGone(err):
			var g errConnectionGone
			if errors.As(err, &g) && g.replaced {
				// The connection now reaches another Vault (re-initialised,
				// restored): the old one, and its objects, are gone.
				ctrl.LoggerFrom(ctx).Info("Forgetting a place in a Vault no connection reaches any more", "place", p.String())
			} else {
				emit(r.Recorder, obj, "Warning", v1alpha1.DeletionBlockedReason, "Delete", "%s left in Vault: %v", p, err)
			}
			gone = append(gone, p)
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		if err := r.removePlacement(ctx, vc, obj, p, cur, sc); err != nil {
			if vault.Denied(err) && vc.CheckToken(ctx) == nil {
				// The credentials work, but the operator's policy does not
				// reach there, so it never wrote there: a record edited by
				// hand. (Refused credentials block the deletion instead.)
				sc.notOwned = append(sc.notOwned, fmt.Sprintf("%s (the operator may not read it: %v)", p, err))
				gone = append(gone, p)
				continue
			}
			errs = append(errs, err)
			continue
		}
		gone = append(gone, p)
	}
	if len(sc.notOwned) > 0 {
		emit(r.Recorder, obj, "Warning", v1alpha1.NotOwnedReason, "Delete",
			"left in Vault, not proven this binding's: %s", strings.Join(sc.notOwned, "; "))
	}
	if len(errs) > 0 {
		return gone, fmt.Errorf("removing %d of %d placements: %w", len(errs), len(stale), errs[0])
	}
	return gone, nil
}

// statusPlacement is where status says the binding's objects were
// written, or nothing.
func statusPlacement(ctx context.Context, c client.Client, obj *v1alpha1.MinionBinding) ownership.Inventory {
	st := &obj.Status
	if st.AppRole == nil || st.Entity == nil || st.Connection == "" || st.AppRole.Mount == "" || st.Entity.Name == "" {
		return nil
	}
	p := ownership.Placement{Connection: st.Connection, Mount: st.AppRole.Mount, Entity: st.Entity.Name, DeletionPolicy: string(st.DeletionPolicy)}
	p.Vault = connectionVault(ctx, c, st.Connection)
	return ownership.Inventory{p}
}

// errConnectionGone: no VaultConnection reaches a placement's Vault any
// more; nothing can delete there.
type errConnectionGone struct {
	msg string
	// replaced: connections exist, but reach other Vaults now.
	replaced bool
}

func (e errConnectionGone) Error() string { return e.msg }

func isGone(err error) bool {
	var g errConnectionGone
	return errors.As(err, &g)
}

// clientFor returns a client of the Vault a placement lives in: through the
// connection it was written with while that still reaches the same Vault,
// else through any connection that does (a placement is the Vault's, not
// the connection's).
func (r *MinionBindingReconciler) clientFor(ctx context.Context, p ownership.Placement) (vault.Client, error) {
	candidates := []string{p.Connection}
	if p.Vault != "" {
		list := &v1alpha1.VaultConnectionList{}
		if err := r.List(ctx, list); err != nil {
			return nil, err
		}
		for _, c := range list.Items {
			if c.Name != p.Connection && c.Status.ClusterID != "" && ownership.VaultKey(c.Status.ClusterID, c.Spec.Namespace) == p.Vault {
				candidates = append(candidates, c.Name)
			}
		}
	}
	var firstErr error
	reached := false
	for i, name := range candidates {
		vc, conn, err := r.Connections.Get(ctx, name)
		if err != nil {
			if isWaiting(err) && conn == nil {
				continue // no such connection
			}
			if i == 0 {
				// The connection the objects were written through exists
				// but fails: wait for it rather than guess another.
				return nil, err
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if p.Vault == "" {
			return vc, nil
		}
		key, err := vaultKey(ctx, vc, conn)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if key == p.Vault {
			return vc, nil
		}
		reached = true
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, errConnectionGone{msg: fmt.Sprintf("no VaultConnection reaches Vault %s any more", p.Vault), replaced: reached}
}

// record patches the binding's annotation to inv, if it differs.
func (r *MinionBindingReconciler) record(ctx context.Context, obj *v1alpha1.MinionBinding, inv ownership.Inventory) error {
	base := obj.DeepCopy()
	setInventory(obj, inv)
	if base.Annotations[v1alpha1.VaultObjectsAnnotation] == obj.Annotations[v1alpha1.VaultObjectsAnnotation] {
		return nil
	}
	if err := r.Patch(ctx, obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating annotation %s: %w", v1alpha1.VaultObjectsAnnotation, err)
	}
	return nil
}

// finalize removes the Vault objects of every recorded placement that
// Vault proves the binding's (unless the deletion policy says Retain), then
// the finalizer. A binding that never held its minion (a tenant's hand-set
// finalizer, a forged record) deletes nothing, and says why. It never
// wedges: objects never written or already gone, a broken record, and a
// connection that no longer exists let the deletion finish; only an
// unreachable Vault, or a connection that cannot log in yet (its Secret is
// missing), makes it wait and retry.
func (r *MinionBindingReconciler) finalize(ctx context.Context, obj *v1alpha1.MinionBinding, sc *bindingScope) error {
	log := ctrl.LoggerFrom(ctx)
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
		return nil
	}
	// The template's current policy; if the template is gone, the one
	// recorded with each placement (a Retain is not lost by deleting the
	// template first, nor by losing status).
	var current v1alpha1.DeletionPolicy
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, typesName(obj.Spec.TemplateRef.Name), tpl); err == nil {
		current = tpl.Spec.EffectiveDeletionPolicy()
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	policy := func(p ownership.Placement) v1alpha1.DeletionPolicy {
		switch {
		case current != "":
			return current
		case p.DeletionPolicy != "":
			return v1alpha1.DeletionPolicy(p.DeletionPolicy)
		}
		return v1alpha1.DeletionPolicyDelete
	}
	inv, err := r.inventory(ctx, obj)
	if err != nil {
		// Never wedge on a broken record: nothing it names is looked at.
		emit(r.Recorder, obj, "Warning", v1alpha1.DeletionBlockedReason, "Delete", "%v; looking only where status says the objects were written", err)
		inv = nil
	}
	// Where status says the objects were written is looked at too (a
	// record edited by hand may have lost it); there as anywhere, only
	// what Vault proves the binding's is deleted.
	for _, p := range statusPlacement(ctx, r.Client, obj) {
		if !slices.ContainsFunc(inv, p.Same) {
			inv = append(inv, p)
		}
	}
	// A connection that exists but cannot log in yet (its Secret is
	// missing): wait rather than leave an AppRole that still works.
	for _, p := range inv {
		if _, conn, err := r.Connections.Get(ctx, p.Connection); err != nil && isWaiting(err) && conn != nil && policy(p) != v1alpha1.DeletionPolicyRetain {
			sc.wait(v1alpha1.DeletionBlockedReason, "waiting to delete the Vault objects: "+err.Error())
			return nil
		}
	}
	if len(inv) == 0 {
		log.V(1).Info("Nothing was written to Vault; removing the finalizer")
	} else {
		gone, err := r.removeStale(ctx, obj, inv, nil, policy, sc)
		if err != nil {
			// Remember what is gone already; the finalizer stays.
			sc.fail(v1alpha1.DeletionBlockedReason, "deleting Vault objects: "+err.Error())
			return errors.Join(err, r.record(ctx, obj, inv.Without(gone)))
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
