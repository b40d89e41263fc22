package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The index reports exactly the names whose desired state changes, so a
// binding delta touches Vault for nothing else.
func TestPolicyIndexTouchesOnlyChangedNames(t *testing.T) {
	x := newPolicyIndex()
	x.rebuild("t", nil, nil)
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "salt", Name: n} }
	docs := func(kv ...string) bindingDocs {
		d := bindingDocs{template: "t", member: true, docs: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			d.docs[kv[i]] = kv[i+1]
		}
		return d
	}
	steps := []struct {
		name    string
		binding string
		docs    bindingDocs
		touched []string
	}{
		{"first binding of a policy", "b1", docs("p1", "A"), []string{"p1"}},
		{"a second binding of it", "b2", docs("p1", "A"), nil},
		{"the same again (a resync)", "b2", docs("p1", "A"), nil},
		{"one more policy", "b2", docs("p1", "A", "p2", "B"), []string{"p2"}},
		{"a different body: a conflict, nothing to write", "b3", docs("p1", "X"), []string{"p1"}},
		{"the conflict resolved", "b3", docs(), []string{"p1"}},
		{"one of two bindings gone", "b1", bindingDocs{}, nil},
		{"the last one gone", "b2", bindingDocs{}, []string{"p1", "p2"}},
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
			if _, ok := x.desiredOf("t", "p1"); ok {
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
	x.observe("t", policyPass{owned: []string{"a", "b", "c"}})
	if got, want := x.summary("t").digest, PolicySetDigest([]string{"c", "a", "b"}); got != want || got == "" {
		t.Errorf("digest %s, want %s", got, want)
	}
	x.observe("t", policyPass{deleted: []string{"b"}, owned: []string{"a"}})
	if got, want := x.summary("t").digest, PolicySetDigest([]string{"a", "c"}); got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
	x.observe("t", policyPass{deleted: []string{"a", "c"}})
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
	r := &MinionTemplateReconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, Bindings: h.r}
	reconcile := func(ns, name string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	policies := func() []string {
		names, _ := h.v.ListPolicies(ctx)
		return slices.DeleteFunc(names, func(n string) bool { return n == "default" || n == "root" })
	}

	reconcile("", "t") // the full scan after a start
	if got := policies(); !slices.Equal(got, []string{"minion_web01", "salt_role_web"}) {
		t.Fatalf("after the first scan: %q", got)
	}
	tpl := &v1alpha1.MinionTemplate{}
	_ = h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl)
	if p := tpl.Status.Policies; p == nil || p.Count != 2 || p.Digest != PolicySetDigest([]string{"minion_web01", "salt_role_web"}) || tpl.Status.Bindings != 1 {
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
	reconcile("salt", "web02")
	if h.v.Calls("ReadPolicy") != 1 || h.v.Calls("WritePolicy") != 1 || h.v.Calls("*") != 2 {
		t.Errorf("a new binding's delta: %d reads, %d writes, %d calls", h.v.Calls("ReadPolicy"), h.v.Calls("WritePolicy"), h.v.Calls("*"))
	}
	// A delta that changes nothing a policy depends on costs nothing.
	h.v.ResetCalls()
	reconcile("salt", "web02")
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

	// The template deleted: everything with its header goes.
	if err := h.c.Delete(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	r.index = newPolicyIndex() // as after a restart: nothing in memory
	reconcile("", "t")
	if got := policies(); len(got) != 0 {
		t.Errorf("after deleting the template: %q", got)
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
	x.noteDelta("t", policyPass{written: names("w", 25), deleted: names("d", 1)})
	x.noteDelta("t", policyPass{written: names("v", 5)})
	w, d := x.takeUnreported("t")
	if len(w) != reportNames+1 || w[reportNames] != "and 10 more" || strings.Join(d, ",") != "d0" {
		t.Errorf("unreported: %v / %v", w, d)
	}
	if w, d := x.takeUnreported("t"); w != nil || d != nil {
		t.Errorf("reported twice: %v / %v", w, d)
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
			v := vault.NewFake()
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
				found, err := discoverOwned(ctx, v, tpl, rd, desired(tpl))
				if err != nil || len(found) != 0 {
					t.Fatalf("%s's discovery: %v %v", tpl, found, err)
				}
			}
			sync := func(tpl string) {
				pass, err := syncPolicies(ctx, v, tpl, false, desired(tpl), nil, rd)
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
			inVault := len(slices.DeleteFunc(names, func(n string) bool { return n == "root" }))
			if got := v.Calls("ReadPolicy"); got != inVault || inVault != 8 {
				t.Errorf("%d policy reads for %d policies in Vault (%v)", got, inVault, names)
			}
		})
	}
	// A kept body is taken once, and only while fresh.
	var owners policyOwners
	rd := owners.reader("k")
	v := vault.NewFake()
	if err := v.WritePolicy(ctx, "p", ownershipHeader("t")+body); err != nil {
		t.Fatal(err)
	}
	if owner, found, err := rd.owner(ctx, v, "p"); err != nil || !found || owner != "t" {
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
	rd.v.bodies["old"] = keptBody{hcl: "x", at: time.Now().Add(-keptBodyTTL)}
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
	v := vault.NewFake()
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
			_, err := discoverOwned(ctx, v, "a", rd, nil)
			done <- err
		}()
		pass, err := syncPolicies(ctx, v, "b", false, desired, nil, rd)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err != nil || len(pass.owned) != 300 || len(pass.written) != 0 {
			t.Fatalf("sync: %d owned, %d written, %v", len(pass.owned), len(pass.written), err)
		}
		// 300 policies and default.
		if got := v.Calls("ReadPolicy"); got != 301 {
			t.Errorf("round %d: %d reads of 301 policies", round, got)
		}
	}
}
