package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// The index reports exactly the names whose desired state changes, so a
// binding delta touches Vault for nothing else.
func TestPolicyIndexTouchesOnlyChangedNames(t *testing.T) {
	x := newPolicyIndex()
	x.rebuild("t", nil, nil, true)
	key, docs := saltKey, policiesOf
	steps := []struct {
		name    string
		binding string
		docs    bindingPolicies
		touched []string
	}{
		{"first binding of a policy", "b1", docs("p1", "A"), []string{"p1"}},
		{"a second binding of it", "b2", docs("p1", "A"), nil},
		{"the same again (a resync)", "b2", docs("p1", "A"), nil},
		{"one more policy", "b2", docs("p1", "A", "p2", "B"), []string{"p2"}},
		{"a different body: a conflict, nothing to write", "b3", docs("p1", "X"), []string{"p1"}},
		{"the conflict resolved", "b3", docs(), []string{"p1"}},
		{"one of two bindings gone", "b1", bindingPolicies{}, nil},
		{"the last one gone", "b2", bindingPolicies{}, []string{"p1", "p2"}},
	}
	for _, s := range steps {
		got := x.set(key(s.binding), s.docs)["t"]
		slices.Sort(got)
		if !slices.Equal(got, s.touched) {
			t.Errorf("%s: touched %q, want %q", s.name, got, s.touched)
		}
		if s.name == "a different body: a conflict, nothing to write" {
			if sum := x.summary("t"); len(sum.conflicts) != 1 || !strings.Contains(sum.conflicts[0], `"p1"`) {
				t.Errorf("conflicts %q", sum.conflicts)
			}
			if _, ok := x.wanted("t")["p1"]; ok {
				t.Error("a conflicting name is wanted")
			}
		}
	}
	if sum := x.summary("t"); sum.members != 1 || len(sum.conflicts) != 0 {
		t.Errorf("summary %+v", sum)
	}
}

// The digest kept one name at a time is the documented one.
func TestPolicyDigest(t *testing.T) {
	x := newPolicyIndex()
	bodies := policyWork{desired: map[string]string{"a": "A", "b": "B", "c": "C"}}
	x.settle("t", bodies, policyPass{owned: []string{"a", "b", "c"}})
	if got, want := x.summary("t").digest, policySetDigest([]string{"c", "a", "b"}); got != want || got == "" {
		t.Errorf("digest %s, want %s", got, want)
	}
	x.settle("t", bodies, policyPass{deleted: []string{"b"}, owned: []string{"a"}})
	if got, want := x.summary("t").digest, policySetDigest([]string{"a", "c"}); got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
	x.settle("t", policyWork{}, policyPass{deleted: []string{"a", "c"}})
	if got := x.summary("t"); got.digest != "" || got.owned != 0 {
		t.Errorf("empty set: %+v", got)
	}
}

