package policy

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/clusterfacts"
)

// The binding controller and the template controllers of one process
// render each binding generation once between them; a process that runs
// only one of them (sharded) keeps nothing and renders every time.
func TestEachBindingRenderedOnce(t *testing.T) {
	tests := []struct {
		name             string
		consumers        int
		rendered, reused int
	}{
		{"both controllers in one process", 2, 2, 2},
		{"sharded: each process renders for itself", 1, 4, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := fixtures(map[string]any{"roles": []string{"web"}})
			objs[2].(*v1alpha1.MinionTemplate).Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
				{Name: "minion_{minion}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
			h := newHarness(t, objs...)
			renders := &clusterfacts.Renders{Consumers: tc.consumers}
			h.r.Templates.Renders = renders
			ctx := context.Background()
			r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}
			delta := func(name string) {
				t.Helper()
				if _, err := (policyDeltaReconciler{r}).Reconcile(ctx, bindingKey{Namespace: "salt", Name: name}); err != nil {
					t.Fatal(err)
				}
			}
			// A start: the template's scan (web01 holds no minion yet: not
			// rendered), the binding controller, then the delta its status
			// wakes.
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "t"}}); err != nil {
				t.Fatal(err)
			}
			h.reconcile("salt", "web01")
			delta("web01")
			// A new binding: its delta first (the faster queue; it holds
			// nothing yet), then the binding controller, then the delta its
			// status wakes.
			b := objs[3].(*v1alpha1.MinionBinding).DeepCopy()
			b.Name, b.Spec.MinionID, b.UID, b.ResourceVersion = "web02", "web02", "uid-web02", ""
			if err := h.c.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			delta("web02")
			h.reconcile("salt", "web02")
			delta("web02")
			if rendered, reused, kept := renders.Counts(); rendered != tc.rendered || reused != tc.reused || kept != 0 {
				t.Errorf("%d rendered, %d reused, %d left kept; want %d, %d, 0", rendered, reused, kept, tc.rendered, tc.reused)
			}
			if names, _ := h.v.ListPolicies(ctx); len(names) != 4 { // default, root and the two minions'
				t.Errorf("policies %q", names)
			}
		})
	}
}
