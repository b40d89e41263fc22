package connection

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// The operator's namespace in these tests, and one it may not read.
const (
	opNamespace    = testkit.OpNamespace
	otherNamespace = testkit.OtherNamespace
)

func nsSecret(ns, name string) *corev1.Secret { return testkit.NSSecret(ns, name) }

func nsConnection(authNS, caNS string, appRole bool) *v1alpha1.VaultConnection {
	return testkit.NSConnection(authNS, caNS, appRole)
}

// secretReads counts the Gets of Secrets (data or metadata) outside the
// operator's namespace through the client it wraps.
func secretReads(c client.WithWatch, outside *atomic.Int64) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		if _, ok := obj.(*corev1.Secret); (ok || kind == "Secret") && key.Namespace != opNamespace {
			outside.Add(1)
		}
		return c.Get(ctx, key, obj, opts...)
	}})
}

// A connection may name Secrets in the operator's namespace only: any other
// is refused before anything is read, with a wait that stalls the
// connection and makes its bindings wait as for a missing Secret.
func TestConnectionSecretNamespace(t *testing.T) {
	tests := []struct {
		name      string
		allowed   string // Connections.SecretNamespace
		conn      *v1alpha1.VaultConnection
		wantField string // "" when the connection is allowed
		wantRef   string // the refused reference, in the message
	}{
		{"any namespace when unset", "", nsConnection(otherNamespace, otherNamespace, false), "", ""},
		{"token in the operator's namespace", opNamespace, nsConnection(opNamespace, opNamespace, false), "", ""},
		{"AppRole secret ID in the operator's namespace", opNamespace, nsConnection(opNamespace, "", true), "", ""},
		{"token elsewhere", opNamespace, nsConnection(otherNamespace, "", false), "spec.auth.token.secretRef", otherNamespace + "/vault-token"},
		{"AppRole secret ID elsewhere", opNamespace, nsConnection(otherNamespace, "", true), "spec.auth.appRole.secretIDSecretRef", otherNamespace + "/vault-token"},
		{"CA elsewhere, token at home", opNamespace, nsConnection(opNamespace, otherNamespace, false), "spec.tls.caSecretRef", otherNamespace + "/vault-ca"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.conn, nsSecret(opNamespace, "vault-token"), nsSecret(otherNamespace, "vault-token"),
				nsSecret(opNamespace, "vault-ca"), nsSecret(otherNamespace, "vault-ca"))
			var outside atomic.Int64
			c := secretReads(h.c.(client.WithWatch), &outside)
			conns := &Connections{Client: c, Metadata: c, SecretNamespace: tc.allowed,
				Cache: &vault.Cache{New: func(context.Context, vault.Config, vault.Observer) (vault.Client, error) {
					return vaulttest.NewFake(), nil
				}}}
			_, _, err := conns.Get(context.Background(), "vault")
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				// Unrestricted, the Secrets elsewhere are read: the
				// counter the refusals are checked with counts.
				if tc.allowed == "" && outside.Load() == 0 {
					t.Error("no read outside counted")
				}
				return
			}
			if err == nil {
				t.Fatal("a Secret outside the operator's namespace was accepted")
			}
			if n := outside.Load(); n != 0 {
				t.Errorf("%d Secret reads outside %s", n, opNamespace)
			}
			if reason, ok := outcome.StalledConnection(err); !ok || reason != v1alpha1.SecretNamespaceNotAllowedReason {
				t.Errorf("connection stall reason %q, %v", reason, ok)
			}
			// Bindings and templates: a wait on the connection, and a
			// deleted binding keeps its Vault objects' finalizer.
			if o := outcome.For(err); o.Kind != outcome.OutcomeWaiting || o.Reason != v1alpha1.ConnectionNotReadyReason {
				t.Errorf("binding outcome %+v, want waiting with %s", o, v1alpha1.ConnectionNotReadyReason)
			}
			if !outcome.WaitingOn(err, outcome.WaitingForCredential) {
				t.Error("not a wait for the connection's credentials")
			}
			for _, want := range []string{`VaultConnection "vault"`, tc.wantField, tc.wantRef, `namespace "` + opNamespace + `"`, "docs/operations.md#connection-secrets-in-the-operators-namespace"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
		})
	}
}

// The VaultConnection's own status: Stalled with SecretNamespaceNotAllowed
// (no backoff, no hot loop) while a reference points elsewhere, Ready once
// it is moved into the operator's namespace.
func TestVaultConnectionSecretNamespaceCondition(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nsConnection(otherNamespace, "", false), nsSecret(opNamespace, "vault-token"), nsSecret(otherNamespace, "vault-token"))
	h.v.SetVersion("1.21.4")
	conns := &Connections{Client: h.c, SecretNamespace: opNamespace,
		Cache: &vault.Cache{New: func(context.Context, vault.Config, vault.Observer) (vault.Client, error) { return h.v, nil }}}
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: conns}
	steps := []struct {
		name        string
		namespace   string // of the token Secret reference
		wantReady   metav1.ConditionStatus
		wantReason  string
		wantStalled bool
	}{
		{"token Secret in another namespace", otherNamespace, metav1.ConditionFalse, v1alpha1.SecretNamespaceNotAllowedReason, true},
		{"moved into the operator's namespace", opNamespace, metav1.ConditionTrue, v1alpha1.SucceededReason, false},
	}
	for _, step := range steps {
		conn := &v1alpha1.VaultConnection{}
		if err := h.c.Get(ctx, types.NamespacedName{Name: "vault"}, conn); err != nil {
			t.Fatal(err)
		}
		conn.Spec.Auth.Token.SecretRef.Namespace = step.namespace
		if err := h.c.Update(ctx, conn); err != nil {
			t.Fatal(err)
		}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}})
		if err != nil {
			t.Fatalf("%s: reconcile error %v (a stalled connection is not retried with backoff)", step.name, err)
		}
		if err := h.c.Get(ctx, types.NamespacedName{Name: "vault"}, conn); err != nil {
			t.Fatal(err)
		}
		// Looked at again on the check interval only (jittered by 10%).
		if min := conn.EffectiveCheckInterval() * 9 / 10; res.RequeueAfter < min {
			t.Errorf("%s: requeue after %s, before the check interval", step.name, res.RequeueAfter)
		}
		ready := apimeta.FindStatusCondition(conn.Status.Conditions, v1alpha1.ReadyCondition)
		if ready == nil || ready.Status != step.wantReady || ready.Reason != step.wantReason {
			t.Fatalf("%s: Ready %+v, want %s %s", step.name, ready, step.wantReady, step.wantReason)
		}
		if got := apimeta.IsStatusConditionTrue(conn.Status.Conditions, v1alpha1.StalledCondition); got != step.wantStalled {
			t.Errorf("%s: Stalled %v, want %v", step.name, got, step.wantStalled)
		}
		if step.wantStalled && !strings.Contains(ready.Message, otherNamespace+"/vault-token") {
			t.Errorf("%s: message %q does not name the reference", step.name, ready.Message)
		}
	}
}
