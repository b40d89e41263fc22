package template

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/binding"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/admit"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The template controller's tests run the binding reconciler beside it
// (through its exported surface, as the operator does): a template writes
// the policies of the bindings that hold their minion in Vault.

const testCluster = testkit.Cluster

type harness struct {
	t   testing.TB
	c   client.Client
	v   *vault.Fake
	rec *events.FakeRecorder
	r   *binding.Reconciler
}

func newHarness(t testing.TB, objs ...client.Object) *harness {
	c := testkit.Builder().WithObjects(objs...).Build()
	v := vault.NewFake()
	v.EnableAuth("salt-minions")
	rec := events.NewFakeRecorder(100)
	conns := &connection.Connections{Client: c, NewClient: func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return v, nil }}
	return &harness{t: t, c: c, v: v, rec: rec, r: &binding.Reconciler{
		Client: c, Recorder: rec, Connections: conns, Templates: &admit.Templates{Client: c}, DefaultInterval: time.Hour,
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
