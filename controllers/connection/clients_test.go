package connection

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// A deleted connection's client is closed and dropped; so is the client of
// a connection deleted and created again under the same name.
func TestConnectionsForgetDeletedConnections(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "token"}, Data: map[string][]byte{"token": []byte("s.x")}}
	conn := func(uid string) *v1alpha1.VaultConnection {
		return &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", UID: types.UID(uid)}, Spec: v1alpha1.VaultConnectionSpec{
			Address: "http://vault", Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
				SecretReference: v1alpha1.SecretReference{Namespace: "ops", Name: "token"}}}}}}
	}
	h := newHarness(t, secret, conn("uid-1"))
	var made []*vaulttest.Fake
	cache := &vault.Cache{New: func(context.Context, vault.Config, vault.Observer) (vault.Client, error) {
		f := vaulttest.NewFake()
		made = append(made, f)
		return f, nil
	}}
	c := &Connections{Client: h.c, Cache: cache}
	ctx := context.Background()
	if _, _, err := c.Get(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 1 {
		t.Fatalf("cached %d", cache.Len())
	}

	// Deleted and created again: a new UID, and the old client is closed.
	old := &v1alpha1.VaultConnection{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "vault"}, old); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(ctx, conn("uid-2")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 1 || !made[0].Closed() {
		t.Fatalf("cached %d, first client closed %v", cache.Len(), made[0].Closed())
	}

	c.Forget("vault")
	if cache.Len() != 0 || !made[1].Closed() {
		t.Fatalf("after Forget: cached %d, client closed %v", cache.Len(), made[1].Closed())
	}
}
