package binding

import (
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// lastSyncRefresh is how old status.lastSyncTime may get while Vault is
// found in sync: moving it on every resync would cost a status write per
// binding per interval, for a timestamp.
const lastSyncRefresh = 24 * time.Hour

// finishStatus derives the status from what the reconcile saw.
func (r *Reconciler) finishStatus(obj *v1alpha1.MinionBinding, sc *bindingScope) {
	if !obj.DeletionTimestamp.IsZero() && sc.outcome.Kind == outcome.OutcomeReady {
		return // the object is going away; its status no longer matters
	}
	st := &obj.Status
	if res := sc.result; res != nil {
		st.Policies = res.Policies
		st.PillarPaths = res.PillarPaths
		st.PolicyDocuments = nil
		for _, d := range res.PolicyDocuments {
			st.PolicyDocuments = append(st.PolicyDocuments, d.Name)
		}
	}
	// What was written is recorded even when a later write failed, so that
	// deletion can tell the entity it created from someone else's.
	if res := sc.result; res != nil && (sc.roleID != "" || sc.entityID != "") {
		st.Connection = sc.conn
		st.AppRole = &v1alpha1.AppRoleStatus{Mount: res.AppRole.Mount, Name: res.AppRole.RoleName, RoleID: sc.roleID, ParamsDigest: sc.roleDigest}
		if sc.entityID != "" {
			st.Entity = &v1alpha1.EntityStatus{Name: res.EntityName, ID: sc.entityID, Metadata: sc.metadata}
		}
		if sc.tpl != nil {
			st.DeletionPolicy = sc.tpl.Spec.EffectiveDeletionPolicy()
		}
	}
	if sc.outcome.Kind != outcome.OutcomeReady && sc.applied && st.AppRole != nil {
		// Whatever the failed reconcile did to the role is not known. One
		// that waited before Vault (a template or connection not ready, a
		// new process's first minutes) changed nothing: dropping the digest
		// then made its rollout read the role (4 role reads for 40 bindings
		// in the e2e rollout after a restart).
		st.AppRole.ParamsDigest = ""
	}
	if sc.outcome.Kind == outcome.OutcomeReady && sc.result != nil {
		now := metav1.Now()
		if sc.wrote() || st.LastSyncTime == nil || now.Sub(st.LastSyncTime.Time) > lastSyncRefresh {
			st.LastSyncTime = &now
		}
		// In detect-only mode the drift stays, so the hash stays too.
		drift, corrected := sc.drift()
		if len(drift) == 0 || corrected {
			st.LastAppliedHash = sc.hash
		}
		if len(drift) > 0 && !corrected {
			sc.outcome = outcome.Outcome{Kind: outcome.OutcomeReady, Reason: "DriftDetected", Message: "Vault differs from the binding (detect-only): " + strings.Join(drift, "; ")}
		}
		sc.driftRun = trackDrift(st, sc.correctedObjects(), r.now())
	}
	if v := obj.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]; v != "" && sc.handled {
		st.LastHandledReconcileAt = v
	}
	st.ObservedGeneration = obj.Generation
	outcome.SetConditions(obj, sc.outcome)
	if drift, corrected := sc.drift(); corrected {
		setDriftRecurring(obj, drift)
	} else {
		setDriftRecurring(obj, nil)
	}
}

// correctedObjects names the objects this reconcile wrote back after
// someone else changed them.
func (sc *bindingScope) correctedObjects() []string {
	if sc.outcome.Kind != outcome.OutcomeReady {
		return nil
	}
	var out []string
	for _, a := range sc.actions {
		if a.drift && !a.held && !slices.Contains(out, a.what) {
			out = append(out, a.what)
		}
	}
	return out
}

// events reports transitions, not every resync: updates, drift, removals,
// and a failure whose reason or message is new. A binding's first write is
// not an event: it is what creating the binding asks for, status names what
// was written, and at fleet size an event per new binding would be one more
// API server write per minion than the binding needs (Vault's audit log is
// the record of every write). For the same reason an update that the
// binding's own spec did not cause (a template edit rolled out) is counted
// for its template's event (outcome.Rollouts), when the template controller
// runs beside this one.
func (r *Reconciler) events(obj *v1alpha1.MinionBinding, sc *bindingScope, before *metav1.Condition) {
	after := outcome.ReadyOf(obj)
	drift, corrected := sc.drift()
	switch {
	case len(drift) > 0 && corrected && sc.driftRun == driftRunStarted:
		// Said once per run, not at every resync of a fight: the
		// condition carries the count and the latest difference.
		outcome.Emit(r.Recorder, obj, "Warning", v1alpha1.DriftRecurringCondition, "Reconcile", "%s", driftRecurringMessage(statusFacts(obj).drift, drift))
	case len(drift) > 0 && corrected && sc.driftRun == driftRunRecurring:
	case len(drift) > 0 && corrected:
		outcome.Emit(r.Recorder, obj, "Warning", "DriftCorrected", "Reconcile", "Vault had drifted and was corrected: %s", strings.Join(drift, "; "))
	case len(drift) > 0:
		if before == nil || before.Message != after.Message {
			outcome.Emit(r.Recorder, obj, "Warning", "DriftDetected", "Reconcile", "Vault differs from the binding (detect-only): %s", strings.Join(drift, "; "))
		}
	case !sc.created:
		switch written := sc.written(); {
		case len(written) == 0:
		case sc.specHandled && r.Rollouts != nil && sc.tpl != nil:
			r.Rollouts.Add(sc.tpl.Name)
		default:
			outcome.Emit(r.Recorder, obj, "Normal", "Updated", "Reconcile", "Updated in Vault: %s", strings.Join(written, ", "))
		}
	}
	if taken := sc.taken(); len(taken) > 0 {
		outcome.Emit(r.Recorder, obj, "Normal", "TakenOver", "Reconcile", "Marked as this binding's in Vault: %s", strings.Join(taken, ", "))
	}
	r.removalEvents(obj, sc)
	// A wait on the connection is the connection's event, not one per
	// binding (outcome.Outcome.OfConnection); the condition still says it.
	if after != nil && after.Status != metav1.ConditionTrue && sc.outcome.Kind != outcome.OutcomeSuspended && !sc.outcome.OfConnection {
		if before == nil || before.Reason != after.Reason || before.Message != after.Message {
			outcome.Emit(r.Recorder, obj, "Warning", after.Reason, "Reconcile", "%s", after.Message)
		}
	}
}

