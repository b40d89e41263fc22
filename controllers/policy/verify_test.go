package policy

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// confirmedIndex is an index of template t with n policies, one binding
// each, all confirmed in Vault.
func confirmedIndex(n int) *policyIndex {
	x := newPolicyIndex()
	scanned := map[types.NamespacedName]bindingPolicies{}
	for i := range n {
		name := fmt.Sprintf("minion_m%05d", i)
		scanned[types.NamespacedName{Namespace: "salt", Name: name}] = bindingPolicies{template: "t", member: true, docs: map[string]string{name: "body " + name}}
	}
	x.rebuild("t", nil, scanned, true)
	w := x.claim("t")
	x.settle("t", w, policyPass{owned: slices.Sorted(maps.Keys(w.desired))})
	return x
}

// Every policy is compared with Vault once per interval, in its slot: a
// sixtieth of them each sixtieth of the interval, never all at once; a
// pause longer than a slot catches up, at most one interval's worth.
func TestEachPolicyIsComparedOncePerIntervalInItsSlot(t *testing.T) {
	const n, interval = 6000, time.Hour
	x := confirmedIndex(n)
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	if got := x.part("t").verifyDue(start, interval); got != 0 {
		t.Fatalf("the first call marked %d", got)
	}
	seen := map[string]int{}
	slot := interval / verifySlots
	for i := 1; i <= verifySlots; i++ {
		now := start.Add(time.Duration(i) * slot)
		if wait := x.part("t").untilSlot(now.Add(-slot / 2)); wait != slot/2 {
			t.Fatalf("slot %d: next slot in %s, want %s", i, wait, slot/2)
		}
		marked := x.part("t").verifyDue(now, interval)
		w := x.claim("t")
		if len(w.desired) != marked || marked < n/verifySlots/2 || marked > 2*n/verifySlots {
			t.Fatalf("slot %d: marked %d, claimed %d (want about %d)", i, marked, len(w.desired), n/verifySlots)
		}
		for name := range w.desired {
			seen[name]++
		}
		x.settle("t", w, policyPass{owned: slices.Sorted(maps.Keys(w.desired))})
	}
	if len(seen) != n {
		t.Errorf("%d of %d policies compared in one interval", len(seen), n)
	}
	for name, c := range seen {
		if c != 1 {
			t.Errorf("%s compared %d times in one interval", name, c)
		}
	}
	// A process paused for three intervals compares everything once.
	if got := x.part("t").verifyDue(start.Add(4*interval), interval); got != n {
		t.Errorf("after a long pause %d marked, want %d", got, n)
	}
}

// A new process takes the policies as confirmed only when it renders
// exactly what status says was confirmed and Vault lists every name.
func TestPresumeOnlyWhatStatusConfirmed(t *testing.T) {
	const n = 50
	old := confirmedIndex(n)
	sum := old.summary("t")
	status := presumption{count: int64(sum.owned), digest: sum.digest, content: sum.content}
	listed := slices.Sorted(maps.Keys(old.wanted("t")))
	tests := []struct {
		name   string
		edit   func(x *policyIndex, p *presumption, listed *[]string)
		want   bool
		claims int // what the first claim takes afterwards
	}{
		{"what status says", nil, true, 0},
		{"a body rendered differently (a new operator version)", func(x *policyIndex, _ *presumption, _ *[]string) {
			x.set(types.NamespacedName{Namespace: "salt", Name: "minion_m00007"}, bindingPolicies{template: "t", member: true, docs: map[string]string{"minion_m00007": "new body"}})
		}, false, n},
		{"a name missing from Vault's list", func(_ *policyIndex, _ *presumption, l *[]string) { *l = (*l)[1:] }, false, n},
		{"another count", func(_ *policyIndex, p *presumption, _ *[]string) { p.count++ }, false, n},
		{"another name set", func(_ *policyIndex, p *presumption, _ *[]string) { p.digest = policySetDigest([]string{"x"}) }, false, n},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := confirmedIndex(n)
			// A new process: the same bindings scanned, nothing known of Vault.
			fresh := newPolicyIndex()
			scanned := map[types.NamespacedName]bindingPolicies{}
			for key, b := range x.bindings {
				scanned[key] = b
			}
			fresh.rebuild("t", nil, scanned, true)
			p, l := status, slices.Clone(listed)
			if tc.edit != nil {
				tc.edit(fresh, &p, &l)
			}
			if got := fresh.presume("t", p, l, time.Now(), time.Hour); got != tc.want {
				t.Fatalf("presumed %v, want %v", got, tc.want)
			}
			if w := fresh.claim("t"); len(w.desired) != tc.claims {
				t.Errorf("claimed %d, want %d", len(w.desired), tc.claims)
			}
			if tc.want && fresh.summary("t").pending() {
				t.Errorf("pending after a presumption: %+v", fresh.summary("t"))
			}
		})
	}
}

// Only a template Ready for its spec, with a content digest, is presumed.
func TestPresumptionOf(t *testing.T) {
	ready := func(gen int64) *v1alpha1.MinionTemplate {
		tpl := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		tpl.Status.ObservedGeneration = 2
		tpl.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.SucceededReason, ObservedGeneration: 2}}
		tpl.Status.Policies = &v1alpha1.PolicySummary{Count: 3, Digest: "d", ContentDigest: "c"}
		return tpl
	}
	if p, ok := presumptionOf(ready(2)); !ok || p != (presumption{count: 3, digest: "d", content: "c"}) {
		t.Errorf("Ready: %+v %v", p, ok)
	}
	if _, ok := presumptionOf(ready(3)); ok {
		t.Error("presumed for a spec not handled yet")
	}
	noContent := ready(2)
	noContent.Status.Policies.ContentDigest = ""
	if _, ok := presumptionOf(noContent); ok {
		t.Error("presumed without a content digest (a previous release's status)")
	}
	progressing := ready(2)
	progressing.Status.Conditions[0].Status, progressing.Status.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.ProgressingReason
	if _, ok := presumptionOf(progressing); ok {
		t.Error("presumed while not Ready")
	}
}

// An interval too short for sixty one-second slots has fewer, so that
// every name still comes once per interval.
func TestShortIntervalsHaveFewerSlots(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		length   time.Duration
		slots    int64
	}{
		{time.Hour, time.Minute, 60},
		{time.Minute, time.Second, 60},
		{10 * time.Second, time.Second, 10},
		{500 * time.Millisecond, time.Second, 1},
	} {
		if l, n := slotsOf(tc.interval); l != tc.length || n != tc.slots {
			t.Errorf("%s: %d slots of %s, want %d of %s", tc.interval, n, l, tc.slots, tc.length)
		}
	}
	x := confirmedIndex(100)
	start := time.Unix(1_000_000, 0)
	x.part("t").verifyDue(start, 10*time.Second)
	seen := map[string]bool{}
	for i := 1; i <= 10; i++ {
		x.part("t").verifyDue(start.Add(time.Duration(i)*time.Second), 10*time.Second)
		w := x.claim("t")
		for name := range w.desired {
			seen[name] = true
		}
		x.settle("t", w, policyPass{owned: slices.Sorted(maps.Keys(w.desired))})
	}
	if len(seen) != 100 {
		t.Errorf("%d of 100 policies compared in a 10 s interval", len(seen))
	}
}
