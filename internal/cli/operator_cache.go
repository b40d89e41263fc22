package cli

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// CacheOptions are the operator manager's cache: the MinionBindings of its
// shard, no managedFields, and Secrets and ConfigMaps as metadata only (the
// controllers watch them with WatchesMetadata), stripped to what the
// watches and the version checks use. A Secret's annotations can hold its
// data (kubectl apply's last-applied-configuration), so they go too.
// Secrets are cached from o.SecretNamespace only: the operator's RBAC grants
// no other, and a cluster-wide informer would fail to list ("" keeps the
// cache cluster-wide, for tests that grant that).
func CacheOptions(o OperatorOptions) (cache.Options, error) {
	bindings := cache.ByObject{}
	if o.LabelSelector != "" {
		sel, err := labels.Parse(o.LabelSelector)
		if err != nil {
			return cache.Options{}, fmt.Errorf("--watch-label-selector: %w", err)
		}
		bindings.Label = sel
	}
	if o.WatchNamespace != "" {
		bindings.Namespaces = map[string]cache.Config{o.WatchNamespace: {}}
	}
	secrets := cache.ByObject{Transform: nameAndVersionOnly}
	if o.SecretNamespace != "" {
		secrets.Namespaces = map[string]cache.Config{o.SecretNamespace: {}}
	}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.MinionBinding{}: bindings,
			&corev1.Secret{}:          secrets,
			&corev1.ConfigMap{}:       {Transform: nameAndVersionOnly},
		},
		// managedFields are a large part of every object and nothing
		// here reads them: at ten thousand bindings that is memory.
		DefaultTransform: cache.TransformStripManagedFields(),
	}, nil
}

// ClientOptions make the manager's client read Secrets and ConfigMaps from
// the API server, never from a cache: nothing may start an informer that
// holds their data.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

// nameAndVersionOnly keeps of an object's metadata what the operator's
// watches and version checks read (kind, namespace, name, UID,
// resourceVersion, timestamps) and drops labels, annotations, owners,
// finalizers and managedFields.
func nameAndVersionOnly(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil // not an object (a tombstone): as it is
	}
	obj.SetLabels(nil)
	obj.SetAnnotations(nil)
	obj.SetOwnerReferences(nil)
	obj.SetFinalizers(nil)
	obj.SetManagedFields(nil)
	return in, nil
}
