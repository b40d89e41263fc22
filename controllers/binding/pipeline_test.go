package binding

import (
	"testing"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// One row per case of placementPolicy's table: a switch takes the policy
// recorded with the placement it leaves, a deletion the template's as it
// is now, and the recorded one only once the template is gone.
func TestPlacementPolicy(t *testing.T) {
	retain := &v1alpha1.MinionTemplate{Spec: v1alpha1.MinionTemplateSpec{DeletionPolicy: v1alpha1.DeletionPolicyRetain}}
	byDefault := &v1alpha1.MinionTemplate{} // Delete
	const recRetain, recDelete = string(v1alpha1.DeletionPolicyRetain), string(v1alpha1.DeletionPolicyDelete)
	for _, tc := range []struct {
		name     string
		tpl      *v1alpha1.MinionTemplate
		recorded string
		deleting bool
		want     v1alpha1.DeletionPolicy
	}{
		{"switch: recorded Retain over the template's Delete", byDefault, recRetain, false, v1alpha1.DeletionPolicyRetain},
		{"switch: recorded Delete over the template's Retain", retain, recDelete, false, v1alpha1.DeletionPolicyDelete},
		{"switch: nothing recorded, the template's", retain, "", false, v1alpha1.DeletionPolicyRetain},
		{"deletion: the template's Retain over a recorded Delete", retain, recDelete, true, v1alpha1.DeletionPolicyRetain},
		{"deletion: the template's Delete over a recorded Retain", byDefault, recRetain, true, v1alpha1.DeletionPolicyDelete},
		{"deletion, template gone: recorded", nil, recRetain, true, v1alpha1.DeletionPolicyRetain},
		{"deletion, template gone, nothing recorded: Delete", nil, "", true, v1alpha1.DeletionPolicyDelete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := placementPolicy(tc.tpl, tc.recorded, tc.deleting); got != tc.want {
				t.Errorf("placementPolicy = %s, want %s", got, tc.want)
			}
			// A run is a deletion when it has no current placement.
			w := bindingWork{tpl: tc.tpl}
			if !tc.deleting {
				w.cur = &ownership.Placement{}
			}
			if got := w.policy(ownership.Placement{DeletionPolicy: tc.recorded}); got != tc.want {
				t.Errorf("bindingWork.policy = %s, want %s", got, tc.want)
			}
		})
	}
}
