package connection

import (
	"context"
	"testing"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// harness is a fake API server client holding objs, one fake Vault that
// every connection's client is, and the Connections over them.
type harness struct {
	c     client.WithWatch
	v     *vaulttest.Fake
	rec   *events.FakeRecorder
	conns *Connections
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	t.Helper()
	c := testkit.Builder().WithObjects(objs...).Build()
	v := vaulttest.NewFake()
	v.EnableAuth("salt-minions")
	return &harness{c: c, v: v, rec: events.NewFakeRecorder(100),
		conns: &Connections{Client: c, NewClient: func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return v, nil }}}
}
