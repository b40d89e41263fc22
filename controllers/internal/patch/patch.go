package patch

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// Status sends, in one merge patch of the status subresource, what
// changed in obj's status since before, and nothing when nothing did (a
// fleet in sync costs no Kubernetes writes). The patch is diffed from the
// two statuses alone, so only status fields are in it, whatever happened
// to the metadata meanwhile.
func Status[T client.Object, S any](ctx context.Context, c client.Client, obj T, before *S, status func(T) *S) error {
	after := status(obj)
	if equality.Semantic.DeepEqual(*before, *after) {
		return nil
	}
	patch, err := jsonFieldPatch("status", before, after)
	if err != nil {
		return err
	}
	if err := sendMergePatch(ctx, c, obj, true, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching status: %w", err)
	}
	return nil
}

// Metadata applies change to obj's metadata and, when it changed
// anything, sends it as one merge patch (finalizers, annotations).
func Metadata(ctx context.Context, c client.Client, obj client.Object, change func() bool) error {
	meta, ok := objectMeta(obj)
	if !ok {
		return fmt.Errorf("patching the metadata of %T: no ObjectMeta", obj)
	}
	before := meta.DeepCopy()
	if !change() {
		return nil
	}
	patch, err := jsonFieldPatch("metadata", before, meta)
	if err != nil {
		return err
	}
	return sendMergePatch(ctx, c, obj, false, patch)
}

// AddFinalizer adds the operator's finalizer, and whatever else extra
// changes, in one patch.
func AddFinalizer(ctx context.Context, c client.Client, obj client.Object, extra func() bool) error {
	return Metadata(ctx, c, obj, func() bool {
		added := controllerutil.AddFinalizer(obj, v1alpha1.Finalizer)
		return extra() || added
	})
}

// RemoveFinalizer removes the operator's finalizer; an object already gone
// is fine.
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	return client.IgnoreNotFound(Metadata(ctx, c, obj, func() bool {
		return controllerutil.RemoveFinalizer(obj, v1alpha1.Finalizer)
	}))
}
