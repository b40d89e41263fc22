package binding

import (
	"github.com/minionvault/minion-vault-operator/controllers/internal/shared"
)

// observeBinding counts what one reconcile of a binding found: drift,
// a run of recurring drift starting, a refusal.
func observeBinding(m *shared.Metrics, sc *bindingScope) {
	if m == nil {
		return
	}
	if drift, corrected := sc.drift(); len(drift) > 0 {
		m.Drift(corrected)
	}
	if sc.driftRun == driftRunStarted {
		m.DriftRecurring()
	}
	if sc.outcome.Kind == shared.OutcomeStalled {
		m.RenderFailure(sc.outcome.Reason)
	}
}
