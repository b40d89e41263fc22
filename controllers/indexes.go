package controllers

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// Field indexes: every watch that fans out from a referenced object to the
// objects that reference it asks one of these, so that a Secret, ConfigMap
// or connection event costs a lookup, not a list of the fleet.
const (
	// minionIDIndex: a binding by its minion ID, lowercased (Vault's
	// entity names are case-insensitive).
	minionIDIndex = "spec.minionID.lower"
	// templateRefIndex: a binding by its template.
	templateRefIndex = "spec.templateRef.name"
	// bindingConnectionIndex: a binding by the connections it wrote
	// through (status.connection and its record's), which are not its
	// template's connection while it switches or after its template is gone.
	bindingConnectionIndex = "status.connection+record"
	// templateConnectionIndex: a template by its connection.
	templateConnectionIndex = "spec.connectionRef.name"
	// templateConfigMapIndex: a template by the namespace/name of each
	// parameters ConfigMap.
	templateConfigMapIndex = "spec.parameters.configMapRefs"
	// connectionSecretIndex: a connection by the namespace/name of each
	// Secret it reads.
	connectionSecretIndex = "spec.secretRefs"
)

// fieldIndex is one index: the kind it indexes, its name and what it keys
// each object by.
type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// fieldIndexes are all of them. Every controller's map functions and
// reconcilers rely on some, and which controllers run is a flag, so all are
// registered whichever run.
var fieldIndexes = []fieldIndex{
	{&v1alpha1.MinionBinding{}, minionIDIndex, func(o client.Object) []string {
		if b, ok := o.(*v1alpha1.MinionBinding); ok {
			return []string{minionIDKey(b.Spec.MinionID)}
		}
		return nil
	}},
	{&v1alpha1.MinionBinding{}, templateRefIndex, func(o client.Object) []string {
		if b, ok := o.(*v1alpha1.MinionBinding); ok {
			return []string{b.Spec.TemplateRef.Name}
		}
		return nil
	}},
	{&v1alpha1.MinionBinding{}, bindingConnectionIndex, func(o client.Object) []string {
		if b, ok := o.(*v1alpha1.MinionBinding); ok {
			return writtenThrough(b)
		}
		return nil
	}},
	{&v1alpha1.MinionTemplate{}, templateConnectionIndex, func(o client.Object) []string {
		if t, ok := o.(*v1alpha1.MinionTemplate); ok && t.Spec.ConnectionRef.Name != "" {
			return []string{t.Spec.ConnectionRef.Name}
		}
		return nil
	}},
	{&v1alpha1.MinionTemplate{}, templateConfigMapIndex, func(o client.Object) []string {
		t, ok := o.(*v1alpha1.MinionTemplate)
		if !ok || t.Spec.Parameters == nil {
			return nil
		}
		var out []string
		for _, ref := range t.Spec.Parameters.ConfigMapRefs {
			out = append(out, objectKey(ref.Namespace, ref.Name))
		}
		return dedupe(out)
	}},
	{&v1alpha1.VaultConnection{}, connectionSecretIndex, func(o client.Object) []string {
		c, ok := o.(*v1alpha1.VaultConnection)
		if !ok {
			return nil
		}
		var out []string
		for _, ref := range secretRefs(c) {
			out = append(out, objectKey(ref.Namespace, ref.Name))
		}
		return dedupe(out)
	}},
}

// SetupIndexes registers the field indexes the reconcilers and map
// functions query.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	for _, f := range fieldIndexes {
		if err := idx.IndexField(ctx, f.obj, f.field, f.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", f.obj, f.field, err)
		}
	}
	return nil
}

// writtenThrough names the connections a binding's Vault objects were
// written through. A record that cannot be read adds nothing: the binding
// reports it itself, and status.connection still wakes it.
func writtenThrough(b *v1alpha1.MinionBinding) []string {
	var out []string
	if b.Status.Connection != "" {
		out = append(out, b.Status.Connection)
	}
	if inv, err := ownership.Decode(b.Annotations[v1alpha1.VaultObjectsAnnotation]); err == nil {
		for _, p := range inv {
			if p.Connection != "" {
				out = append(out, p.Connection)
			}
		}
	}
	return dedupe(out)
}

// objectKey is a namespaced object's index key.
func objectKey(namespace, name string) string { return namespace + "/" + name }

// dedupe sorts and removes repeated keys: an object is listed once under a
// key however often it names it.
func dedupe(keys []string) []string {
	slices.Sort(keys)
	return slices.Compact(keys)
}

// The lookups below read only names: they take the cached objects as they
// are (UnsafeDisableDeepCopy), since a connection's event at a start would
// otherwise deep-copy every binding of the fleet to name them.

// bindingsBy lists the bindings under an index key as requests.
func bindingsBy(ctx context.Context, c client.Reader, index, key string) ([]reconcile.Request, error) {
	list := &v1alpha1.MinionBindingList{}
	if err := c.List(ctx, list, client.MatchingFields{index: key}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing bindings by %s=%q: %w", index, key, err)
	}
	return requests(list), nil
}

// bindingsOfTemplates lists the bindings of the templates: the fan-out
// of a connection, a ConfigMap or a template to the bindings it wakes.
func bindingsOfTemplates(ctx context.Context, c client.Reader, templates []string) ([]reconcile.Request, error) {
	var out []reconcile.Request
	for _, tpl := range templates {
		reqs, err := bindingsBy(ctx, c, templateRefIndex, tpl)
		if err != nil {
			return nil, err
		}
		out = append(out, reqs...)
	}
	return out, nil
}

// bindingsOfNamespace lists the bindings of a namespace (its labels
// decide which templates admit them), or logs why it cannot.
func bindingsOfNamespace(ctx context.Context, c client.Reader, ns string) []reconcile.Request {
	list := &v1alpha1.MinionBindingList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return mapped(ctx, nil, fmt.Errorf("listing the bindings of namespace %s: %w", ns, err))
	}
	return requests(list)
}

// templatesBy names the templates under an index key.
func templatesBy(ctx context.Context, c client.Reader, index, key string) ([]string, error) {
	list := &v1alpha1.MinionTemplateList{}
	if err := c.List(ctx, list, client.MatchingFields{index: key}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing templates by %s=%q: %w", index, key, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, t := range list.Items {
		out = append(out, t.Name)
	}
	return out, nil
}

// connectionsBy names the connections under an index key.
func connectionsBy(ctx context.Context, c client.Reader, index, key string) ([]string, error) {
	list := &v1alpha1.VaultConnectionList{}
	if err := c.List(ctx, list, client.MatchingFields{index: key}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing connections by %s=%q: %w", index, key, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, c := range list.Items {
		out = append(out, c.Name)
	}
	return out, nil
}

// uniqueRequests drops repeated requests, keeping the first of each.
func uniqueRequests(reqs []reconcile.Request) []reconcile.Request {
	seen := make(map[types.NamespacedName]bool, len(reqs))
	out := reqs[:0]
	for _, r := range reqs {
		if !seen[r.NamespacedName] {
			seen[r.NamespacedName] = true
			out = append(out, r)
		}
	}
	return out
}
