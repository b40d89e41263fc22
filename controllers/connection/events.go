package connection

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
)

// events reports the connection's transitions: a failure whose reason or
// message is new, and the return to Ready after one. Its bindings and
// templates wait on it without an event each (outcome.Outcome.OfConnection),
// so this is the one event of a revoked token or a sealed Vault, however
// many bindings wait.
func (r *Reconciler) events(conn *v1alpha1.VaultConnection, before *metav1.Condition) {
	if r.Recorder == nil {
		return
	}
	after := outcome.ReadyOf(conn)
	switch {
	case after == nil:
	case after.Status != metav1.ConditionTrue:
		if before == nil || before.Reason != after.Reason || before.Message != after.Message {
			outcome.Emit(r.Recorder, conn, "Warning", after.Reason, "Check", "%s; its bindings and templates wait on it", after.Message)
		}
	case before != nil && before.Status != metav1.ConditionTrue:
		outcome.Emit(r.Recorder, conn, "Normal", "Connected", "Check", "%s; its bindings and templates go on", after.Message)
	}
}
