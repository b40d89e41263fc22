package binding

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// bindingFacts are everything the binding reconciler reads back from a
// binding's status. Status is the operator's output; only the operator
// writes it (a tenant's RBAC has no status subresource), and these are
// its only reads, each for the reason given. None decides alone that a
// Vault object is the binding's: the owner marker and the role ID, which
// only the operator writes into Vault, do (pkg/ownership). Losing status
// (a restore, an edit with status rights) costs at most what each field
// says, never a write to someone else's object.
//
// Two reads live elsewhere: the admission gate's claim order
// (admission.Holds: a binding that wrote its minion's role comes before a
// newer claimant) and the watch index of the connections a binding wrote
// through (writtenThrough: status.connection wakes it).
type bindingFacts struct {
	// entityID and roleID prove the previous release's objects, which
	// carry no marker, the binding's (the upgrade proof). Lost: those
	// objects are refused NotOwned until the binding is marked some other
	// way (adoptMinions); the operator's own objects carry markers.
	entityID, roleID string
	// appliedHash is what the binding rendered at its last successful
	// apply: with the same rendering, any difference in Vault is drift
	// (the drift cache), and none means this is the first write (the
	// Created event). Lost: one extra "we changed" instead of "drift".
	appliedHash string
	// place is where status says the objects were written: a deletion
	// looks there too, when the record in the annotation (which a tenant
	// can edit) lost it (the finalize fallback). Its Vault is unknown.
	place *ownership.Placement
	// drift is the run of drift corrections so far, that DriftRecurring
	// counts. Lost: the run starts over.
	drift *v1alpha1.DriftCorrectionsStatus
	// settled: Ready (Succeeded) for the current spec, every reconcile
	// request handled. With appliedHash equal to what the binding renders
	// now, the binding waits for its drift check instead of being read at
	// once (inSync: a new process spreads its first checks). Lost: the
	// binding is read at once, as before a restart.
	settled bool
	// roleDigest is the roleFingerprint of the role as the operator last
	// wrote or found it (roleID its ID): a rendering whose role has that
	// fingerprint takes the role as known until the binding's check is
	// due (knownRoleID), so that a rollout after a restart reads only the
	// entity. Lost: the role is read once more.
	roleDigest string
}

// statusFacts reads the facts from obj's status.
func statusFacts(obj *v1alpha1.MinionBinding) bindingFacts {
	st := &obj.Status
	f := bindingFacts{appliedHash: st.LastAppliedHash, drift: st.DriftCorrections}
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ReadyCondition)
	f.settled = ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == v1alpha1.SucceededReason &&
		ready.ObservedGeneration == obj.Generation && st.ObservedGeneration == obj.Generation && !requested(obj)
	if st.Entity != nil {
		f.entityID = st.Entity.ID
	}
	if st.AppRole != nil {
		f.roleID, f.roleDigest = st.AppRole.RoleID, st.AppRole.ParamsDigest
	}
	if st.AppRole != nil && st.Entity != nil && st.Connection != "" && st.AppRole.Mount != "" && st.Entity.Name != "" {
		f.place = &ownership.Placement{Connection: st.Connection, Mount: st.AppRole.Mount, Entity: st.Entity.Name,
			DeletionPolicy: string(st.DeletionPolicy)}
	}
	return f
}
