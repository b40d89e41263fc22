package policy

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/binding"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/clusterfacts"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// The template controller's tests run the binding reconciler beside it
// (through its exported surface, as the operator does): a template writes
// the policies of the bindings that hold their minion in Vault.

const testCluster = testkit.Cluster

type harness struct {
	t   testing.TB
	c   client.Client
	v   *vaulttest.Fake
	rec *events.FakeRecorder
	r   *binding.Reconciler
}

func newHarness(t testing.TB, objs ...client.Object) *harness {
	c := testkit.Builder().WithObjects(objs...).Build()
	v := vaulttest.NewFake()
	v.EnableAuth("salt-minions")
	rec := events.NewFakeRecorder(100)
	conns := &connection.Connections{Client: c, NewClient: func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return v, nil }}
	return &harness{t: t, c: c, v: v, rec: rec, r: &binding.Reconciler{
		Client: c, Recorder: rec, Connections: conns, Templates: &clusterfacts.Templates{Client: c}, DefaultInterval: time.Hour,
		ClusterID: testCluster, SeesAllBindings: true,
	}}
}

// reconcile runs the binding reconciler once on ns/name; only a stalled
// binding may end in an error (a terminal one).
func (h *harness) reconcile(ns, name string) ctrl.Result {
	h.t.Helper()
	return testkit.Reconcile(h.t, h.c, h.r, ns, name)
}

func (h *harness) events() string { return testkit.Drain(h.rec) }

func fixtures(pillar map[string]any) []client.Object { return testkit.Fixtures(pillar) }

func rawDoc(v any) *v1alpha1.Document { return testkit.RawDoc(v) }

func testPolicyOwner(template string) ownership.PolicyOwner {
	return ownership.PolicyOwner{Cluster: testCluster, Template: template}
}

func ownershipHeader(template string) string { return testPolicyOwner(template).Header() }

// saltKey is the key of binding n in namespace salt.
func saltKey(n string) types.NamespacedName { return types.NamespacedName{Namespace: "salt", Name: n} }

// policiesOf is what a binding of template t contributes to the index:
// the policies kv, name then body.
func policiesOf(kv ...string) bindingPolicies {
	d := bindingPolicies{template: "t", member: true, docs: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		d.docs[kv[i]] = kv[i+1]
	}
	return d
}

// ownAndShared is three bindings of template t: b1 and b2 each render a
// policy of their own and one they share, b3 one of its own.
func ownAndShared() map[types.NamespacedName]bindingPolicies {
	return map[types.NamespacedName]bindingPolicies{
		saltKey("b1"): policiesOf("p1", "A", "shared", "S"),
		saltKey("b2"): policiesOf("p2", "B", "shared", "S"),
		saltKey("b3"): policiesOf("p3", "C"),
	}
}

// inVault is the index after a first scan of bindings with compiled and a
// sync that wrote every policy as wanted (Vault listed, nothing else in it).
func inVault(compiled *render.Compiled, bindings map[types.NamespacedName]bindingPolicies) *policyIndex {
	x := newPolicyIndex()
	x.rebuild("t", compiled, bindings, true)
	x.discoveredOwned("t", nil)
	w := x.claim("t")
	x.settle("t", w, policyPass{owned: slices.Sorted(maps.Keys(w.desired))})
	return x
}
