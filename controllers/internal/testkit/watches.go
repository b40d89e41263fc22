package testkit

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// MetadataOf is what a metadata watch hands a map function.
func MetadataOf(kind, namespace, name string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return m
}

// WatchFixtures: two connections, three templates, and bindings that reach
// a connection through their template, their status (switching away) or
// their record (their template gone, being deleted).
func WatchFixtures() []client.Object {
	secretRef := func(ns, name string) v1alpha1.SecretReference {
		return v1alpha1.SecretReference{Namespace: ns, Name: name}
	}
	cmRef := func(ns, name string) v1alpha1.ParameterConfigMapReference {
		return v1alpha1.ParameterConfigMapReference{ConfigMapReference: v1alpha1.ConfigMapReference{Namespace: ns, Name: name}}
	}
	templateOf := func(name, conn string, cms ...v1alpha1.ParameterConfigMapReference) *v1alpha1.MinionTemplate {
		t := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: conn}}}
		if len(cms) > 0 {
			t.Spec.Parameters = &v1alpha1.ParametersSpec{Root: "vault", ConfigMapRefs: cms}
		}
		return t
	}
	bindingOf := func(name, tpl string, edit func(*v1alpha1.MinionBinding)) *v1alpha1.MinionBinding {
		b := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: name}, Spec: v1alpha1.MinionBindingSpec{
			MinionID: name, TemplateRef: v1alpha1.MinionTemplateReference{Name: tpl}}}
		if edit != nil {
			edit(b)
		}
		return b
	}
	record := func(conns ...string) func(*v1alpha1.MinionBinding) {
		return func(b *v1alpha1.MinionBinding) {
			var inv ownership.Inventory
			for _, c := range conns {
				inv = append(inv, ownership.Placement{Connection: c, Mount: "salt-minions", Entity: "salt_minion_" + b.Name + "_" + c})
			}
			b.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: inv.Encode()}
		}
	}
	return []client.Object{
		&v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault"}, Spec: v1alpha1.VaultConnectionSpec{
			Address: "https://vault", TLS: &v1alpha1.VaultTLS{CASecretRef: &v1alpha1.CASecretReference{SecretReference: secretRef("ops", "ca")}},
			Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{SecretReference: secretRef("ops", "token")}}}}},
		&v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: v1alpha1.VaultConnectionSpec{
			Address: "https://other", TLS: &v1alpha1.VaultTLS{CASecretRef: &v1alpha1.CASecretReference{SecretReference: secretRef("ops", "ca")}},
			Auth: v1alpha1.VaultAuth{AppRole: &v1alpha1.AppRoleAuth{RoleID: "r", SecretIDSecretRef: v1alpha1.SecretIDSecretReference{SecretReference: secretRef("ops", "approle")}}}}},
		templateOf("with", "vault", cmRef("salt", "params"), cmRef("salt", "more")),
		templateOf("also", "vault", cmRef("salt", "params"), cmRef("salt", "params")),
		templateOf("without", "other"),
		bindingOf("b1", "with", nil),
		bindingOf("b2", "without", nil),
		bindingOf("b3", "also", nil),
		bindingOf("switching", "without", func(b *v1alpha1.MinionBinding) { b.Status.Connection = "vault" }),
		bindingOf("orphan", "gone", record("vault")),
		bindingOf("orphan-other", "gone", record("other", "other")),
		bindingOf("bad-record", "gone", func(b *v1alpha1.MinionBinding) {
			b.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: "not json"}
		}),
	}
}

// ListsOnlyByIndex fails the test when a map function lists without a
// field selector: listing the fleet and filtering is what the indexes
// replace.
func ListsOnlyByIndex(t testing.TB) interceptor.Funcs {
	return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		lo := &client.ListOptions{}
		lo.ApplyOptions(opts)
		if lo.FieldSelector == nil || lo.FieldSelector.Empty() {
			t.Errorf("%T listed without an index", list)
		}
		return c.List(ctx, list, opts...)
	}}
}