// A template's policies follow its bindings one delta at a time, and its
// deletion removes every policy whose header names it, also those written
// before the operator started (found by listing Vault).
func TestTemplatePoliciesByDeltas(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	tplObj := objs[2].(*v1alpha1.MinionTemplate)
	tplObj.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
		{Name: "salt_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}},
		{Name: "minion_{minion}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}},
	}
	h := newHarness(t, objs...)
	ctx := context.Background()
	// Written by this template before a restart; no binding renders it.
	if err := h.v.WritePolicy(ctx, "minion_gone01", ownershipHeader("t")+"path \"x\" {\n  capabilities = [\"read\"]\n}\n"); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}
	reconcile := func(ns, name string) {
		t.Helper()
		var err error
		if ns == "" {
			_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
		} else {
			_, err = policyDeltaReconciler{r}.Reconcile(ctx, bindingKey{Namespace: ns, Name: name})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	policies := func() []string {
		names, _ := h.v.ListPolicies(ctx)
		return slices.DeleteFunc(names, func(n string) bool { return n == "default" || n == "root" })
	}

	reconcile("", "t") // the full scan after a start, before the binding wrote its minion
	if got := policies(); len(got) != 0 {
		t.Fatalf("policies of a binding that holds no minion yet: %q", got)
	}
	h.reconcile("salt", "web01")
	reconcile("salt", "web01") // the delta its status change wakes
	reconcile("", "t")         // the status refresh the delta asks for
	if got := policies(); !slices.Equal(got, []string{"minion_web01", "salt_role_web"}) {
		t.Fatalf("after the first scan: %q", got)
	}
	tpl := &v1alpha1.MinionTemplate{}
	_ = h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl)
	if p := tpl.Status.Policies; p == nil || p.Count != 2 || p.Digest != policySetDigest([]string{"minion_web01", "salt_role_web"}) || tpl.Status.Bindings != 1 {
		t.Errorf("status %+v, %d bindings", tpl.Status.Policies, tpl.Status.Bindings)
	}

	// A new binding with a role others have: only its own policy is
	// touched, one read and one write.
	b := objs[3].(*v1alpha1.MinionBinding).DeepCopy()
	b.Name, b.Spec.MinionID, b.ResourceVersion, b.CreationTimestamp = "web02", "web02", "", metav1.Now()
	if err := h.c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	h.v.ResetCalls()
	reconcile("salt", "web02") // created: it holds nothing yet
	if n := h.v.Calls("*"); n != 0 {
		t.Errorf("a binding that holds no minion yet made %d policy calls", n)
	}
	h.reconcile("salt", "web02")
	h.v.ResetCalls()
	reconcile("salt", "web02")
	if h.v.Calls("ReadPolicy") != 1 || h.v.Calls("WritePolicy") != 1 || h.v.Calls("*") != 2 {
		t.Errorf("a new binding's delta: %d reads, %d writes, %d calls", h.v.Calls("ReadPolicy"), h.v.Calls("WritePolicy"), h.v.Calls("*"))
	}
	// A delta that changes nothing a policy depends on costs nothing.
	h.v.ResetCalls()
	reconcile("salt", "web02")
	reconcile("", "t") // a status refresh
	if n := h.v.Calls("*"); n != 0 {
		t.Errorf("an unchanged delta made %d Vault calls", n)
	}
	// Deleted: its own policy goes, the shared one stays.
	if err := h.c.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	reconcile("salt", "web02")
	if got := policies(); !slices.Equal(got, []string{"minion_web01", "salt_role_web"}) {
		t.Errorf("after deleting web02: %q", got)
	}

	// The template deleted: everything with its header goes, and one
	// event says what.
	if err := h.c.Delete(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	r.index = newPolicyIndex() // as after a restart: nothing in memory
	h.events()
	reconcile("", "t")
	if got := policies(); len(got) != 0 {
		t.Errorf("after deleting the template: %q", got)
	}
	if evs := h.events(); evs != "Normal PoliciesDeleted ACL policies deleted: minion_web01, salt_role_web" {
		t.Errorf("events of the deletion: %q", evs)
	}
}

// A burst of binding deltas is reported as one event naming a bounded
// number of policies and counting the rest.
func TestAppendCounted(t *testing.T) {
	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	var list []string
	for range 30 {
		list = appendCounted(list, names("p", 3))
	}
	if len(list) != reportNames+1 || list[reportNames] != "and 70 more" || list[0] != "p0" {
		t.Fatalf("after 90 names: %d entries, last %q", len(list), list[len(list)-1])
	}
	if got := appendCounted(nil, names("q", 2)); strings.Join(got, ",") != "q0,q1" {
		t.Errorf("two names: %v", got)
	}
	if got := appendCounted(nil, nil); got != nil {
		t.Errorf("no names: %v", got)
	}
	x := newPolicyIndex()
	x.settle("t", policyWork{}, policyPass{written: names("w", 25), deleted: names("d", 1)})
	x.settle("t", policyWork{}, policyPass{written: names("v", 5)})
	pass := x.begin("t", scanRequest{interval: time.Hour}, time.Now())
	e := x.end(pass, time.Now())
	if w, d := e.written, e.deleted; len(w) != reportNames+1 || w[reportNames] != "and 10 more" || strings.Join(d, ",") != "d0" {
		t.Errorf("unreported: %v / %v", w, d)
	}
	if e := x.end(pass, time.Now()); e.written != nil || e.deleted != nil {
		t.Errorf("reported twice: %v / %v", e.written, e.deleted)
	}
}

// After a start, templates scan in any order: one's discovery reads the
// policies of another on the same Vault, or another's sync has read them
// already. Either way each policy in Vault is read once.
func TestDiscoveryReadsEachPolicyOnce(t *testing.T) {
	ctx := context.Background()
	body := "path \"x\" {\n  capabilities = [\"read\"]\n}\n"
	desired := func(tpl string) map[string]string {
		out := map[string]string{}
		for i := range 3 {
			out[fmt.Sprintf("%s_%d", tpl, i)] = body
		}
		return out
	}
	for _, order := range []string{"a's discovery before b's sync", "b's sync before a's discovery"} {
		t.Run(order, func(t *testing.T) {
			v := vaulttest.NewFake()
			for _, tpl := range []string{"a", "b"} {
				for name := range desired(tpl) {
					if err := v.WritePolicy(ctx, name, ownershipHeader(tpl)+body); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := v.WritePolicy(ctx, "foreign", body); err != nil {
				t.Fatal(err)
			}
			var owners policyOwners
			rd := owners.reader("cluster/c/namespace/")
			v.ResetCalls()
			scan := func(tpl string) {
				found, err := discoverOwned(ctx, v, testPolicyOwner(tpl), rd, desired(tpl))
				if err != nil || len(found) != 0 {
					t.Fatalf("%s's discovery: %v %v", tpl, found, err)
				}
			}
			sync := func(tpl string) {
				pass, err := syncPolicies(ctx, v, testPolicyOwner(tpl), false, desired(tpl), nil, rd)
				if err != nil || len(pass.owned) != 3 || len(pass.written) != 0 {
					t.Fatalf("%s's sync: %+v %v", tpl, pass, err)
				}
			}
			if order == "a's discovery before b's sync" {
				scan("a")
				sync("a")
				scan("b")
				sync("b")
			} else {
				scan("b")
				sync("b")
				sync("a")
				scan("a")
			}
			names, err := v.ListPolicies(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Built-in policies (root, default) are never read: they are
			// nobody's.
			inVault := len(slices.DeleteFunc(names, acl.IsBuiltin))
			if got := v.Calls("ReadPolicy"); got != inVault || inVault != 7 {
				t.Errorf("%d policy reads for %d policies in Vault (%v)", got, inVault, names)
			}
		})
	}
	// A kept body is taken once, and only while fresh.
	var owners policyOwners
	rd := owners.reader("k")
	v := vaulttest.NewFake()
	if err := v.WritePolicy(ctx, "p", ownershipHeader("t")+body); err != nil {
		t.Fatal(err)
	}
	if owner, found, err := rd.owner(ctx, v, "p"); err != nil || !found || owner != testPolicyOwner("t") {
		t.Fatalf("owner %q %v %v", owner, found, err)
	}
	for range 2 {
		if _, _, err := rd.read(ctx, v, "p"); err != nil {
			t.Fatal(err)
		}
	}
	if got := v.Calls("ReadPolicy"); got != 2 {
		t.Errorf("kept, taken, read again: %d reads, want 2", got)
	}
	rd.v.bodies["old"] = discoveredBody{hcl: "x", at: time.Now().Add(-discoveredBodyTTL)}
	rd.prune()
	if len(rd.v.bodies) != 0 {
		t.Errorf("stale bodies kept: %v", rd.v.bodies)
	}
}

// A discovery and a sync walking the same names at the same time (two
// templates' first scans after a start) read each policy once between them.
func TestDiscoveryAndSyncConcurrently(t *testing.T) {
	ctx := context.Background()
	body := "path \"x\" {\n  capabilities = [\"read\"]\n}\n"
	desired := map[string]string{}
	v := vaulttest.NewFake()
	for i := range 300 {
		name := fmt.Sprintf("b_%03d", i)
		desired[name] = body
		if err := v.WritePolicy(ctx, name, ownershipHeader("b")+body); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 5 {
		var owners policyOwners
		rd := owners.reader("k")
		v.ResetCalls()
		done := make(chan error, 1)
		go func() {
			_, err := discoverOwned(ctx, v, testPolicyOwner("a"), rd, nil)
			done <- err
		}()
		pass, err := syncPolicies(ctx, v, testPolicyOwner("b"), false, desired, nil, rd)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err != nil || len(pass.owned) != 300 || len(pass.written) != 0 {
			t.Fatalf("sync: %d owned, %d written, %v", len(pass.owned), len(pass.written), err)
		}
		// 300 policies (default, built in, is not read).
		if got := v.Calls("ReadPolicy"); got != 300 {
			t.Errorf("round %d: %d reads of 300 policies", round, got)
		}
	}
}

// What the index believes is in Vault changes only with what Vault
// answered: a name a sync could not confirm stays dirty, the next claim
// takes it again, and the summary is pending until it is confirmed.
func TestPolicyIndexRetriesWhatVaultDidNotConfirm(t *testing.T) {
	b1 := types.NamespacedName{Namespace: "salt", Name: "b1"}
	wants := func(body string) bindingPolicies {
		return bindingPolicies{template: "t", member: true, docs: map[string]string{"p1": body}}
	}
	// written: p1 confirmed in Vault with body A.
	written := func(x *policyIndex) {
		w := x.claim("t")
		x.settle("t", w, policyPass{owned: []string{"p1"}, written: []string{"p1"}})
	}
	tests := []struct {
		name    string
		before  func(x *policyIndex) // after a scan rendered b1 as p1=A
		answer  func(w policyWork) policyPass
		pending bool
		next    policyWork // what the next claim takes
	}{
		{"write succeeded", nil,
			func(policyWork) policyPass { return policyPass{owned: []string{"p1"}, written: []string{"p1"}} },
			false, policyWork{desired: map[string]string{}}},
		{"write failed: retried by the next sync", nil,
			func(policyWork) policyPass { return policyPass{} },
			true, policyWork{desired: map[string]string{"p1": "A"}}},
		{"body changed while the write was in flight: written again", nil,
			func(policyWork) policyPass { return policyPass{owned: []string{"p1"}, written: []string{"p1"}} },
			true, policyWork{desired: map[string]string{"p1": "B"}}},
		{"delete failed: the stale policy is kept and retried", func(x *policyIndex) { written(x); x.set(b1, bindingPolicies{}) },
			func(policyWork) policyPass { return policyPass{} },
			true, policyWork{desired: map[string]string{}, stale: []string{"p1"}}},
		{"delete succeeded", func(x *policyIndex) { written(x); x.set(b1, bindingPolicies{}) },
			func(policyWork) policyPass { return policyPass{deleted: []string{"p1"}} },
			false, policyWork{desired: map[string]string{}}},
		{"someone else's policy: reported, not retried", nil,
			func(policyWork) policyPass { return policyPass{notOwned: []string{"p1"}} },
			false, policyWork{desired: map[string]string{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newPolicyIndex()
			x.rebuild("t", nil, map[types.NamespacedName]bindingPolicies{b1: wants("A")}, true)
			if tc.before != nil {
				tc.before(x)
			}
			w := x.claim("t")
			if again := x.claim("t"); !again.empty() {
				t.Fatalf("a name in flight claimed twice: %+v", again)
			}
			if !x.summary("t").pending() {
				t.Fatal("not pending while a sync is in flight")
			}
			if strings.HasPrefix(tc.name, "body changed") {
				x.set(b1, wants("B"))
			}
			x.settle("t", w, tc.answer(w))
			if got := x.summary("t"); got.pending() != tc.pending {
				t.Errorf("pending %v, want %v (%+v)", got.pending(), tc.pending, got)
			}
			next := x.claim("t")
			if !maps.Equal(next.desired, tc.next.desired) || !slices.Equal(next.stale, tc.next.stale) {
				t.Errorf("next claim %+v, want %+v", next, tc.next)
			}
		})
	}
}

// Under Vault faults the template controllers converge without a poke:
// a failed write or delete is retried by the binding's retry, the template
// is not Ready while anything is missing or stale, and once Vault answers
// everything is in place with nothing written twice.
func TestFailedPolicySyncIsRetried(t *testing.T) {
	unavailable := &vault.Error{Op: "write sys/policies/acl", StatusCode: 503}
	tests := []struct {
		name   string
		fail   string // the Vault call that fails
		change func(ctx context.Context, h *harness, b *v1alpha1.MinionBinding) error
		want   []string // policies in Vault at the end
	}{
		{"a new binding's policy write fails", "WritePolicy",
			func(ctx context.Context, h *harness, b *v1alpha1.MinionBinding) error { return h.c.Create(ctx, b) },
			[]string{"minion_web01", "minion_web02"}},
		{"a deleted binding's policy delete fails", "DeletePolicy",
			func(ctx context.Context, h *harness, b *v1alpha1.MinionBinding) error {
				return h.c.Delete(ctx, &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "web01"}})
			},
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := fixtures(map[string]any{"roles": []string{"web"}})
			objs[2].(*v1alpha1.MinionTemplate).Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
				{Name: "minion_{minion}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
			h := newHarness(t, objs...)
			ctx := context.Background()
			r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}
			scan := func() (ctrl.Result, error) {
				return r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "t"}})
			}
			ready := func() *metav1.Condition {
				tpl := &v1alpha1.MinionTemplate{}
				if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl); err != nil {
					t.Fatal(err)
				}
				return apimeta.FindStatusCondition(tpl.Status.Conditions, v1alpha1.ReadyCondition)
			}
			h.reconcile("salt", "web01")
			if _, err := scan(); err != nil || ready().Status != metav1.ConditionTrue {
				t.Fatalf("first scan: %v %+v", err, ready())
			}
			b := objs[3].(*v1alpha1.MinionBinding).DeepCopy()
			b.Name, b.Spec.MinionID, b.UID, b.ResourceVersion = "web02", "web02", "uid-web02", ""
			if err := tc.change(ctx, h, b); err != nil {
				t.Fatal(err)
			}
			if tc.fail == "WritePolicy" {
				h.reconcile("salt", "web02") // it writes its minion: its policies count
			}
			key := bindingKey{Namespace: "salt", Name: "web02"}
			if tc.fail == "DeletePolicy" {
				key.Name = "web01"
			}
			delta := policyDeltaReconciler{r}
			// The delta fails; it leaves the retry to the template, whose
			// reconcile fails too, and returns that for its backoff.
			h.v.FailNext(tc.fail, unavailable)
			h.v.FailNext(tc.fail, unavailable)
			if _, err := delta.Reconcile(ctx, key); err != nil {
				t.Fatalf("the delta returned %v: every binding would back off on its own", err)
			}
			if _, err := scan(); err == nil {
				t.Error("the template's failed retry is not returned: no retry with backoff")
			}
			if c := ready(); c.Status == metav1.ConditionTrue || c.Reason != v1alpha1.VaultUnavailableReason {
				t.Errorf("Ready while a policy is missing or stale: %+v", c)
			}
			// The template's retry (nothing changed in the documents)
			// writes what failed, once.
			h.v.ResetCalls()
			if _, err := scan(); err != nil || ready().Status != metav1.ConditionTrue {
				t.Errorf("after the retry: %v %+v", err, ready())
			}
			if n := h.v.Writes(); n != 1 {
				t.Errorf("the retry made %d Vault writes, want 1", n)
			}
			names, _ := h.v.ListPolicies(ctx)
			names = slices.DeleteFunc(names, func(n string) bool { return n == "default" || n == "root" })
			if !slices.Equal(names, tc.want) {
				t.Errorf("policies %q, want %q", names, tc.want)
			}
		})
	}
}

