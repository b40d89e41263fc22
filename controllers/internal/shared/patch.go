package shared

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// PatchStatus sends, in one merge patch of the status subresource, what
// changed in obj's status since before, and nothing when nothing did (a
// fleet in sync costs no Kubernetes writes). The patch is diffed from the
// two statuses alone, so only status fields are in it, whatever happened
// to the metadata meanwhile.
func PatchStatus[T client.Object, S any](ctx context.Context, c client.Client, obj T, before *S, status func(T) *S) error {
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

// PatchMetadata applies change to obj's metadata and, when it changed
// anything, sends it as one merge patch (finalizers, annotations).
func PatchMetadata(ctx context.Context, c client.Client, obj client.Object, change func() bool) error {
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
	return PatchMetadata(ctx, c, obj, func() bool {
		added := controllerutil.AddFinalizer(obj, v1alpha1.Finalizer)
		return extra() || added
	})
}

// RemoveFinalizer removes the operator's finalizer; an object already gone
// is fine.
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	return client.IgnoreNotFound(PatchMetadata(ctx, c, obj, func() bool {
		return controllerutil.RemoveFinalizer(obj, v1alpha1.Finalizer)
	}))
}

// ResultFor is what controller-runtime is told after a reconcile that
// ended in o with err: Stalled is terminal (logged, never retried until
// something changes); Waiting looks again after waitAfter, or after next
// when that is sooner (a template rechecking policies someone else holds);
// Failed returns the error for backoff; otherwise the next resync is after
// next.
func ResultFor(o Outcome, err error, next time.Duration) (ctrl.Result, error) {
	switch o.Kind {
	case OutcomeStalled:
		if err == nil {
			err = errors.New(o.Message)
		}
		return ctrl.Result{}, reconcile.TerminalError(err)
	case OutcomeWaiting:
		if next > 0 && next < WaitAfter {
			return ctrl.Result{RequeueAfter: next}, nil
		}
		return ctrl.Result{RequeueAfter: WaitAfter}, nil
	case OutcomeFailed:
		if err == nil {
			err = errors.New(o.Message)
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: next}, err
}
