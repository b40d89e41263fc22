package controllers

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// outcome is what one reconcile observed; status is derived from it in one
// place (setConditions), following kstatus: Ready always, Reconciling and
// Stalled only while true.
type outcome struct {
	kind    outcomeKind
	reason  string
	message string
}

type outcomeKind int

const (
	outcomeReady     outcomeKind = iota // desired state applied
	outcomeStalled                      // invalid configuration: no retry until something changes
	outcomeWaiting                      // waiting for something to appear: requeue
	outcomeFailed                       // transient failure: backoff
	outcomeSuspended                    // suspended by the user
)

type conditioned interface {
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
	GetGeneration() int64
}

// setConditions writes Ready, Reconciling and Stalled for an outcome.
func setConditions(obj conditioned, o outcome) {
	conds := obj.GetConditions()
	gen := obj.GetGeneration()
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&conds, metav1.Condition{Type: t, Status: s, Reason: reason, Message: truncate(msg), ObservedGeneration: gen})
	}
	switch o.kind {
	case outcomeReady:
		set(v1alpha1.ReadyCondition, metav1.ConditionTrue, o.reason, o.message)
		meta.RemoveStatusCondition(&conds, v1alpha1.ReconcilingCondition)
		meta.RemoveStatusCondition(&conds, v1alpha1.StalledCondition)
	case outcomeStalled:
		set(v1alpha1.ReadyCondition, metav1.ConditionFalse, o.reason, o.message)
		set(v1alpha1.StalledCondition, metav1.ConditionTrue, o.reason, o.message)
		meta.RemoveStatusCondition(&conds, v1alpha1.ReconcilingCondition)
	case outcomeWaiting, outcomeFailed:
		set(v1alpha1.ReadyCondition, metav1.ConditionFalse, o.reason, o.message)
		set(v1alpha1.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.ProgressingReason, o.message)
		meta.RemoveStatusCondition(&conds, v1alpha1.StalledCondition)
	case outcomeSuspended:
		set(v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.SuspendedReason, "reconciliation is suspended")
		meta.RemoveStatusCondition(&conds, v1alpha1.ReconcilingCondition)
		meta.RemoveStatusCondition(&conds, v1alpha1.StalledCondition)
	}
	obj.SetConditions(conds)
}

// truncate keeps condition messages within the API's 32 KiB limit.
func truncate(s string) string {
	const limit = 4096
	if len(s) > limit {
		return s[:limit-3] + "..."
	}
	return s
}

// readyCondition returns a copy of the Ready condition: callers keep it as
// the "before" state while the status is rewritten in place.
func readyCondition(obj conditioned) *metav1.Condition {
	c := meta.FindStatusCondition(obj.GetConditions(), v1alpha1.ReadyCondition)
	if c == nil {
		return nil
	}
	cp := *c
	return &cp
}

// emit records an event, its note cut to what the Events API accepts
// (1 KiB): long violation lists stay whole in the condition message.
func emit(rec events.EventRecorder, obj runtime.Object, eventType, reason, action, format string, args ...any) {
	note := fmt.Sprintf(format, args...)
	if len(note) > 1000 {
		note = strings.ToValidUTF8(note[:997], "") + "..."
	}
	rec.Eventf(obj, nil, eventType, reason, action, "%s", note)
}