// Deltas of one template run in parallel: no name is claimed by two syncs
// at once, and when they are done every wanted policy is confirmed.
func TestPolicyIndexParallelDeltas(t *testing.T) {
	x := newPolicyIndex()
	x.rebuild("t", nil, nil, true)
	var (
		mu       sync.Mutex
		inFlight = map[string]bool{}
		wg       sync.WaitGroup
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				key := types.NamespacedName{Namespace: "salt", Name: fmt.Sprintf("b%d-%d", g, i)}
				x.set(key, bindingPolicies{template: "t", member: true, docs: map[string]string{
					fmt.Sprintf("shared_%d", i%20): "A", "own_" + key.Name: "B"}})
				for w := x.claim("t"); !w.empty(); w = x.claim("t") {
					mu.Lock()
					for _, n := range w.names() {
						if inFlight[n] {
							t.Errorf("%s claimed twice", n)
						}
						inFlight[n] = true
					}
					mu.Unlock()
					pass := policyPass{owned: w.names(), written: w.names()}
					mu.Lock()
					for _, n := range w.names() {
						delete(inFlight, n)
					}
					mu.Unlock()
					x.settle("t", w, pass)
				}
			}
		}()
	}
	wg.Wait()
	if s := x.summary("t"); s.pending() || s.owned != 20+8*50 || s.members != 8*50 {
		t.Errorf("after the deltas: %+v", s)
	}
}

