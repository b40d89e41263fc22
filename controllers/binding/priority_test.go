package binding

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// A new process's initial list puts the bindings changed since they were
// last handled ahead of those in sync, whatever their place in the list;
// live events stay ahead of the list as controller-runtime has them.
func TestChangedBindingsFirstAtAStart(t *testing.T) {
	inSync := func(i int) *v1alpha1.MinionBinding {
		b := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: fmt.Sprintf("m%03d", i), Generation: 2}}
		b.Status.ObservedGeneration = 2
		return b
	}
	changed := map[string]func(b *v1alpha1.MinionBinding){
		"m040": func(b *v1alpha1.MinionBinding) { b.Generation = 3 },
		"m070": func(b *v1alpha1.MinionBinding) {
			b.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: "2026-12-06T00:00:00Z"}
		},
		"m090": func(b *v1alpha1.MinionBinding) { now := metav1.Now(); b.DeletionTimestamp = &now },
	}
	for _, tc := range []struct {
		name  string
		ours  bool
		first []string
	}{
		{"with changedFirst", true, []string{"m040", "m070", "m090", "m000"}},
		{"without it, the list's order", false, []string{"m000", "m001", "m002", "m003"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			ctx := context.Background()
			forBinding := &handler.EnqueueRequestForObject{}
			for i := range 100 {
				b := inSync(i)
				b.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: "old"}
				b.Status.LastHandledReconcileAt = "old"
				if f := changed[b.Name]; f != nil {
					f(b)
				}
				ev := event.TypedCreateEvent[client.Object]{Object: b, IsInInitialList: true}
				forBinding.Create(ctx, ev, q)
				if tc.ours {
					changedFirst{}.Create(ctx, ev, q)
				}
			}
			var got []string
			for range len(tc.first) {
				item, _ := q.Get()
				got = append(got, item.Name)
				q.Done(item)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.first) {
				t.Errorf("first reconciled %v, want %v", got, tc.first)
			}
		})
	}
	// Outside the initial list, and for a binding in sync, it adds nothing.
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	b := inSync(1)
	b.Generation = 5
	changedFirst{}.Create(context.Background(), event.TypedCreateEvent[client.Object]{Object: b}, q)
	changedFirst{}.Create(context.Background(), event.TypedCreateEvent[client.Object]{Object: inSync(2), IsInInitialList: true}, q)
	if n := q.Len(); n != 0 {
		t.Errorf("%d requests added", n)
	}
}
