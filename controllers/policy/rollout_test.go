package policy

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// A template change within the interval renders every binding again but
// syncs only the names whose wanted state differs from what Vault was
// confirmed to hold: a rollout that changes entity metadata reads no
// policy, one that changes every policy syncs every policy. A verifying
// scan compares every name.
func TestRenderScanSyncsOnlyWhatChanged(t *testing.T) {
	key, docs := saltKey, policiesOf
	before := ownAndShared()
	tests := []struct {
		name   string
		after  map[types.NamespacedName]bindingPolicies
		verify bool
		// unknown: p3 was found by a discovery, its body not compared.
		unknown bool
		desired map[string]string
		stale   []string
	}{
		{"nothing a policy depends on changed", before, false, false, map[string]string{}, nil},
		{"one body changed", map[types.NamespacedName]bindingPolicies{
			key("b1"): docs("p1", "A2", "shared", "S"), key("b2"): docs("p2", "B", "shared", "S"), key("b3"): docs("p3", "C"),
		}, false, false, map[string]string{"p1": "A2"}, nil},
		{"every body changed", map[types.NamespacedName]bindingPolicies{
			key("b1"): docs("p1", "A2", "shared", "S2"), key("b2"): docs("p2", "B2", "shared", "S2"), key("b3"): docs("p3", "C2"),
		}, false, false, map[string]string{"p1": "A2", "p2": "B2", "p3": "C2", "shared": "S2"}, nil},
		{"a name added, one no longer rendered", map[types.NamespacedName]bindingPolicies{
			key("b1"): docs("p1", "A", "shared", "S"), key("b2"): docs("p2", "B", "shared", "S"), key("b3"): docs("p4", "D"),
		}, false, false, map[string]string{"p4": "D"}, []string{"p3"}},
		{"a body never compared is compared", before, false, true, map[string]string{"p3": "C"}, nil},
		{"a verifying scan compares everything", before, true, false,
			map[string]string{"p1": "A", "p2": "B", "p3": "C", "shared": "S"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := inVault(&render.Compiled{}, before)
			if tc.unknown {
				x.part("t").owned["p3"] = unknownBody
			}
			if left := x.claim("t"); !left.empty() {
				t.Fatalf("confirmed names claimed again: %+v", left)
			}
			x.rebuild("t", &render.Compiled{}, tc.after, tc.verify)
			got := x.claim("t")
			if !maps.Equal(got.desired, tc.desired) || !slices.Equal(got.stale, tc.stale) {
				t.Errorf("claimed %v stale %v, want %v stale %v", got.desired, got.stale, tc.desired, tc.stale)
			}
		})
	}
}

// Which scan a template's reconcile makes: a change or the interval
// renders; a start, a new Vault or a request compares everything.
func TestScanDue(t *testing.T) {
	const interval = time.Hour
	compiled, changed := &render.Compiled{}, &render.Compiled{}
	tests := []struct {
		name  string
		setup func(x *policyIndex)
		rq    scanRequest
		want  scanKind
	}{
		{"never scanned", func(*policyIndex) {}, scanRequest{compiled: compiled}, verifyScan},
		{"scanned, nothing new", nil, scanRequest{compiled: compiled}, noScan},
		{"the template changed", nil, scanRequest{compiled: changed}, renderScan},
		{"the template changed, the interval up", func(x *policyIndex) { x.part("t").lastScan = time.Now().Add(-interval) },
			scanRequest{compiled: changed}, renderScan},
		{"the interval up: rendered again, compared slot by slot", func(x *policyIndex) { x.part("t").lastScan = time.Now().Add(-interval) },
			scanRequest{compiled: compiled}, renderScan},
		{"a reconcile request", nil, scanRequest{compiled: changed, asked: "now"}, verifyScan},
		{"a reconcile request whose compare began: the passes after it retry what is dirty",
			func(x *policyIndex) { x.beginCompare("t", "now") }, scanRequest{compiled: compiled, asked: "now"}, noScan},
		{"a reconcile request reported handled", nil, scanRequest{compiled: compiled, asked: "now", handled: "now"}, noScan},
		{"another Vault", nil, scanRequest{compiled: changed, identity: "other"}, verifyScan},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newPolicyIndex()
			if tc.setup == nil || !strings.HasPrefix(tc.name, "never") {
				x.begin("t", scanRequest{compiled: compiled, identity: "v"}, time.Now())
				x.rebuild("t", compiled, nil, true)
				x.discoveredOwned("t", nil)
			}
			if tc.setup != nil {
				tc.setup(x)
			}
			rq := tc.rq
			rq.interval = interval
			if rq.identity == "" {
				rq.identity = "v"
			}
			if got := x.begin("t", rq, time.Now()); got.scan != tc.want {
				t.Errorf("scan %v, want %v (%v)", got.scan, tc.want, got.why)
			}
		})
	}
}

// A template edit rolled out to its bindings is one event on the template
// with the count, not an event per binding; a binding's own change is
// still its own event. Without the template controller beside it (a
// shard), each binding reports its update.
func TestRolloutIsOneTemplateEvent(t *testing.T) {
	for _, shard := range []bool{false, true} {
		h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
		ctx := context.Background()
		rollouts := &outcome.Rollouts{}
		if shard {
			rollouts = nil
		} else {
			h.r.Rollouts = rollouts
		}
		r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster, Rollouts: rollouts}
		reconcileTemplate := func() {
			t.Helper()
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "t"}}); err != nil {
				t.Fatal(err)
			}
		}
		h.reconcile("salt", "web01")
		reconcileTemplate()
		h.events()

		tpl := &v1alpha1.MinionTemplate{}
		if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl); err != nil {
			t.Fatal(err)
		}
		tpl.Spec.Metadata.Entity["rollout"] = "1"
		tpl.Generation++
		if err := h.c.Update(ctx, tpl); err != nil {
			t.Fatal(err)
		}
		h.reconcile("salt", "web01")
		bindingEvents := h.events()
		reconcileTemplate()
		templateEvents := h.events()
		switch {
		case !shard && (strings.Contains(bindingEvents, "Updated") || !strings.Contains(templateEvents, "BindingsUpdated 1 bindings updated in Vault")):
			t.Errorf("with the template controller: binding events %q, template events %q", bindingEvents, templateEvents)
		case shard && (!strings.Contains(bindingEvents, "Updated in Vault: entity salt_minion_web01") || strings.Contains(templateEvents, "BindingsUpdated")):
			t.Errorf("a shard: binding events %q, template events %q", bindingEvents, templateEvents)
		}

		b := &v1alpha1.MinionBinding{}
		if err := h.c.Get(ctx, types.NamespacedName{Namespace: "salt", Name: "web01"}, b); err != nil {
			t.Fatal(err)
		}
		b.Spec.Pillar = rawDoc(map[string]any{"roles": []string{"db"}})
		b.Generation++
		if err := h.c.Update(ctx, b); err != nil {
			t.Fatal(err)
		}
		h.reconcile("salt", "web01")
		if got := h.events(); !strings.Contains(got, "Updated in Vault") {
			t.Errorf("shard %v: the binding's own change: events %q", shard, got)
		}
		if n := rollouts.Take("t"); n != 0 {
			t.Errorf("shard %v: the binding's own change counted as a rollout (%d)", shard, n)
		}
	}
}
