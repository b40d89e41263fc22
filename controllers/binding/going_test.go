package binding

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
)

// A binding the cache still shows alive, while the API server has it
// being deleted or gone (a namespace torn down, a GitOps prune: its own
// deletion event not in the cache yet), writes nothing to Vault: a minion
// created then would be deleted by nothing.
func TestNoWriteForABindingBeingDeleted(t *testing.T) {
	record := `[{"vault":"` + testVaultID + `","connection":"vault","mount":"salt-minions","entity":"salt_minion_web01"}]`
	tests := []struct {
		name string
		// held: the cached binding has the finalizer and its record (a
		// tenant may set both by hand), so no patch comes before the run.
		held bool
		// api is the binding as the API server has it (nil: gone).
		api func(b *v1alpha1.MinionBinding) *v1alpha1.MinionBinding
	}{
		{name: "a claimant, gone", api: func(*v1alpha1.MinionBinding) *v1alpha1.MinionBinding { return nil }},
		{name: "a claimant, being deleted (another finalizer holds it)", api: deleting},
		{name: "finalizer and record set, gone", held: true, api: func(*v1alpha1.MinionBinding) *v1alpha1.MinionBinding { return nil }},
		{name: "finalizer and record set, being deleted", held: true, api: deleting},
		{name: "finalizer and record set, created again under its name (another UID)", held: true, api: func(b *v1alpha1.MinionBinding) *v1alpha1.MinionBinding {
			b.UID = "uid-new"
			return b
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := fixtures(map[string]any{"roles": []string{"web"}})
			cached := objs[3].(*v1alpha1.MinionBinding)
			if tt.held {
				cached.Finalizers = []string{v1alpha1.Finalizer}
				cached.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: record}
			}
			cache := testkit.Builder().WithObjects(objs...).Build()
			apiObjs := append([]client.Object{}, objs[:3]...)
			if b := tt.api(cached.DeepCopy()); b != nil {
				apiObjs = append(apiObjs, b)
			}
			api := testkit.Builder().WithObjects(apiObjs...).Build()
			// Reads come from the (stale) cache, writes go to the API server.
			c := interceptor.NewClient(api.(client.WithWatch), interceptor.Funcs{
				Get: func(ctx context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					return cache.Get(ctx, key, obj, opts...)
				},
				List: func(ctx context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					return cache.List(ctx, list, opts...)
				},
			})
			h := newHarness(t)
			h.r.Client, h.r.APIReader = c, api
			h.r.Connections.Client = c
			h.r.Templates.Client = c
			h.v.ResetCalls()
			_, _ = h.r.Reconcile(context.Background(), reconcileRequest("salt", "web01"))
			if w := h.v.Writes(); w != 0 {
				t.Fatalf("%d Vault writes for a binding the API server has being deleted or gone", w)
			}
		})
	}
}

func deleting(b *v1alpha1.MinionBinding) *v1alpha1.MinionBinding {
	now := metav1.NewTime(time.Now())
	b.DeletionTimestamp = &now
	b.Finalizers = append(b.Finalizers, "example.com/other")
	return b
}

func reconcileRequest(ns, name string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}
