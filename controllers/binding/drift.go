package binding

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
)

// A correction within recurringDriftWindow of the one before continues a
// run; the run is recurring from its recurringDriftAfter-th correction. A
// Salt master with write rights rewrites a role at most once an hour per
// minion (its role cache), and the operator corrects at its resync, so a
// fight is a correction about every interval; a day leaves room for long
// intervals and for resyncs that fall between the master's rewrites.
const (
	recurringDriftWindow = 24 * time.Hour
	recurringDriftAfter  = 2
)

// otherWriterDoc is where the docs say what to do about another writer.
const otherWriterDoc = "docs/operations.md#running-beside-a-salt-master"

// driftRun is what trackDrift decided about a reconcile's corrections.
type driftRun int

const (
	driftRunNone      driftRun = iota // no run, or one not recurring yet
	driftRunStarted                   // this correction made the run recurring
	driftRunRecurring                 // recurring before this reconcile
)

// trackDrift moves status.driftCorrections on from what this reconcile
// corrected (corrected: the objects written back), at now. A reconcile that
// corrected nothing ends a run only once it is a day old, since a resync
// can fall between two of the other writer's rewrites.
func trackDrift(st *v1alpha1.MinionBindingStatus, corrected []string, now time.Time) driftRun {
	run := st.DriftCorrections
	wasRecurring := run != nil && run.Count >= recurringDriftAfter
	if run != nil && now.Sub(run.LastTime.Time) > recurringDriftWindow {
		run, wasRecurring = nil, false
	}
	if len(corrected) == 0 {
		st.DriftCorrections = run
		if wasRecurring {
			return driftRunRecurring
		}
		return driftRunNone
	}
	if run == nil {
		run = &v1alpha1.DriftCorrectionsStatus{}
	}
	if len(corrected) > 8 {
		corrected = corrected[:8]
	}
	run.Count++
	run.LastTime = metav1.NewTime(now)
	run.Objects = corrected
	st.DriftCorrections = run
	switch {
	case wasRecurring:
		return driftRunRecurring
	case run.Count >= recurringDriftAfter:
		return driftRunStarted
	}
	return driftRunNone
}

// setDriftRecurring keeps the DriftRecurring condition equal to the run in
// status: present, with what was rewritten and the likely writer, while it
// is recurring.
func setDriftRecurring(obj *v1alpha1.MinionBinding, drift []string) {
	conds := obj.Status.Conditions
	run := statusFacts(obj).drift
	if run == nil || run.Count < recurringDriftAfter {
		meta.RemoveStatusCondition(&conds, v1alpha1.DriftRecurringCondition)
		obj.Status.Conditions = conds
		return
	}
	c := meta.FindStatusCondition(conds, v1alpha1.DriftRecurringCondition)
	msg := ""
	if c != nil {
		msg = c.Message
	}
	if len(drift) > 0 || msg == "" {
		msg = driftRecurringMessage(run, drift)
	}
	meta.SetStatusCondition(&conds, metav1.Condition{Type: v1alpha1.DriftRecurringCondition, Status: metav1.ConditionTrue,
		Reason: v1alpha1.OtherWriterReason, Message: outcome.Truncate(msg), ObservedGeneration: obj.Generation})
	obj.Status.Conditions = conds
}

// driftRecurringMessage names what was rewritten, how often, and the
// likely writer.
func driftRecurringMessage(run *v1alpha1.DriftCorrectionsStatus, drift []string) string {
	what := strings.Join(run.Objects, ", ")
	msg := fmt.Sprintf("%s rewritten in Vault again after the operator corrected it (%d corrections in a row, the last at %s)",
		what, run.Count, run.LastTime.UTC().Format(time.RFC3339))
	if len(drift) > 0 {
		msg += ": " + strings.Join(drift, "; ")
	}
	return msg + ". Another writer has rights to it, most likely a Salt master (saltext-vault) with its stock policy " +
		"or AppRole parameters unlike the template's; see " + otherWriterDoc
}
