//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// A VaultConnection whose token Secret is outside the operator's namespace
// is refused without a read: the connection is Stalled with
// SecretNamespaceNotAllowed, its binding waits (ConnectionNotReady), and
// once the reference is moved into the operator's namespace both turn
// Ready. The operator's RBAC for it is checked in test/install
// (TestPermissions: Secrets get/list/watch in its namespace only).
func TestConnectionSecretNamespace(t *testing.T) {
	s := start(t)
	rec := &apiRecorder{}
	s.wrapAPI = rec.wrap
	s.restartOperator(t)
	ctx := context.Background()
	const elsewhere = "secret-elsewhere"
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "conn", Labels: map[string]string{"team": "conn"}}})))
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elsewhere}}))
	s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "ns-token"},
		StringData: map[string]string{"token": s.token}}))
	conn := tokenConnection("ns-elsewhere", s.env.Vault.Addr, "ns-token")
	conn.Spec.Auth.Token.SecretRef.Namespace = elsewhere
	s.must(s.c.Create(ctx, conn))
	s.must(s.c.Create(ctx, connTemplate("ns-elsewhere", "ns-elsewhere")))
	s.must(s.c.Create(ctx, connBinding("ns-web01", "ns-elsewhere")))

	s.run("the connection is Stalled and its binding waits", func(t *testing.T) {
		eventually(t, 30*time.Second, "connection Stalled", func() error {
			return connectionStalled(s.c, "ns-elsewhere", elsewhere)
		})
		b := s.waitReason("conn", "ns-web01", v1alpha1.ConnectionNotReadyReason)
		if r := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); !strings.Contains(r.Message, operatorNamespace) {
			t.Errorf("binding message %q does not name the operator's namespace", r.Message)
		}
		if n := rec.gets("secrets", elsewhere, "ns-token"); n != 0 {
			t.Errorf("the Secret outside the operator's namespace was read %d times", n)
		}
		for _, r := range rec.all() {
			if r.resource == "secrets" && r.namespace != operatorNamespace {
				t.Errorf("%s of Secrets in %q %s: outside the operator's namespace", r.verb, r.namespace, r.name)
			}
		}
		if role := s.vaultRead("auth/salt-minions/role/ns-web01"); role != nil {
			t.Error("the binding's role was written through a refused connection")
		}
	})

	s.run("moved into the operator's namespace: Ready", func(t *testing.T) {
		s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "ns-token"},
			StringData: map[string]string{"token": s.token}}))
		got := &v1alpha1.VaultConnection{}
		s.must(s.c.Get(ctx, types.NamespacedName{Name: "ns-elsewhere"}, got))
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.Auth.Token.SecretRef.Namespace = operatorNamespace
		s.must(s.c.Patch(ctx, got, patch))
		s.waitConnectionReady("ns-elsewhere")
		s.must(s.c.Get(ctx, types.NamespacedName{Name: "ns-elsewhere"}, got))
		if apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.StalledCondition) != nil {
			t.Errorf("still Stalled: %+v", got.Status.Conditions)
		}
		s.waitReady("conn", "ns-web01")
		if role := s.vaultRead("auth/salt-minions/role/ns-web01"); role == nil {
			t.Error("the binding's role is not in Vault")
		}
	})
}

// connectionStalled checks that a connection is Stalled (and not Ready)
// for a Secret in namespace ns, with a message saying where it must be.
func connectionStalled(c client.Client, name, ns string) error {
	conn := &v1alpha1.VaultConnection{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, conn); err != nil {
		return err
	}
	ready := apimeta.FindStatusCondition(conn.Status.Conditions, v1alpha1.ReadyCondition)
	stalled := apimeta.FindStatusCondition(conn.Status.Conditions, v1alpha1.StalledCondition)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.SecretNamespaceNotAllowedReason ||
		stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != v1alpha1.SecretNamespaceNotAllowedReason {
		return fmt.Errorf("conditions %+v", conn.Status.Conditions)
	}
	for _, want := range []string{"spec.auth.token.secretRef", ns + "/ns-token", `"` + operatorNamespace + `"`, "docs/operations.md#connection-secrets-in-the-operators-namespace"} {
		if !strings.Contains(ready.Message, want) {
			return fmt.Errorf("message %q lacks %q", ready.Message, want)
		}
	}
	return nil
}
