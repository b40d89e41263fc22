// Package testkit is for the controllers' unit tests only: a fake API
// server client with the operator's field indexes, and the objects most
// tests start from (a namespace, a connection, a template, a binding).
package testkit

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/shared"
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
	for _, f := range shared.FieldIndexes {
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
