package controllers

import (
	"context"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// A new generation is announced before the work: the first status patch
// says Reconciling=True and Ready=Unknown for it (kstatus), the last one
// the result.
func TestNewGenerationIsAnnouncedFirst(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	var patched []v1alpha1.MinionBindingStatus
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if b, ok := obj.(*v1alpha1.MinionBinding); ok && sub == "status" {
				patched = append(patched, *b.Status.DeepCopy())
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	h.reconcile("salt", "web01")
	if len(patched) != 2 {
		t.Fatalf("%d status patches, want 2 (announce, result)", len(patched))
	}
	first, last := patched[0].Conditions, patched[1].Conditions
	if c := apimeta.FindStatusCondition(first, v1alpha1.ReconcilingCondition); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != 1 {
		t.Errorf("first patch Reconciling %+v", c)
	}
	if c := apimeta.FindStatusCondition(first, v1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionUnknown {
		t.Errorf("first patch Ready %+v", c)
	}
	if !apimeta.IsStatusConditionTrue(last, v1alpha1.ReadyCondition) || apimeta.FindStatusCondition(last, v1alpha1.ReconcilingCondition) != nil {
		t.Errorf("last patch %+v", last)
	}

	// The same generation again: one patch, no announcement.
	patched = nil
	h.reconcile("salt", "web01")
	if len(patched) != 1 {
		t.Errorf("%d status patches for a resync, want 1", len(patched))
	}
}
