package binding

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/patch"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// The binding's inventory (ownership.Inventory) lives in its
// VaultObjectsAnnotation: where the operator wrote, recorded before it
// writes, in the request that adds the finalizer, so that a crash or a
// write that fails half-way never loses track of an object. It is a list of
// places to look, not a proof: the tenant may edit it, and the operator
// deletes or takes over only what Vault proves the binding's.

// inventory decodes the record, filling in the Vault of entries written by
// the previous release (which named only the connection) from that
// connection's status.
func (r *Reconciler) inventory(ctx context.Context, obj *v1alpha1.MinionBinding) (ownership.Inventory, error) {
	return inventoryOf(obj, func(conn string) string { return connectionVault(ctx, r.Client, conn) })
}

// inventoryOf decodes the record, filling in the Vault of entries written
// by the previous release (which named only the connection) with vaultOf
// that connection ("": unknown).
func inventoryOf(obj *v1alpha1.MinionBinding, vaultOf func(conn string) string) (ownership.Inventory, error) {
	inv, err := ownership.Decode(obj.Annotations[v1alpha1.VaultObjectsAnnotation])
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", v1alpha1.VaultObjectsAnnotation, err)
	}
	for i := range inv {
		if inv[i].Vault == "" {
			inv[i].Vault = vaultOf(inv[i].Connection)
		}
	}
	return inv, nil
}

// connectionVault is the Vault a connection was last seen reaching (its
// status), "" when unknown: to place a record that names only a connection.
func connectionVault(ctx context.Context, c client.Reader, name string) string {
	conn := &v1alpha1.VaultConnection{}
	if err := c.Get(ctx, watch.Named(name), conn); err != nil || conn.Status.ClusterID == "" {
		return ""
	}
	return ownership.VaultKey(conn.Status.ClusterID, conn.Spec.Namespace)
}

// recordBeforeWriting adds the finalizer and cur to the record, in one
// patch, when either is missing, and refuses to let the run write for a
// binding the API server says is being deleted or gone: a claimant woken
// while a namespace is torn down around it, its own deletion not in the
// cache yet, must not create a minion that nothing would ever delete. The
// patch's answer is the API server's object (a gone one answers 404);
// when no patch is needed and the run creates or takes objects
// (establishes), the binding is read past the cache. A run that only
// updates objects the binding holds needs no read: its deletion deletes
// them either way.
func (r *Reconciler) recordBeforeWriting(ctx context.Context, obj *v1alpha1.MinionBinding, inv ownership.Inventory, cur ownership.Placement, establishes bool) error {
	if controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) && inv.Has(cur) {
		if !establishes || r.APIReader == nil {
			return nil
		}
		now := &v1alpha1.MinionBinding{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), now); err != nil {
			if apierrors.IsNotFound(err) {
				return errBindingGoing
			}
			return fmt.Errorf("reading the binding before writing: %w", err)
		}
		if now.UID != obj.UID || !now.DeletionTimestamp.IsZero() {
			return errBindingGoing
		}
		return nil
	}
	err := patch.AddFinalizer(ctx, r.Client, obj, func() bool {
		setInventory(obj, inv.Merge(cur))
		return true
	})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && !obj.DeletionTimestamp.IsZero()):
		return errBindingGoing
	case err != nil && apierrors.IsInvalid(err) && !obj.DeletionTimestamp.IsZero():
		return errBindingGoing
	case err != nil:
		return fmt.Errorf("recording the Vault objects to write, with the finalizer: %w", err)
	}
	return nil
}

// errBindingGoing: the API server says the binding is being deleted or is
// gone, so nothing is written for it; its deletion (or nothing) follows.
var errBindingGoing = errors.New("the MinionBinding is being deleted or is gone: nothing is written to Vault for it")

// setInventory writes the record into obj's annotations (the caller
// patches), or removes the annotation when there is nothing left.
func setInventory(obj *v1alpha1.MinionBinding, inv ownership.Inventory) {
	raw := inv.Encode()
	if raw == "" {
		delete(obj.Annotations, v1alpha1.VaultObjectsAnnotation)
		return
	}
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[v1alpha1.VaultObjectsAnnotation] = raw
}