// hangingPolicyWrites is a Vault whose policy writes hang while the test
// holds hang; each write says so on entered first.
type hangingPolicyWrites struct {
	vault.Client
	hang    *sync.Mutex
	entered chan string
}

func (h hangingPolicyWrites) WritePolicy(ctx context.Context, name, body string) error {
	h.entered <- name
	h.hang.Lock()
	defer h.hang.Unlock()
	return h.Client.WritePolicy(ctx, name, body)
}

// A sync that hangs in Vault never leaves the template Ready while a
// policy is missing: neither a delta's (a status refresh is asked for
// before Vault is touched) nor the status pass's own retry (the status
// says so once the retry outlasts the grace).
func TestTemplateNotReadyWhileASyncHangs(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	objs[2].(*v1alpha1.MinionTemplate).Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
		{Name: "minion_{minion}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
	h := newHarness(t, objs...)
	ctx := context.Background()
	hang, entered := &sync.Mutex{}, make(chan string, 100)
	h.r.Connections.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) {
		return hangingPolicyWrites{Client: h.v, hang: hang, entered: entered}, nil
	}
	refreshed := make(chan string, 100)
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster,
		refresh: func(template string) { refreshed <- template }, announceGrace: 20 * time.Millisecond}
	scan := func() error {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "t"}})
		return err
	}
	ready := func() *metav1.Condition {
		tpl := &v1alpha1.MinionTemplate{}
		if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl); err != nil {
			t.Fatal(err)
		}
		return apimeta.FindStatusCondition(tpl.Status.Conditions, v1alpha1.ReadyCondition)
	}
	drain := func(ch chan string) {
		for len(ch) > 0 {
			<-ch
		}
	}
	waitForWrite := func(what string) {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no policy write reached Vault", what)
		}
	}
	newBinding := func(name string) {
		t.Helper()
		b := objs[3].(*v1alpha1.MinionBinding).DeepCopy()
		b.Name, b.Spec.MinionID, b.UID, b.ResourceVersion = name, name, types.UID("uid-"+name), ""
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		h.reconcile("salt", name) // it writes its minion: its policies count
	}
	h.reconcile("salt", "web01")
	if err := scan(); err != nil || ready().Status != metav1.ConditionTrue {
		t.Fatalf("first scan: %v %+v", err, ready())
	}

	// A delta's write hangs: the status refresh is asked for before it, and
	// runs (without waiting for the delta) to Ready=False.
	newBinding("web02")
	drain(entered)
	drain(refreshed)
	hang.Lock()
	done := make(chan error, 1)
	go func() {
		_, err := policyDeltaReconciler{r}.Reconcile(ctx, bindingKey{Namespace: "salt", Name: "web02"})
		done <- err
	}()
	waitForWrite("the delta")
	if len(refreshed) == 0 {
		t.Error("no status refresh asked for before the delta's sync: Ready=True stands while it hangs")
	}
	if err := scan(); err != nil {
		t.Fatal(err)
	}
	if c := ready(); c.Status == metav1.ConditionTrue {
		t.Errorf("Ready while the delta's write hangs: %+v", c)
	}
	hang.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := scan(); err != nil || ready().Status != metav1.ConditionTrue {
		t.Fatalf("after the delta: %v %+v", err, ready())
	}

	// A delta's write fails, and the status pass's own retry hangs: the
	// status says Ready=False before the retry starts.
	newBinding("web03")
	h.v.FailNext("WritePolicy", &vault.Error{Op: "write sys/policies/acl", StatusCode: 503})
	if _, err := (policyDeltaReconciler{r}).Reconcile(ctx, bindingKey{Namespace: "salt", Name: "web03"}); err != nil {
		t.Fatal(err)
	}
	if c := ready(); c.Status != metav1.ConditionTrue {
		t.Fatalf("the set-up: only the status pass changes the status, and none ran yet: %+v", c)
	}
	drain(entered)
	hang.Lock()
	go func() { done <- scan() }()
	waitForWrite("the status pass's retry")
	// The pass says so once the retry outlasts the grace.
	for deadline := time.Now().Add(10 * time.Second); ready().Status == metav1.ConditionTrue; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("Ready while the status pass's retry hangs: %+v", ready())
			break
		}
	}
	hang.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := scan(); err != nil || ready().Status != metav1.ConditionTrue {
		t.Fatalf("after the retry: %v %+v", err, ready())
	}
	names, _ := h.v.ListPolicies(ctx)
	if !slices.Contains(names, "minion_web02") || !slices.Contains(names, "minion_web03") {
		t.Errorf("policies %q", names)
	}
}

