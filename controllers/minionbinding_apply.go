package controllers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"sort"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// apply brings the minion's role, entity and alias to what res renders,
// and removes what the stale placements of inv hold: observe, then a pure
// plan, then execute. Everything is read and decided before the first
// write, so a refusal writes nothing, and only objects Vault proves the
// binding's (pkg/ownership) are written or deleted. Its cost is what the
// fleet pays per binding:
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
func (r *MinionBindingReconciler) apply(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, res *render.Result,
	rivals ownership.Rivals, inv ownership.Inventory, cur ownership.Placement, sc *bindingScope) error {
	sc.hash = desiredHash(sc.vault, res)
	sc.created = obj.Status.LastAppliedHash == ""
	o, err := r.observe(ctx, vc, obj, res, rivals)
	if err != nil {
		return err
	}
	stale := inv.Stale(&cur)
	places, observed := r.observePlaces(ctx, obj, stale, &cur, o.entity, recordedPolicy(tpl), o.proof, sc)
	o.places = observed
	plan, err := planBinding(res, o, r.planMode(obj, tpl, res, o.proof.self, sc.hash))
	if err != nil {
		return err
	}
	sc.actions = plan.actions
	sc.notOwned = append(sc.notOwned, plan.notOwned...)
	sc.metadata = map[string]string{}
	for _, kv := range res.EntityMetadata {
		sc.metadata[kv.Key] = kv.Value
	}
	if sc.beforeWrite != nil {
		if err := sc.beforeWrite(); err != nil {
			return err
		}
	}
	ex, err := execute(ctx, vc, plan.at(0))
	sc.done = ex.done
	sc.entityID, sc.roleID = appliedIDs(o, plan, ex)
	if err != nil || len(stale) == 0 {
		return err
	}
	// Left behind by a switch: deleted under the policy recorded when
	// they were written.
	gone, err := r.removeAt(ctx, places, plan, sc)
	if rerr := r.record(ctx, obj, inv.Merge(cur).Without(gone)); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// planMode is how the binding's template and record shape the plan. self
// is the owner the role ID of a new role is chosen for.
func (r *MinionBindingReconciler) planMode(obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, res *render.Result, self ownership.Owner, hash string) planMode {
	return planMode{
		// Nothing changed on our side since the last successful apply: any
		// difference found now was made in Vault by someone else.
		unchanged:  obj.Status.LastAppliedHash == hash,
		detectOnly: tpl.Spec.DriftDetection == v1alpha1.DriftDetectionDetectOnly,
		adopt:      tpl.Spec.AdoptMinions,
		newRoleID:  r.roleID(self, ownership.RolePlace{Mount: res.AppRole.Mount, Role: res.AppRole.RoleName}),
	}
}

// recordedPolicy is the deletion policy of a stale placement: the one
// recorded when it was written, else the template's.
func recordedPolicy(tpl *v1alpha1.MinionTemplate) func(ownership.Placement) v1alpha1.DeletionPolicy {
	return func(p ownership.Placement) v1alpha1.DeletionPolicy {
		if p.DeletionPolicy != "" {
			return v1alpha1.DeletionPolicy(p.DeletionPolicy)
		}
		return tpl.Spec.EffectiveDeletionPolicy()
	}
}

// appliedIDs are the entity and role IDs status records: what exists and
// is the binding's after the execution, even a failed one (deletion tells
// the entity it created from someone else's by it). Nothing is recorded
// while the entity is not the binding's: its write failed or was held
// (detect-only), or it was handed over and not created anew yet; nothing
// is linked then.
func appliedIDs(o *observed, plan bindingPlan, ex executed) (entityID, roleID string) {
	entityID = ex.entityID
	switch plan.decided.entity.Decision {
	case ownership.Keep:
		entityID = o.entity.ID
	case ownership.Take:
		if slices.ContainsFunc(ex.done, func(a vaultAction) bool { return a.object == objEntity }) {
			entityID = o.entity.ID
		}
	}
	if entityID == "" {
		return "", ""
	}
	roleID = ex.roleID
	if d := plan.decided.role.Decision; roleID == "" && (d == ownership.Keep || d == ownership.Take) {
		roleID = o.roleID
	}
	return entityID, roleID
}

// roleID chooses the role ID of a new role for self at place: random, and
// provably self's (ownership.NewRoleID).
func (r *MinionBindingReconciler) roleID(self ownership.Owner, place ownership.RolePlace) string {
	var random [16]byte
	if r.random != nil {
		random = r.random()
	} else {
		_, _ = rand.Read(random[:]) // never fails (crypto/rand)
	}
	return ownership.NewRoleID(self, place, random)
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