// removalEvents reports what the removals at stale placements (a switch,
// or the deletion) did and left.
func (r *Reconciler) removalEvents(obj *v1alpha1.MinionBinding, sc *bindingScope) {
	action := "Reconcile"
	if !obj.DeletionTimestamp.IsZero() {
		action = "Delete"
	}
	if sc.brokenRecord != "" {
		outcome.Emit(r.Recorder, obj, "Warning", v1alpha1.DeletionBlockedReason, "Delete", "%s; looking only where status says the objects were written", sc.brokenRecord)
	}
	for _, p := range sc.retained {
		outcome.Emit(r.Recorder, obj, "Normal", "Retained", "Reconcile", "%s retained (deletionPolicy Retain)", p)
	}
	for _, p := range sc.unmarkedRetain {
		outcome.Emit(r.Recorder, obj, "Warning", "RetainedUnmarked", "Reconcile",
			"%s: retained, but not marked %s in Vault: another binding of the minion ID would be handed it", p, ownership.RetainedKey)
	}
	for _, p := range sc.unreachable {
		outcome.Emit(r.Recorder, obj, "Warning", v1alpha1.DeletionBlockedReason, "Delete", "%s left in Vault", p)
	}
	// Normal: the Vault that held the place is gone as far as any
	// connection can tell, and its objects with it when it was reset; the
	// binding goes on with what it renders now.
	for _, p := range sc.forgotten {
		outcome.Emit(r.Recorder, obj, "Normal", "Forgotten", action, "%s", p)
	}
	if len(sc.notOwned) > 0 {
		outcome.Emit(r.Recorder, obj, "Warning", v1alpha1.NotOwnedReason, "Delete", "left in Vault, not proven this binding's: %s", strings.Join(sc.notOwned, "; "))
	}
	switch deleted := sc.deleted(); {
	case len(deleted) == 0:
	case obj.DeletionTimestamp.IsZero():
		outcome.Emit(r.Recorder, obj, "Normal", "Removed", "Reconcile", "Removed from Vault, no longer rendered: %s", strings.Join(deleted, ", "))
	default:
		outcome.Emit(r.Recorder, obj, "Normal", "Deleted", "Delete", "Deleted from Vault: %s", strings.Join(deleted, ", "))
	}
}

// drift lists the differences Vault had although nothing changed on the
// binding's side, and whether they were written back (false in
// detect-only mode).
func (sc *bindingScope) drift() (found []string, corrected bool) {
	for _, a := range sc.actions {
		if a.drift {
			found = append(found, a.what+": "+a.why)
			corrected = corrected || !a.held
		}
	}
	return found, corrected
}

// wrote: a Vault request changed something.
func (sc *bindingScope) wrote() bool {
	for _, a := range sc.done {
		if a.call != callNone {
			return true
		}
	}
	return false
}

// held: the plan held back an action on the object (detect-only drift),
// so Vault does not hold what the binding renders for it.
func (sc *bindingScope) held(object objectKind) bool {
	return slices.ContainsFunc(sc.actions, func(a vaultAction) bool { return a.object == object && a.held })
}

// written names what was written at the current placement.
func (sc *bindingScope) written() []string {
	return sc.names(func(a vaultAction) bool { return a.place == 0 && a.call != callNone && a.kind != actDelete })
}

// deleted names the roles and entities removed at stale placements.
func (sc *bindingScope) deleted() []string {
	return sc.names(func(a vaultAction) bool { return a.kind == actDelete && a.place > 0 && a.object != objAlias })
}

// taken names what was made the binding's this time (not what another
// writer's edit took from it and the operator wrote back: drift).
func (sc *bindingScope) taken() []string {
	return sc.names(func(a vaultAction) bool { return a.kind == actTake && !a.drift })
}

func (sc *bindingScope) names(keep func(vaultAction) bool) []string {
	var out []string
	for _, a := range sc.done {
		if keep(a) && !slices.Contains(out, a.what) {
			out = append(out, a.what)
		}
	}
	return out
}