// A write sent after a discovery read a policy makes its kept body stale,
// whether or not the client heard the answer (a response lost on the way
// back): the sync that follows reads Vault again instead of writing the
// same body a second time.
func TestKeptBodyIsNotUsedAfterAWrite(t *testing.T) {
	ctx := context.Background()
	var owners policyOwners
	rd := owners.reader("k")
	v := vaulttest.NewFake()
	self := testPolicyOwner("t")
	old, want := self.Header()+"path \"a\" {\n  capabilities = [\"read\"]\n}\n", self.Header()+"path \"b\" {\n  capabilities = [\"read\"]\n}\n"
	if err := v.WritePolicy(ctx, "p", old); err != nil {
		t.Fatal(err)
	}
	// Another template's discovery reads p and keeps its body for t.
	if _, _, err := rd.owner(ctx, v, "p"); err != nil {
		t.Fatal(err)
	}
	// t's sync writes p; the answer is lost: the pass fails.
	rd.sendingChange("p")
	if err := v.WritePolicy(ctx, "p", want); err != nil {
		t.Fatal(err)
	}
	// The retry must see the written body, and plan nothing.
	v.ResetCalls()
	pass, err := syncPolicies(ctx, v, self, false, map[string]string{"p": strings.TrimPrefix(want, self.Header())}, nil, rd)
	if err != nil {
		t.Fatal(err)
	}
	if w := v.Calls("WritePolicy"); w != 0 || len(pass.written) != 0 {
		t.Errorf("the retry wrote p again (%d writes): it planned from the body kept before the write", w)
	}
	if r := v.Calls("ReadPolicy"); r != 1 {
		t.Errorf("%d reads, want 1", r)
	}
}

