package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// stalePlace is one placement the binding no longer needs, on its way
// through observe, plan and execute.
type stalePlace struct {
	p  ownership.Placement
	vc vault.Client
	// gone: the record may forget it without touching Vault: retained
	// (deletionPolicy Retain), or in a Vault no connection reaches.
	gone bool
	err  error // reaching or reading it failed: it stays recorded
	// retain: left in Vault by deletionPolicy Retain; only its entity's
	// retained mark is written, when Vault can be reached.
	retain bool
	// index is its place in the plan (observed.places index plus one).
	index int
}

// observePlaces reads what the stale placements hold, each through a
// connection that reaches its Vault. cur is the current placement and
// current its entity as observed (nil: the binding is being deleted). A
// place retained by the deletion policy is read too: its entity is marked
// retained, so that the objects are kept for this binding (see
// ownership.RetainedKey). Retaining never waits for Vault: a place whose
// Vault cannot be reached or read is forgotten unmarked, with a warning.
func (r *MinionBindingReconciler) observePlaces(ctx context.Context, obj *v1alpha1.MinionBinding, stale []ownership.Placement,
	cur *ownership.Placement, current *vault.Entity, policy func(ownership.Placement) v1alpha1.DeletionPolicy, pr proof, sc *bindingScope) ([]stalePlace, []placeObserved) {
	var places []stalePlace
	var observed []placeObserved
	for _, p := range stale {
		retain := policy(p) == v1alpha1.DeletionPolicyRetain
		sp := stalePlace{p: p, retain: retain}
		if retain {
			sc.retained = append(sc.retained, p.String())
		}
		sp.vc, sp.err = r.clientFor(ctx, p)
		if sp.err != nil && retain {
			sp.gone, sp.err = true, sc.unmarked(p, sp.err)
		}
		if sp.err != nil && isGone(sp.err) {
			var g errConnectionGone
			if errors.As(sp.err, &g) && g.replaced {
				// The connection now reaches another Vault (re-initialised,
				// restored): the old one, and its objects, are gone.
				ctrl.LoggerFrom(ctx).Info("Forgetting a place in a Vault no connection reaches any more", "place", p.String())
			} else if !retain {
				sc.unreachable = append(sc.unreachable, fmt.Sprintf("%s: %v", p, sp.err))
			}
			sp.gone, sp.err = true, nil
		}
		if sp.err == nil && !sp.gone {
			var po placeObserved
			po, sp.err = observePlace(ctx, sp.vc, p, cur, current, strings.ToLower(obj.Spec.MinionID), pr, retain)
			switch {
			case sp.err != nil && retain:
				sp.gone, sp.err = true, sc.unmarked(p, sp.err)
			case sp.err != nil:
				sp.gone, sp.err = r.unreachable(ctx, sp, sp.err, sc)
			default:
				observed = append(observed, po)
				sp.index = len(observed)
			}
		}
		places = append(places, sp)
	}
	return places, observed
}

// observePlace reads the old mount's accessor, the old entity, the old
// role's role ID and, when the entities read do not link the role, whose
// login it leads to; for a place retained, the old entity only.
func observePlace(ctx context.Context, vc vault.Client, p ownership.Placement, cur *ownership.Placement, current *vault.Entity, roleName string, pr proof, retain bool) (placeObserved, error) {
	po := placeObserved{place: p, roleName: roleName, retain: retain, roleStale: cur == nil || !p.SameRole(*cur), entityStale: cur == nil || !p.SameEntity(*cur)}
	if retain {
		po.at = time.Now()
		var err error
		if po.entityStale {
			if po.entity, err = vc.ReadEntityByName(ctx, p.Entity); err != nil {
				return po, fmt.Errorf("reading entity %s: %w", p.Entity, err)
			}
		}
		return po, nil
	}
	if cur != nil && p.Vault == cur.Vault && (p.Vault != "" || p.Connection == cur.Connection) {
		po.current = current
	}
	var err error
	if po.accessor, err = vc.MountAccessor(ctx, p.Mount); err != nil {
		return po, fmt.Errorf("reading the accessor of auth/%s: %w", p.Mount, err)
	}
	if po.entityStale {
		if po.entity, err = vc.ReadEntityByName(ctx, p.Entity); err != nil {
			return po, fmt.Errorf("reading entity %s: %w", p.Entity, err)
		}
	}
	if !po.roleStale || po.accessor == "" {
		return po, nil
	}
	if po.roleID, err = vc.ReadRoleID(ctx, p.Mount, roleName); err != nil {
		return po, fmt.Errorf("reading the role ID of AppRole %s/%s: %w", p.Mount, roleName, err)
	}
	po.roleProven = po.roleID != "" && pr.roleClaim(po.roleID, p.Mount, roleName, nil).Holder == ownership.HolderSelf
	if po.roleID != "" && !po.roleProven && !po.linked(pr, po.entity, po.current) {
		if po.roleHolder, err = vc.LookupEntityByAlias(ctx, po.roleID, po.accessor); err != nil {
			return po, fmt.Errorf("looking up the entity of AppRole %s/%s's role ID: %w", p.Mount, roleName, err)
		}
	}
	return po, nil
}

