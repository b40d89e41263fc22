package watch

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
	// MinionIDIndex: a binding by its minion ID, lowercased (Vault's
	// entity names are case-insensitive).
	MinionIDIndex = "spec.minionID.lower"
	// TemplateRefIndex: a binding by its template.
	TemplateRefIndex = "spec.templateRef.name"
	// BindingConnectionIndex: a binding by the connections it wrote
	// through (status.connection and its record's), which are not its
	// template's connection while it switches or after its template is gone.
	BindingConnectionIndex = "status.connection+record"
	// TemplateConnectionIndex: a template by its connection.
	TemplateConnectionIndex = "spec.connectionRef.name"
	// TemplateConfigMapIndex: a template by the namespace/name of each
	// parameters ConfigMap.
	TemplateConfigMapIndex = "spec.parameters.configMapRefs"
	// ConnectionSecretIndex: a connection by the namespace/name of each
	// Secret it reads.
	ConnectionSecretIndex = "spec.secretRefs"
)

// fieldIndex is one index: the kind it indexes, its name and what it keys
// each object by.
type fieldIndex struct {
	Obj     client.Object
	Field   string
	Extract client.IndexerFunc
}

// FieldIndexes are all of them. Every controller's map functions and
// reconcilers rely on some, and which controllers run is a flag, so all are
// registered whichever run.
var FieldIndexes = []fieldIndex{
	{&v1alpha1.MinionBinding{}, MinionIDIndex, func(o client.Object) []string {
		if b, ok := o.(*v1alpha1.MinionBinding); ok {
			return []string{MinionIDKey(b.Spec.MinionID)}
		}
		return nil
	}},
	{&v1alpha1.MinionBinding{}, TemplateRefIndex, func(o client.Object) []string {
		if b, ok := o.(*v1alpha1.MinionBinding); ok {
			return []string{b.Spec.TemplateRef.Name}
		}
		return nil
	}},
	{&v1alpha1.MinionBinding{}, BindingConnectionIndex, func(o client.Object) []string {
		if b, ok := o.(*v1alpha1.MinionBinding); ok {
			return writtenThrough(b)
		}
		return nil
	}},
	{&v1alpha1.MinionTemplate{}, TemplateConnectionIndex, func(o client.Object) []string {
		if t, ok := o.(*v1alpha1.MinionTemplate); ok && t.Spec.ConnectionRef.Name != "" {
			return []string{t.Spec.ConnectionRef.Name}
		}
		return nil
	}},
	{&v1alpha1.MinionTemplate{}, TemplateConfigMapIndex, func(o client.Object) []string {
		t, ok := o.(*v1alpha1.MinionTemplate)
		if !ok || t.Spec.Parameters == nil {
			return nil
		}
		var out []string
		for _, ref := range t.Spec.Parameters.ConfigMapRefs {
			out = append(out, ObjectKey(ref.Namespace, ref.Name))
		}
		return dedupe(out)
	}},
	{&v1alpha1.VaultConnection{}, ConnectionSecretIndex, func(o client.Object) []string {
		c, ok := o.(*v1alpha1.VaultConnection)
		if !ok {
			return nil
		}
		var out []string
		for _, ref := range SecretRefs(c) {
			out = append(out, ObjectKey(ref.Namespace, ref.Name))
		}
		return dedupe(out)
	}},
}

