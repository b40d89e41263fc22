package outcome

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// Outcome is what one reconcile observed; status is derived from it in one
// place (setConditions), following kstatus: Ready always, Reconciling and
// Stalled only while true.
type Outcome struct {
	Kind    OutcomeKind
	Reason  string
	Message string
	// OfConnection: the wait is the VaultConnection's (missing, its
	// Secret missing, or its check failing), told by the connection's
	// events (or, for a missing one, the template's), not once more by
	// each of its bindings: a revoked token would otherwise be 10,000
	// Warnings at once, and client-go drops events while 1,000 wait, the
	// connection's own among them.
	OfConnection bool
}

type OutcomeKind int

const (
	OutcomeReady     OutcomeKind = iota // desired state applied
	OutcomeStalled                      // invalid configuration: no retry until something changes
	OutcomeWaiting                      // waiting for something to appear: requeue
	OutcomeFailed                       // transient failure: backoff
	OutcomeSuspended                    // suspended by the user
)

type Conditioned interface {
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
	GetGeneration() int64
}

// SetConditions writes Ready, Reconciling and Stalled for an outcome.
func SetConditions(obj Conditioned, o Outcome) {
	conds := obj.GetConditions()
	gen := obj.GetGeneration()
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&conds, metav1.Condition{Type: t, Status: s, Reason: reason, Message: Truncate(msg), ObservedGeneration: gen})
	}
	switch o.Kind {
	case OutcomeReady:
		set(v1alpha1.ReadyCondition, metav1.ConditionTrue, o.Reason, o.Message)
		meta.RemoveStatusCondition(&conds, v1alpha1.ReconcilingCondition)
		meta.RemoveStatusCondition(&conds, v1alpha1.StalledCondition)
	case OutcomeStalled:
		set(v1alpha1.ReadyCondition, metav1.ConditionFalse, o.Reason, o.Message)
		set(v1alpha1.StalledCondition, metav1.ConditionTrue, o.Reason, o.Message)
		meta.RemoveStatusCondition(&conds, v1alpha1.ReconcilingCondition)
	case OutcomeWaiting, OutcomeFailed:
		set(v1alpha1.ReadyCondition, metav1.ConditionFalse, o.Reason, o.Message)
		set(v1alpha1.ReconcilingCondition, metav1.ConditionTrue, v1alpha1.ProgressingReason, o.Message)
		meta.RemoveStatusCondition(&conds, v1alpha1.StalledCondition)
	case OutcomeSuspended:
		set(v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.SuspendedReason, "reconciliation is suspended")
		meta.RemoveStatusCondition(&conds, v1alpha1.ReconcilingCondition)
		meta.RemoveStatusCondition(&conds, v1alpha1.StalledCondition)
	}
	obj.SetConditions(conds)
}

// Truncate keeps condition messages within the API's 32 KiB limit.
func Truncate(s string) string {
	const limit = 4096
	if len(s) > limit {
		return s[:limit-3] + "..."
	}
	return s
}

// ReadyOf returns a copy of the Ready condition: callers keep it as
// the "before" state while the status is rewritten in place.
func ReadyOf(obj Conditioned) *metav1.Condition {
	c := meta.FindStatusCondition(obj.GetConditions(), v1alpha1.ReadyCondition)
	if c == nil {
		return nil
	}
	cp := *c
	return &cp
}

// Emit records an event, its note cut to what the Events API accepts
// (1 KiB): long violation lists stay whole in the condition message. It
// logs the event too (V(1)): client-go's broadcaster drops an event while
// its queue of 1,000 is full, and the broadcaster's own log line with it.
func Emit(rec events.EventRecorder, obj runtime.Object, eventType, reason, action, format string, args ...any) {
	EmitRelated(rec, obj, nil, eventType, reason, action, format, args...)
}

// EmitRelated is Emit with the event's related object: the Events API
// counts repeated events of one object, reason and action as one series
// that keeps its first note, unless their related objects differ (a lost
// minion's events on its VaultConnection, one series per gone binding).
func EmitRelated(rec events.EventRecorder, obj, related runtime.Object, eventType, reason, action, format string, args ...any) {
	note := fmt.Sprintf(format, args...)
	if len(note) > 1000 {
		note = strings.ToValidUTF8(note[:997], "") + "..."
	}
	if m, err := meta.Accessor(obj); err == nil {
		eventLog.V(1).Info(note, "object", klog.KObj(m), "type", eventType, "reason", reason)
	}
	rec.Eventf(obj, related, eventType, reason, action, "%s", note)
}

// eventLog is where Emit logs; a variable for its test.
var eventLog = ctrl.Log.WithName("events")