// A status pass whose sync ends within the grace patches the status once,
// at the end: during a burst of new bindings the template's status is
// refreshed once a second, and announcing each pass doubled its writes.
func TestAQuickPassPatchesTheStatusOnce(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	objs[2].(*v1alpha1.MinionTemplate).Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
		{Name: "minion_{minion}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
	h := newHarness(t, objs...)
	ctx := context.Background()
	var patches atomic.Int32
	counting := interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			// The status goes out as a patch of the template's metadata
			// (the answer is its metadata only).
			if obj.GetObjectKind().GroupVersionKind().Kind == "MinionTemplate" && sub == "status" {
				patches.Add(1)
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	r := &Reconciler{Client: counting, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}
	pass := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "t"}}); err != nil {
			t.Fatal(err)
		}
	}
	h.reconcile("salt", "web01")
	pass()
	tpl := &v1alpha1.MinionTemplate{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl); err != nil || !apimeta.IsStatusConditionTrue(tpl.Status.Conditions, v1alpha1.ReadyCondition) {
		t.Fatalf("the set-up: the template is Ready after its first pass: %v %+v", err, tpl.Status.Conditions)
	}

	// A new binding's policy is pending; the pass writes it quickly.
	b := objs[3].(*v1alpha1.MinionBinding).DeepCopy()
	b.Name, b.Spec.MinionID, b.UID, b.ResourceVersion = "web02", "web02", "uid-web02", ""
	if err := h.c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "web02")
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	docs, err := r.policiesOfBinding(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	r.index.set(types.NamespacedName{Namespace: "salt", Name: "web02"}, bindingPolicies{template: "t", member: true, docs: docs})
	if s := r.index.summary("t"); !s.pending() {
		t.Fatalf("the set-up: the new binding's policy is pending: %+v", s)
	}
	patches.Store(0)
	pass()
	if n := patches.Load(); n != 1 {
		t.Errorf("status patches of a quick pass: %d, want 1 (announced and then final)", n)
	}
}
