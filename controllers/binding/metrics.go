package binding

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
)

// observeBinding counts what one reconcile of a binding found: drift,
// a run of recurring drift starting, a refusal.
func observeBinding(m *metrics.Metrics, sc *bindingScope) {
	if m == nil {
		return
	}
	if drift, corrected := sc.drift(); len(drift) > 0 {
		m.Drift(corrected)
	}
	if sc.driftRun == driftRunStarted {
		m.DriftRecurring()
	}
	if sc.outcome.Kind == outcome.OutcomeStalled {
		m.RenderFailure(sc.outcome.Reason)
	}
}

// bindingState is what the bindings gauge counts of a binding: its Ready
// condition as this reconcile leaves it (no condition yet: not Ready,
// reason Unknown).
func bindingState(obj *v1alpha1.MinionBinding) metrics.BindingState {
	s := metrics.BindingState{Namespace: obj.Namespace, Template: obj.Spec.TemplateRef.Name, Reason: "Unknown"}
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		s.Ready = c.Status == metav1.ConditionTrue
		if c.Reason != "" {
			s.Reason = c.Reason
		}
	}
	return s
}
