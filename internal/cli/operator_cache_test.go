package cli

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// What the cache keeps of a Secret or ConfigMap is what the watches and the
// version checks read: a Secret's annotations can hold its data.
func TestCacheKeepsNameAndVersionOnly(t *testing.T) {
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ops", Name: "token", UID: "u1", ResourceVersion: "42",
		Labels:          map[string]string{"app": "x"},
		Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"token":"czEyMw=="}}`},
		OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
		Finalizers:      []string{"f"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	in.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	out, err := nameAndVersionOnly(in)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	want := metav1.ObjectMeta{Namespace: "ops", Name: "token", UID: "u1", ResourceVersion: "42"}
	if m.Kind != "Secret" || m.Namespace != want.Namespace || m.Name != want.Name || m.UID != want.UID || m.ResourceVersion != want.ResourceVersion ||
		m.Labels != nil || m.Annotations != nil || m.OwnerReferences != nil || m.Finalizers != nil || m.ManagedFields != nil {
		t.Errorf("kept %+v", m)
	}
	// Not an object: passed through, no error.
	if got, err := nameAndVersionOnly("tombstone"); err != nil || got != "tombstone" {
		t.Errorf("non-object: %v, %v", got, err)
	}
}

// The cache options: Secrets and ConfigMaps transformed, bindings limited to
// the shard, and the client reading Secrets and ConfigMaps uncached.
func TestCacheOptions(t *testing.T) {
	opts, err := CacheOptions(OperatorOptions{WatchNamespace: "salt", LabelSelector: "shard=a"})
	if err != nil {
		t.Fatal(err)
	}
	var secrets, configMaps, bindings bool
	for obj, by := range opts.ByObject {
		switch obj.(type) {
		case *corev1.Secret:
			secrets = by.Transform != nil
		case *corev1.ConfigMap:
			configMaps = by.Transform != nil
		case *v1alpha1.MinionBinding:
			bindings = by.Label != nil && by.Label.String() == "shard=a" && len(by.Namespaces) == 1
		}
	}
	if !secrets || !configMaps || !bindings {
		t.Errorf("Secrets transformed %v, ConfigMaps transformed %v, bindings sharded %v", secrets, configMaps, bindings)
	}
	if _, err := CacheOptions(OperatorOptions{LabelSelector: "=bad"}); err == nil {
		t.Error("a bad selector was accepted")
	}
	disabled := map[string]bool{}
	for _, obj := range ClientOptions().Cache.DisableFor {
		switch obj.(type) {
		case *corev1.Secret:
			disabled["Secret"] = true
		case *corev1.ConfigMap:
			disabled["ConfigMap"] = true
		}
	}
	if !disabled["Secret"] || !disabled["ConfigMap"] || len(disabled) != 2 {
		t.Errorf("uncached reads for %v, want Secret and ConfigMap", disabled)
	}
}

// Secrets are cached from the operator's namespace only, still as metadata
// stripped to name and version; without a namespace (tests) cluster-wide.
func TestCacheOptionsSecretNamespace(t *testing.T) {
	tests := []struct {
		name           string
		secretNS       string
		wantNamespaces []string
	}{
		{"the operator's namespace", "minion-vault-system", []string{"minion-vault-system"}},
		{"unset: cluster-wide", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := CacheOptions(OperatorOptions{SecretNamespace: tc.secretNS, WatchNamespace: "salt"})
			if err != nil {
				t.Fatal(err)
			}
			for obj, by := range opts.ByObject {
				var got []string
				for ns := range by.Namespaces {
					got = append(got, ns)
				}
				switch obj.(type) {
				case *corev1.Secret:
					if !slices.Equal(got, tc.wantNamespaces) {
						t.Errorf("Secrets cached from %v, want %v", got, tc.wantNamespaces)
					}
					if by.Transform == nil {
						t.Error("Secrets are not stripped to metadata")
					}
				case *corev1.ConfigMap:
					if got != nil {
						t.Errorf("ConfigMaps cached from %v, want every namespace", got)
					}
				case *v1alpha1.MinionBinding:
					if !slices.Equal(got, []string{"salt"}) {
						t.Errorf("bindings cached from %v, want the watched namespace", got)
					}
				}
			}
		})
	}
}
