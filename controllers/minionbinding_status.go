package controllers

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

func typesName(name string) types.NamespacedName { return types.NamespacedName{Name: name} }

// lastSyncRefresh is how old status.lastSyncTime may get while Vault is
// found in sync: moving it on every resync would cost a status write per
// binding per interval, for a timestamp.
const lastSyncRefresh = 24 * time.Hour

// finishStatus derives the status from what the reconcile saw.
func (r *MinionBindingReconciler) finishStatus(obj *v1alpha1.MinionBinding, sc *bindingScope) {
	if !obj.DeletionTimestamp.IsZero() && sc.outcome.kind == outcomeReady {
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
		st.AppRole = &v1alpha1.AppRoleStatus{Mount: res.AppRole.Mount, Name: res.AppRole.RoleName, RoleID: sc.roleID}
		if sc.entityID != "" {
			st.Entity = &v1alpha1.EntityStatus{Name: res.EntityName, ID: sc.entityID, Metadata: sc.metadata}
		}
		if sc.tpl != nil {
			st.DeletionPolicy = sc.tpl.Spec.EffectiveDeletionPolicy()
		}
	}
	if sc.outcome.kind == outcomeReady && sc.result != nil {
		now := metav1.Now()
		if len(sc.written) > 0 || len(sc.deleted) > 0 || st.LastSyncTime == nil || now.Sub(st.LastSyncTime.Time) > lastSyncRefresh {
			st.LastSyncTime = &now
		}
		// In detect-only mode the drift stays, so the hash stays too.
		if len(sc.drift) == 0 || sc.corrected {
			st.LastAppliedHash = sc.hash
		}
		if len(sc.drift) > 0 && !sc.corrected {
			sc.outcome = outcome{kind: outcomeReady, reason: "DriftDetected", message: "Vault differs from the binding (detect-only): " + strings.Join(sc.drift, "; ")}
		}
	}
	if v := obj.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]; v != "" {
		st.LastHandledReconcileAt = v
	}
	st.ObservedGeneration = obj.Generation
	setConditions(obj, sc.outcome)
}

// events reports transitions, not every resync: updates, drift, removals,
// and a failure whose reason or message is new. A binding's first write is
// not an event: it is what creating the binding asks for, status names what
// was written, and at fleet size an event per new binding would be one more
// API server write per minion than the binding needs (Vault's audit log is
// the record of every write).
func (r *MinionBindingReconciler) events(obj *v1alpha1.MinionBinding, sc *bindingScope, before *metav1.Condition) {
	after := readyCondition(obj)
	switch {
	case len(sc.drift) > 0 && sc.corrected:
		emit(r.Recorder, obj, "Warning", "DriftCorrected", "Reconcile", "Vault had drifted and was corrected: %s", strings.Join(sc.drift, "; "))
	case len(sc.drift) > 0:
		if before == nil || before.Message != after.Message {
			emit(r.Recorder, obj, "Warning", "DriftDetected", "Reconcile", "Vault differs from the binding (detect-only): %s", strings.Join(sc.drift, "; "))
		}
	case len(sc.written) > 0 && !sc.created:
		emit(r.Recorder, obj, "Normal", "Updated", "Reconcile", "Updated in Vault: %s", strings.Join(sc.written, ", "))
	}
	if len(sc.taken) > 0 {
		emit(r.Recorder, obj, "Normal", "TakenOver", "Reconcile", "Marked as this binding's in Vault: %s", strings.Join(sc.taken, ", "))
	}
	if len(sc.deleted) > 0 && obj.DeletionTimestamp.IsZero() {
		emit(r.Recorder, obj, "Normal", "Removed", "Reconcile", "Removed from Vault, no longer rendered: %s", strings.Join(sc.deleted, ", "))
	}
	if after != nil && after.Status != metav1.ConditionTrue && sc.outcome.kind != outcomeSuspended {
		if before == nil || before.Reason != after.Reason || before.Message != after.Message {
			emit(r.Recorder, obj, "Warning", after.Reason, "Reconcile", "%s", after.Message)
		}
	}
}
