package policy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// A binding's policies count from when its own reconcile holds its minion
// in Vault, and stop counting when Vault says it is another's.
func TestHoldingChanged(t *testing.T) {
	binding := func() *v1alpha1.MinionBinding {
		return &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 1}}
	}
	holding := func(reason string) *v1alpha1.MinionBinding {
		b := binding()
		b.Status.AppRole = &v1alpha1.AppRoleStatus{RoleID: "r"}
		b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}
		return b
	}
	for _, tc := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"holds its minion now: its policies count", binding(), holding(v1alpha1.SucceededReason), true},
		{"still holds it (a Vault fault)", holding(v1alpha1.SucceededReason), holding(v1alpha1.VaultUnavailableReason), false},
		{"Vault says it is another's now", holding(v1alpha1.SucceededReason), holding(v1alpha1.MinionIDConflictReason), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdingChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
}
