package binding

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// bindingPipeline takes one binding through Vault: observe what its
// placements hold, plan with no side effect (planBinding, planRemovals),
// execute. Apply, a switch (the current placement and the stale ones),
// deletion (no current placement: every placement is stale) and
// `minionvault plan` run the same three steps; a plan differs only in
// what it can reach (the one Vault it reads: other placements are
// skipped), in the holders it can ask about (none: unknown), and in
// taking a marker that names the binding's namespace and name as its own
// (manifests have no UID).
type bindingPipeline struct {
	proof proof
	// reach is a client of the Vault a placement lives in.
	reach func(ctx context.Context, p ownership.Placement) (vault.Client, error)
	// holders is the state of the binding a claim names.
	holders func(ctx context.Context, c ownership.Claim, self ownership.Owner) (ownership.HolderState, error)
	// newRoleID chooses the role ID of a role created now.
	newRoleID func(self ownership.Owner, place ownership.RolePlace) string
}

// bindingWork is one run's input.
type bindingWork struct {
	obj *v1alpha1.MinionBinding
	// res is what the binding renders, vc the client of cur, the current
	// placement; all nil for a deletion.
	res    *render.Result
	vc     vault.Client
	cur    *ownership.Placement
	rivals ownership.Rivals
	// inv is the record of where the binding wrote.
	inv ownership.Inventory
	// stale are the placements the binding no longer needs; tpl is its
	// template (nil for a deletion whose template is gone), whose
	// deletion policy applies to them as placementPolicy says.
	stale []ownership.Placement
	tpl   *v1alpha1.MinionTemplate
	// mode shapes the plan; its newRoleID is chosen by plan.
	mode planMode
	// knownRoleID: the current placement's role is as the binding renders
	// it, under this role ID, and is not read (observeCurrent).
	knownRoleID string
}

// currentPlacement is where an admitted binding writes: the Vault of
// vaultKey, through its template's connection, with its template's
// deletion policy recorded.
func currentPlacement(a *admission.Admitted, vaultKey string) ownership.Placement {
	tpl, res := a.Template, a.Result
	return ownership.Placement{Vault: vaultKey, Connection: tpl.Spec.ConnectionRef.Name, Mount: res.AppRole.Mount,
		Entity: res.EntityName, DeletionPolicy: string(tpl.Spec.EffectiveDeletionPolicy())}
}

// applyWork is the input of an apply (a switch when inv records other
// placements than cur): what the admitted binding renders, written at
// cur through vc, and the removals at every placement of inv it no
// longer needs. cluster names the owners of the rivals' markers, hash is
// the binding's desiredHash. The reconciler adds what only it knows (the
// role ID known from an earlier check, the lost window).
func applyWork(obj *v1alpha1.MinionBinding, a *admission.Admitted, vc vault.Client, inv ownership.Inventory,
	cur ownership.Placement, cluster, hash string) bindingWork {
	return bindingWork{obj: obj, res: a.Result, vc: vc, cur: &cur, rivals: rivals(cluster, a), inv: inv,
		stale: inv.Stale(&cur), tpl: a.Template, mode: planModeOf(obj, a.Template, hash)}
}

// deletionWork is the input of a deletion: no current placement, every
// placement to look at stale (placesToLook: the record's and the one
// status names, whose Vault vaultOf gives). tpl is the binding's template,
// nil when it is gone.
func deletionWork(obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, inv ownership.Inventory, vaultOf func(conn string) string) bindingWork {
	return bindingWork{obj: obj, inv: inv, stale: placesToLook(obj, inv, vaultOf), tpl: tpl}
}

// policy is the deletion policy of a placement the run leaves.
func (w bindingWork) policy(p ownership.Placement) v1alpha1.DeletionPolicy {
	return placementPolicy(w.tpl, p.DeletionPolicy, w.cur == nil)
}

// placementPolicy is the deletion policy of a placement a binding leaves,
// recorded is the one recorded with it (the template's when it was
// written), deleting says whether the binding is being deleted:
//
//	deleting  template  recorded  policy
//	no        exists    set       recorded
//	no        exists    ""        the template's
//	yes       exists    any       the template's
//	yes       gone      set       recorded
//	yes       gone      ""        Delete
//
// A switch leaves a placement the binding wrote under the template of
// that time (another templateRef, or a template edited since): the
// recorded policy speaks for that placement, the current template's for
// where the binding writes now. A deletion leaves everything under the
// template as it is now: its policy is the owner's last word (set Retain
// on the template, then delete the bindings), and the recorded one stands
// in once the template is gone (a Retain is not lost by deleting the
// template first, nor by losing status). An apply always has its
// template.
func placementPolicy(tpl *v1alpha1.MinionTemplate, recorded string, deleting bool) v1alpha1.DeletionPolicy {
	switch {
	case deleting && tpl != nil:
		return tpl.Spec.EffectiveDeletionPolicy()
	case recorded != "":
		return v1alpha1.DeletionPolicy(recorded)
	case tpl != nil:
		return tpl.Spec.EffectiveDeletionPolicy()
	}
	return v1alpha1.DeletionPolicyDelete
}