// SetupIndexes registers the field indexes the reconcilers and map
// functions query.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	for _, f := range FieldIndexes {
		if err := idx.IndexField(ctx, f.Obj, f.Field, f.Extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", f.Obj, f.Field, err)
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

// ObjectKey is a namespaced object's index key.
func ObjectKey(namespace, name string) string { return namespace + "/" + name }

// dedupe sorts and removes repeated keys: an object is listed once under a
// key however often it names it.
func dedupe(keys []string) []string {
	slices.Sort(keys)
	return slices.Compact(keys)
}

// The lookups below read only names: they take the cached objects as they
// are (UnsafeDisableDeepCopy), since a connection's event at a start would
// otherwise deep-copy every binding of the fleet to name them.

// BindingsBy lists the bindings under an index key as requests.
func BindingsBy(ctx context.Context, c client.Reader, index, key string) ([]reconcile.Request, error) {
	list := &v1alpha1.MinionBindingList{}
	if err := c.List(ctx, list, client.MatchingFields{index: key}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing bindings by %s=%q: %w", index, key, err)
	}
	return Requests(list), nil
}

// OtherClaimants lists the bindings that claim o's minion ID, o aside:
// the claimants to wake when o's claim changes (it starts being deleted,
// is gone, starts or stops holding the ID). A binding and a template
// controller each wake them (the claim order decides who writes, and
// whose policies are rendered).
func OtherClaimants(ctx context.Context, c client.Reader, o client.Object) []reconcile.Request {
	b, ok := o.(*v1alpha1.MinionBinding)
	if !ok {
		return nil
	}
	list := &v1alpha1.MinionBindingList{}
	if err := c.List(ctx, list, client.MatchingFields{MinionIDIndex: MinionIDKey(b.Spec.MinionID)}, client.UnsafeDisableDeepCopy); err != nil {
		return Mapped(ctx, nil, fmt.Errorf("listing the claimants of minion ID %q: %w", b.Spec.MinionID, err))
	}
	var out []reconcile.Request
	for _, req := range Requests(list) {
		if req.NamespacedName != (types.NamespacedName{Namespace: b.Namespace, Name: b.Name}) {
			out = append(out, req)
		}
	}
	return out
}

// BindingsOfTemplates lists the bindings of the templates: the fan-out
// of a connection, a ConfigMap or a template to the bindings it wakes.
func BindingsOfTemplates(ctx context.Context, c client.Reader, templates []string) ([]reconcile.Request, error) {
	var out []reconcile.Request
	for _, tpl := range templates {
		reqs, err := BindingsBy(ctx, c, TemplateRefIndex, tpl)
		if err != nil {
			return nil, err
		}
		out = append(out, reqs...)
	}
	return out, nil
}

// BindingsOfNamespace lists the bindings of a namespace (its labels
// decide which templates admit them), or logs why it cannot.
func BindingsOfNamespace(ctx context.Context, c client.Reader, ns string) []reconcile.Request {
	list := &v1alpha1.MinionBindingList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return Mapped(ctx, nil, fmt.Errorf("listing the bindings of namespace %s: %w", ns, err))
	}
	return Requests(list)
}

// TemplatesBy names the templates under an index key.
func TemplatesBy(ctx context.Context, c client.Reader, index, key string) ([]string, error) {
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

// ConnectionsBy names the connections under an index key.
func ConnectionsBy(ctx context.Context, c client.Reader, index, key string) ([]string, error) {
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

// UniqueRequests drops repeated requests, keeping the first of each.
func UniqueRequests(reqs []reconcile.Request) []reconcile.Request {
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

// Mapped returns a map function's requests, or logs why it has none: a
// map function cannot return an error, and a silent nil would hide a
// missing index as "nothing depends on this".
func Mapped(ctx context.Context, reqs []reconcile.Request, err error) []reconcile.Request {
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Finding the objects to wake")
		return nil
	}
	return reqs
}

func Requests(list *v1alpha1.MinionBindingList) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, b := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
	}
	return out
}

func Named(name string) types.NamespacedName { return types.NamespacedName{Name: name} }

// SecretRefs lists the Secrets a connection reads, in the order their
// versions take in its cache key.
func SecretRefs(conn *v1alpha1.VaultConnection) []v1alpha1.SecretKeyReference {
	var refs []v1alpha1.SecretKeyReference
	if t := conn.Spec.TLS; t != nil && t.CASecretRef != nil {
		refs = append(refs, t.CASecretRef.Resolve())
	}
	switch a := conn.Spec.Auth; {
	case a.Token != nil:
		refs = append(refs, a.Token.SecretRef.Resolve())
	case a.AppRole != nil:
		refs = append(refs, a.AppRole.SecretIDSecretRef.Resolve())
	}
	return refs
}