// unreachable sorts a failure at a stale placement: a name no Vault
// object can have, or refused although the credentials work (the
// operator's policy does not reach there), so the operator never wrote
// there (a record edited by hand): the record forgets it. Anything else
// (refused credentials included) keeps it recorded.
func (r *MinionBindingReconciler) unreachable(ctx context.Context, sp stalePlace, err error, sc *bindingScope) (gone bool, _ error) {
	if errors.Is(err, vault.ErrInvalid) {
		sc.notOwned = append(sc.notOwned, fmt.Sprintf("%s (no Vault object can have that name: %v)", sp.p, err))
		return true, nil
	}
	if vault.Denied(err) && sp.vc.CheckToken(ctx) == nil {
		sc.notOwned = append(sc.notOwned, fmt.Sprintf("%s (the operator may not read it: %v)", sp.p, err))
		return true, nil
	}
	return false, err
}

// removeAt executes the plan's removals at each stale placement with its
// own client and returns the placements the record may forget: removed,
// retained, or in a Vault no connection reaches any more.
func (r *MinionBindingReconciler) removeAt(ctx context.Context, places []stalePlace, plan bindingPlan, sc *bindingScope) ([]ownership.Placement, error) {
	var gone []ownership.Placement
	var errs []error
	for _, sp := range places {
		if sp.err == nil && !sp.gone {
			ex, err := execute(ctx, sp.vc, plan.at(sp.index))
			sc.done = append(sc.done, ex.done...)
			switch {
			case err != nil && sp.retain:
				sp.gone, sp.err = true, sc.unmarked(sp.p, err)
			case err != nil:
				sp.gone, sp.err = r.unreachable(ctx, sp, err, sc)
			default:
				sp.gone = true
			}
		}
		if sp.err != nil {
			errs = append(errs, sp.err)
		} else if sp.gone {
			gone = append(gone, sp.p)
		}
	}
	if len(errs) > 0 {
		return gone, fmt.Errorf("removing %d of %d placements: %w", len(errs), len(places), errs[0])
	}
	return gone, nil
}

// removeStale observes, plans and removes the objects of the placements
// in stale when the binding is being deleted.
func (r *MinionBindingReconciler) removeStale(ctx context.Context, obj *v1alpha1.MinionBinding, stale []ownership.Placement, policy func(ownership.Placement) v1alpha1.DeletionPolicy, sc *bindingScope) ([]ownership.Placement, error) {
	pr := r.proofOf(obj)
	places, observed := r.observePlaces(ctx, obj, stale, nil, nil, policy, pr, sc)
	plan := planRemovals(observed, pr)
	sc.actions = append(sc.actions, plan.actions...)
	sc.notOwned = append(sc.notOwned, plan.notOwned...)
	return r.removeAt(ctx, places, plan, sc)
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

// unmarked notes a retained place whose entity could not be marked
// retained; the place is forgotten all the same (nil error).
func (sc *bindingScope) unmarked(p ownership.Placement, err error) error {
	sc.unmarkedRetain = append(sc.unmarkedRetain, fmt.Sprintf("%s: %v", p, err))
	return nil
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
			if waitingOn(err, waitingForConnection) {
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
		sc.brokenRecord = err.Error()
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
		if _, _, err := r.Connections.Get(ctx, p.Connection); waitingOn(err, waitingForCredential) && policy(p) != v1alpha1.DeletionPolicyRetain {
			sc.wait(v1alpha1.DeletionBlockedReason, "waiting to delete the Vault objects: "+err.Error())
			return nil
		}
	}
	if len(inv) == 0 {
		log.V(1).Info("Nothing was written to Vault; removing the finalizer")
	} else {
		gone, err := r.removeStale(ctx, obj, inv, policy, sc)
		if err != nil {
			// Remember what is gone already; the finalizer stays.
			sc.fail(v1alpha1.DeletionBlockedReason, "deleting Vault objects: "+err.Error())
			return errors.Join(err, r.record(ctx, obj, inv.Without(gone)))
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
