package binding

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
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// apply brings the minion's role, entity and alias to what res renders,
// and removes what the stale placements of inv hold: the binding pipeline
// (observe, a pure plan, execute), with the record of where it writes
// patched in between. Everything is read and decided before the first
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
func (r *Reconciler) apply(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, a *admission.Admitted,
	inv ownership.Inventory, cur ownership.Placement, knownRoleID string, sc *bindingScope) error {
	res := a.Result
	sc.created = statusFacts(obj).appliedHash == ""
	sc.metadata = map[string]string{}
	for _, kv := range res.EntityMetadata {
		sc.metadata[kv.Key] = kv.Value
	}
	w := applyWork(obj, a, vc, inv, cur, r.ClusterID, sc.hash)
	w.knownRoleID, w.mode.window = knownRoleID, r.LostWindow
	// Never beside the collector's mark or collection of this entity: a
	// binding taking its lost objects back reads and writes them alone.
	unlock := r.Lost.Lock(cur.Vault, res.EntityName)
	gone, err := r.run(ctx, w, sc)
	unlock()
	if reason, _, refused := Refusal(err); refused && reason == v1alpha1.MinionIDLostReason {
		// The collector marks the loss (the window starts) and collects it
		// when the window ends; this claimant writes nothing.
		r.Lost.Notice(lostnotice.Candidate{Vault: cur.Vault, Connection: cur.Connection, Mount: res.AppRole.Mount,
			Role: res.AppRole.RoleName, Entity: res.EntityName})
	}
	if len(w.stale) == 0 {
		return err
	}
	// Left behind by a switch: the record forgets what is gone.
	if rerr := r.record(ctx, obj, inv.Merge(cur).Without(gone)); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// planModeOf is how the binding's template and last apply shape the plan.
func planModeOf(obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, hash string) planMode {
	return planMode{
		// Nothing changed on our side since the last successful apply: any
		// difference found now was made in Vault by someone else.
		unchanged:  statusFacts(obj).appliedHash == hash,
		detectOnly: tpl.Spec.DriftDetection == v1alpha1.DriftDetectionDetectOnly,
		adopt:      tpl.Spec.AdoptMinions,
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
func (r *Reconciler) roleID(self ownership.Owner, place ownership.RolePlace) string {
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
