// Package testkit is for the controllers' unit tests only: a fake API
// server client with the operator's field indexes, and the objects most
// tests start from (a namespace, a connection, a template, a binding).
package testkit

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
)

// The cluster and Vault of the unit tests.
const (
	Cluster = "test-cluster"
	VaultID = "vault-cluster-1"
)

// Scheme knows the built-in kinds and the operator's.
func Scheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	return scheme
}

// WithFieldIndexes registers every field index of the operator (the
// same functions SetupIndexes registers) with a fake client.
func WithFieldIndexes(b *fake.ClientBuilder) *fake.ClientBuilder {
	for _, f := range watch.FieldIndexes {
		b = b.WithIndex(f.Obj, f.Field, f.Extract)
	}
	return b
}

// Builder is a fake client builder with the scheme, the status
// subresources of the three kinds and the field indexes.
func Builder() *fake.ClientBuilder {
	return WithFieldIndexes(fake.NewClientBuilder().WithScheme(Scheme()).
		WithStatusSubresource(&v1alpha1.MinionBinding{}, &v1alpha1.MinionTemplate{}, &v1alpha1.VaultConnection{}))
}

// RawDoc is v as a binding's pillar or grains document.
func RawDoc(v any) *v1alpha1.Document {
	b, _ := json.Marshal(v)
	d := v1alpha1.NewDocument(b)
	return &d
}

// Fixtures are namespace salt, connection vault (checked: it knows
// Vault's cluster ID), template t (policies salt_role_{pillar[roles]},
// entity metadata roles) and binding salt/web01 with pillar.
func Fixtures(pillar map[string]any) []client.Object {
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "salt"}},
		&v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault"}, Status: v1alpha1.VaultConnectionStatus{ClusterID: VaultID}},
		&v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Generation: 1}, Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: "vault"},
			Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"salt_role_{pillar[roles]}"}},
			Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
		}},
		&v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "web01", UID: "uid-web01", Generation: 1, CreationTimestamp: metav1.Now()},
			Spec: v1alpha1.MinionBindingSpec{MinionID: "web01", TemplateRef: v1alpha1.MinionTemplateReference{Name: "t"}, Pillar: RawDoc(pillar)}},
	}
}

// Reconcile runs r once on ns/name and fails the test unless a terminal
// error comes exactly with the object's Stalled condition (a stalled
// object is never retried; anything else that fails is).
func Reconcile(t testing.TB, c client.Client, r reconcile.Reconciler, ns, name string) ctrl.Result {
	t.Helper()
	key := types.NamespacedName{Namespace: ns, Name: name}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	stalled := false
	if b := (&v1alpha1.MinionBinding{}); c.Get(context.Background(), key, b) == nil {
		stalled = apimeta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.StalledCondition)
	}
	terminal := errors.Is(err, reconcile.TerminalError(nil))
	if err != nil && !terminal || terminal != stalled {
		t.Fatalf("reconcile: %v (stalled %v)", err, stalled)
	}
	return res
}

// Drain returns the events recorded so far, one per line, and forgets them.
func Drain(rec *events.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}
