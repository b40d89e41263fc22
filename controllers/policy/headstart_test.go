package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// A template change takes a binding's own policies (a policy per minion)
// ahead of the full scan; a name other bindings render, a new name, or an
// unchanged one waits for the scan, which then finds the head start's
// names confirmed and syncs only the rest.
func TestHeadStart(t *testing.T) {
	key := saltKey
	before := ownAndShared()
	tests := []struct {
		name    string
		binding string
		docs    map[string]string
		want    map[string]string // claimed by the head start's sync
	}{
		{"its own policy changed", "b1", map[string]string{"p1": "A2", "shared": "S"}, map[string]string{"p1": "A2"}},
		{"a shared policy waits for the scan", "b1", map[string]string{"p1": "A", "shared": "S2"}, map[string]string{}},
		{"a new name waits for the scan", "b3", map[string]string{"p4": "D"}, map[string]string{}},
		{"nothing changed", "b2", map[string]string{"p2": "B", "shared": "S"}, map[string]string{}},
		{"not a binding of the template", "b9", map[string]string{"p9": "Z"}, map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first, next := &render.Compiled{}, &render.Compiled{}
			x := inVault(first, before)
			if x.changing("t", first) || !x.changing("t", next) {
				t.Fatal("changing: the same compiled template is not a change, another is")
			}
			if n := x.headStart("t", key(tc.binding), tc.docs); n != len(tc.want) {
				t.Errorf("headStart made %d names dirty, want %d", n, len(tc.want))
			}
			got := x.claim("t")
			if !maps.Equal(got.desired, tc.want) || len(got.stale) != 0 {
				t.Fatalf("head start claimed %v stale %v, want %v", got.desired, got.stale, tc.want)
			}
			x.settle("t", got, policyPass{owned: slices.Sorted(maps.Keys(got.desired))})

			// The scan: the head start's names are confirmed already.
			after := maps.Clone(before)
			if b, ok := after[key(tc.binding)]; ok {
				b.docs = tc.docs
				after[key(tc.binding)] = b
			}
			x.rebuild("t", next, after, false)
			rest := x.claim("t")
			for n := range tc.want {
				if _, again := rest.desired[n]; again {
					t.Errorf("the scan syncs %s again", n)
				}
			}
		})
	}
}

// policyOrder records the names of the policies written, in order.
type policyOrder struct {
	*vaulttest.Fake
	mu      sync.Mutex
	written []string
}

func (p *policyOrder) WritePolicy(ctx context.Context, name, hcl string) error {
	p.mu.Lock()
	p.written = append(p.written, name)
	p.mu.Unlock()
	return p.Fake.WritePolicy(ctx, name, hcl)
}

// A change of a policy per minion writes the first listed bindings'
// policies first (the head start), and each policy once: the scan does not
// write them again. Without the head start the sync goes in name order,
// which here is the list's reversed. A binding that the changed template
// refuses (its policy no longer in allowedPolicies: a tenant's pillar can
// make that happen) gets nothing from the head start, which admits each
// binding as the scan does.
func TestATemplateChangeStartsWithTheFirstBindings(t *testing.T) {
	for _, refuseFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("first binding refused %v", refuseFirst), func(t *testing.T) {
			templateChangeFirstWrites(t, refuseFirst)
		})
	}
}

func templateChangeFirstWrites(t *testing.T, refuseFirst bool) {
	const n = 12
	objs := fixtures(map[string]any{"roles": []string{"web"}, "slot": "s99"})
	tpl := objs[2].(*v1alpha1.MinionTemplate)
	tpl.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{{Name: "slot_{pillar[slot]}_{minion}",
		Rules: []v1alpha1.PolicyRule{{Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
	var names []string
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("a%02d", i)
		names = append(names, name)
		objs = append(objs, &v1alpha1.MinionBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.Now()},
			Spec: v1alpha1.MinionBindingSpec{MinionID: name, TemplateRef: v1alpha1.MinionTemplateReference{Name: "t"},
				Pillar: rawDoc(map[string]any{"roles": []string{"web"}, "slot": fmt.Sprintf("s%02d", n+1-i)})},
		})
	}
	h := newHarness(t, objs...)
	order := &policyOrder{Fake: h.v}
	h.r.Connections.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return order, nil }
	ctx := context.Background()
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}
	reconcileTemplate := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "t"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range append([]string{"web01"}, names...) {
		h.reconcile("salt", name)
	}
	reconcileTemplate()
	if len(order.written) != n+1 {
		t.Fatalf("first sync wrote %q", order.written)
	}

	if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl); err != nil {
		t.Fatal(err)
	}
	tpl.Spec.PolicyDocuments[0].Rules[0].Capabilities = []v1alpha1.PolicyCapability{"read", "list"}
	refused := fmt.Sprintf("slot_s%02d_%s", n, names[0])
	admitted, heads := n+1, names[:headStartBindings]
	if refuseFirst {
		// Every policy the bindings render but the first one's.
		tpl.Spec.AllowedPolicies = []string{"salt_role_*", "slot_s0*", "slot_s10_*", "slot_s11_*", "slot_s99_*"}
		admitted, heads = n, names[1:headStartBindings]
	}
	tpl.Generation++
	if err := h.c.Update(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	order.written = nil
	reconcileTemplate()

	if len(order.written) != admitted {
		t.Fatalf("the change wrote %d policies, want each of the %d admitted once: %q", len(order.written), admitted, order.written)
	}
	var firsts []string
	for _, name := range heads {
		i := slices.Index(names, name)
		firsts = append(firsts, fmt.Sprintf("slot_s%02d_%s", n-i, name))
	}
	if got := slices.Sorted(slices.Values(order.written[:len(heads)])); !slices.Equal(got, slices.Sorted(slices.Values(firsts))) {
		t.Errorf("first writes %q, want the first admitted bindings' %q", order.written[:len(heads)], firsts)
	}
	if refuseFirst && slices.Contains(order.written, refused) {
		t.Errorf("%s, of a binding the changed template refuses, was written: %q", refused, order.written)
	}
	for _, name := range order.written {
		body, _, err := h.v.ReadPolicy(ctx, name)
		if err != nil || !strings.Contains(body, `"list"`) {
			t.Errorf("%s: %q %v", name, body, err)
		}
	}
}
