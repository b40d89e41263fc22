package patch

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operator's patches are small: a status, a finalizer, an annotation.
// client.MergeFrom would marshal the whole object twice (spec, grains and
// pillar included), diff the two documents, and decode the object the API
// server sends back; at fleet size that was a third of what the operator
// allocated in a converge. So the patch is diffed from the one part that
// changed, and it is sent for the object's metadata only: the API server
// answers with the metadata (the new resourceVersion), not the object.

// jsonFieldPatch is fieldMergePatch of before and after in JSON.
func jsonFieldPatch(field string, before, after any) ([]byte, error) {
	b, err := json.Marshal(before)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", field, err)
	}
	a, err := json.Marshal(after)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", field, err)
	}
	return fieldMergePatch(field, b, a)
}

// fieldMergePatch is the JSON merge patch (RFC 7386) that takes the object's
// field from before to after, where before and after are the field's value
// as JSON: {"field": {...only what differs...}}. Both must be valid JSON
// (the diff panics on anything else): jsonFieldPatch's, from json.Marshal.
func fieldMergePatch(field string, before, after []byte) ([]byte, error) {
	diff, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return nil, fmt.Errorf("diffing %s: %w", field, err)
	}
	return json.Marshal(map[string]json.RawMessage{field: diff})
}

// metadataTarget is obj's name and kind, for a patch answered with the
// metadata alone.
func metadataTarget(c client.Client, obj client.Object) (*metav1.PartialObjectMetadata, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil, err
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(gvk)
	target.Namespace, target.Name = obj.GetNamespace(), obj.GetName()
	return target, nil
}

// sendMergePatch sends patch, a merge patch, to obj (or its status
// subresource), and takes the metadata the API server answers with into
// obj: its resourceVersion, and anything someone else changed in its
// metadata meanwhile, but not the generation (below).
func sendMergePatch(ctx context.Context, c client.Client, obj client.Object, status bool, patch []byte) error {
	target, err := metadataTarget(c, obj)
	if err != nil {
		return err
	}
	raw := client.RawPatch(types.MergePatchType, patch)
	if status {
		err = c.Status().Patch(ctx, target, raw)
	} else {
		err = c.Patch(ctx, target, raw)
	}
	if err != nil {
		return err
	}
	if meta, ok := objectMeta(obj); ok {
		// The generation stays the one of the spec obj holds: a spec
		// changed meanwhile is not in obj, and a status must not claim
		// to have observed it.
		generation := meta.Generation
		*meta = target.ObjectMeta
		meta.Generation = generation
		// The cache keeps objects without them (cache transform); so
		// does the object patched.
		meta.ManagedFields = nil
	}
	return nil
}

// objectMeta is obj's ObjectMeta, for the operator's own kinds (and any
// typed object that embeds it).
func objectMeta(obj client.Object) (*metav1.ObjectMeta, bool) {
	acc, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, false
	}
	meta, ok := acc.GetObjectMeta().(*metav1.ObjectMeta)
	return meta, ok
}
