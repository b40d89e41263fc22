package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"

	"k8s.io/apimachinery/pkg/util/uuid"

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
	inv ownership.Inventory, cur ownership.Placement, sc *bindingScope) error {
	sc.hash = desiredHash(sc.vault, res)
	sc.created = obj.Status.LastAppliedHash == ""
	o, err := r.observe(ctx, vc, obj, res)
	if err != nil {
		return err
	}
	stale := inv.Stale(&cur)
	places, observed := r.observePlaces(ctx, obj, stale, &cur, o.entity, recordedPolicy(tpl), o.proof, sc)
	o.places = observed
	plan, err := planBinding(res, o, r.planMode(obj, tpl, sc.hash))
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
	sc.entityID, sc.roleID = appliedIDs(o, plan.at(0), ex, err)
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

// planMode is how the binding's template and record shape the plan.
func (r *MinionBindingReconciler) planMode(obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, hash string) planMode {
	return planMode{
		// Nothing changed on our side since the last successful apply: any
		// difference found now was made in Vault by someone else.
		unchanged:  obj.Status.LastAppliedHash == hash,
		detectOnly: tpl.Spec.DriftDetection == v1alpha1.DriftDetectionDetectOnly,
		adopt:      tpl.Spec.AdoptMinions,
		newRoleID:  r.roleID(),
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
// when the entity step failed or was held (detect-only): nothing is
// linked then.
func appliedIDs(o *observed, actions []vaultAction, ex executed, err error) (entityID, roleID string) {
	var pending []vaultAction
	for _, a := range actions {
		if !a.held {
			pending = append(pending, a)
		}
	}
	if len(actions) > 0 && actions[0].object == objEntity && actions[0].kind == actCreate && actions[0].held {
		return "", ""
	}
	if err != nil && len(ex.done) < len(pending) && pending[len(ex.done)].object == objEntity {
		return "", ""
	}
	entityID, roleID = ex.entityID, ex.roleID
	if entityID == "" && o.entity != nil {
		entityID = o.entity.ID
	}
	if roleID == "" && o.role != nil {
		roleID = o.roleID
	}
	return entityID, roleID
}

// roleID chooses the role ID of a new role.
func (r *MinionBindingReconciler) roleID() string {
	if r.newRoleID != nil {
		return r.newRoleID()
	}
	return string(uuid.NewUUID())
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
