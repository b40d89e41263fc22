package policy

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
)

// scanFleet is a template with a policy per minion and n bindings that
// hold their minions (each reconciled once by the binding controller).
func scanFleet(tb testing.TB, n int) (*Reconciler, []v1alpha1.MinionBinding) {
	tb.Helper()
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	objs[2].(*v1alpha1.MinionTemplate).Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
		{Name: "minion_{minion}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
	for i := range n {
		m := fmt.Sprintf("m%05d", i)
		objs = append(objs, &v1alpha1.MinionBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: m, UID: types.UID("uid-" + m), Generation: 1, CreationTimestamp: metav1.Now()},
			Spec:       v1alpha1.MinionBindingSpec{MinionID: m, TemplateRef: v1alpha1.MinionTemplateReference{Name: "t"}, Pillar: rawDoc(map[string]any{"roles": []string{"web", fmt.Sprintf("r%d", i%10)}})},
		})
	}
	h := newHarness(tb, objs...)
	h.rec = events.NewFakeRecorder(10 * n) // a few events per new binding
	h.r.Recorder = h.rec
	ctx := context.Background()
	for i := range n {
		testkit.Reconcile(tb, h.c, h.r, "salt", fmt.Sprintf("m%05d", i))
	}
	list := &v1alpha1.MinionBindingList{}
	if err := h.c.List(ctx, list, client.MatchingFields{watch.TemplateRefIndex: "t"}); err != nil {
		tb.Fatal(err)
	}
	return &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}, list.Items
}

// The scan's render on several workers finds what one finds.
func TestRenderAllOnWorkers(t *testing.T) {
	r, items := scanFleet(t, 50)
	ctx := context.Background()
	one, err := r.renderAll(ctx, "t", items, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, bp := range one {
		if len(bp.docs) > 0 {
			held++
		}
	}
	if held != 50 {
		t.Fatalf("%d of 50 bindings render a policy", held)
	}
	for _, w := range []int{2, 3, 7, 64} {
		got, err := r.renderAll(ctx, "t", items, nil, w)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, one) {
			t.Errorf("%d workers render differently from one", w)
		}
	}
	if got, err := r.renderAll(ctx, "t", nil, nil, 4); err != nil || len(got) != 0 {
		t.Errorf("no bindings: %v %v", got, err)
	}
	// What a head start rendered is taken as it is, not rendered again.
	head := []map[string]string{{"head": "0"}, {"head": "1"}, {"head": "2"}}
	got, err := r.renderAll(ctx, "t", items, head, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range items {
		want := one[client.ObjectKeyFromObject(&items[i])]
		if i < len(head) {
			want.docs = head[i]
		}
		if g := got[client.ObjectKeyFromObject(&items[i])]; !reflect.DeepEqual(g, want) {
			t.Errorf("binding %d with a head start of %d: %+v, want %+v", i, len(head), g, want)
		}
	}
}