// pipeline is the binding's pipeline against the cluster: its connections,
// and the bindings the API server knows.
func (r *Reconciler) pipeline(obj *v1alpha1.MinionBinding) *bindingPipeline {
	return &bindingPipeline{proof: r.proofOf(obj), reach: r.clientFor, holders: r.claimState, newRoleID: r.roleID}
}

// run is one pass of the pipeline: observe, plan, record where it is
// about to write (with the finalizer; a refused binding gets neither),
// execute. It returns the placements the record may forget.
func (r *Reconciler) run(ctx context.Context, w bindingWork, sc *bindingScope) ([]ownership.Placement, error) {
	pl := r.pipeline(w.obj)
	o, places, err := pl.observe(ctx, w, sc)
	if err != nil {
		return nil, err
	}
	plan, err := pl.plan(o, w)
	if err != nil {
		return nil, err
	}
	plan.noteIn(sc)
	if w.cur != nil {
		if err := r.recordBeforeWriting(ctx, w.obj, w.inv, *w.cur, plan.establishes()); err != nil {
			return nil, err
		}
	}
	ex, gone, err := pl.execute(ctx, w, plan, places, sc)
	if w.cur != nil {
		sc.entityID, sc.roleID = appliedIDs(o, plan, ex)
	}
	return gone, err
}

// observe reads the current placement (unless the binding is being
// deleted) and the stale ones, each through a client that reaches its
// Vault. Places that cannot be read are in the result with why, and
// stay recorded.
func (p *bindingPipeline) observe(ctx context.Context, w bindingWork, sc *bindingScope) (*observed, []stalePlace, error) {
	o := &observed{proof: p.proof}
	if w.cur != nil {
		var err error
		if o, err = p.observeCurrent(ctx, w.vc, w.obj, w.res, w.rivals, w.knownRoleID); err != nil {
			return nil, nil, err
		}
	}
	places, observedPlaces := p.observePlaces(ctx, w, o.entity, o.proof, sc)
	o.places = observedPlaces
	return o, places, nil
}

// plan decides what the run writes and deletes: the current placement
// brought to what the binding renders, then the removals at the stale
// places; only the removals for a deletion.
func (p *bindingPipeline) plan(o *observed, w bindingWork) (bindingPlan, error) {
	if w.cur == nil {
		return planRemovals(o.places, o.proof), nil
	}
	mode := w.mode
	mode.newRoleID = p.newRoleID(o.proof.self, ownership.RolePlace{Mount: w.res.AppRole.Mount, Role: w.res.AppRole.RoleName})
	plan, err := planBinding(w.res, o, mode)
	plan.newRoleID = mode.newRoleID
	return plan, err
}

// execute makes the plan's writes: at the current placement first, then
// the removals at each stale place with its own client. It returns what
// was done and the placements the record may forget (removed, retained,
// or in a Vault no connection reaches any more). A failure at the current
// placement stops it there.
func (p *bindingPipeline) execute(ctx context.Context, w bindingWork, plan bindingPlan, places []stalePlace, sc *bindingScope) (executed, []ownership.Placement, error) {
	var ex executed
	if w.cur != nil {
		var err error
		ex, err = execute(ctx, w.vc, plan.at(0))
		sc.done = ex.done
		if err != nil {
			return ex, nil, err
		}
	}
	var gone []ownership.Placement
	var errs []error
	for _, sp := range places {
		if sp.err == nil && !sp.gone {
			rx, err := execute(ctx, sp.vc, plan.at(sp.index))
			sc.done = append(sc.done, rx.done...)
			switch {
			case err != nil && sp.retain:
				sp.gone, sp.err = true, sc.unmarked(sp.p, err)
			case err != nil:
				sp.gone, sp.err = unreachable(ctx, sp, err, sc)
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
		return ex, gone, fmt.Errorf("removing %d of %d placements: %w", len(errs), len(places), errs[0])
	}
	return ex, gone, nil
}

// noteIn records the plan in the scope: status, events and metrics are
// derived from its actions.
func (plan bindingPlan) noteIn(sc *bindingScope) {
	sc.actions = append(sc.actions, plan.actions...)
	sc.notOwned = append(sc.notOwned, plan.notOwned...)
}

// unreachable sorts a failure at a stale placement: a name no Vault
// object can have, or refused although the credentials work (the
// operator's policy does not reach there), so the operator never wrote
// there (a record edited by hand): the record forgets it. Anything else
// (refused credentials included) keeps it recorded.
func unreachable(ctx context.Context, sp stalePlace, err error, sc *bindingScope) (gone bool, _ error) {
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

// errSkipped: a plan does not look at a placement in another Vault than
// the one it reads.
type errSkipped struct{ msg string }

func (e errSkipped) Error() string { return e.msg }

// placesToLook are the placements a deletion looks at: the record's, and
// the one status names (a record edited by hand may have lost it); there
// as anywhere, only what Vault proves the binding's is deleted. vaultOf
// is the Vault a connection reaches.
func placesToLook(obj *v1alpha1.MinionBinding, inv ownership.Inventory, vaultOf func(conn string) string) ownership.Inventory {
	f := statusFacts(obj)
	if f.place == nil {
		return inv
	}
	p := *f.place
	p.Vault = vaultOf(p.Connection)
	if !slices.ContainsFunc(inv, p.Same) {
		inv = append(slices.Clone(inv), p)
	}
	return inv
}
