//go:build integration

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// createBindings creates bindings 0..n-1 in ns with `creators` parallel
// clients, as a few parallel `kubectl apply` would, and sends each index to
// created (when not nil) once its binding exists.
func createBindings(ctx context.Context, c client.Client, ns string, n, creators int, created chan<- int) error {
	return forEachIndex(ctx, n, creators, func(ctx context.Context, i int) error {
		if err := c.Create(ctx, binding(ns, i)); err != nil {
			return fmt.Errorf("creating binding %s/%s: %w", ns, minionID(i), err)
		}
		if created != nil {
			select {
			case created <- i:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

// forEachIndex calls do for 0..n-1 from `workers` goroutines; the first
// error stops it.
func forEachIndex(ctx context.Context, n, workers int, do func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	next := make(chan int)
	g.Go(func() error {
		defer close(next)
		for i := 0; i < n; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	for w := 0; w < workers; w++ {
		g.Go(func() error {
			for i := range next {
				if err := do(ctx, i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// floor is the least work any operator must do for the fleet, done
// directly: the same N bindings created in the API server, and for each
// (as it appears, by `workers` in parallel) the minimal Vault calls (write
// the AppRole role, read its role ID, write the entity, create the alias,
// plus its own policy in the perminion shape) and one status write. The
// shared policies are written once at the start. It uses its own Vault
// token, AppRole mount, entity and policy names, and Kubernetes user, so
// that the audit logs count it apart from everything else.
type floor struct {
	admin   client.Client // creates the bindings, like the operator phase's user
	status  client.Client // the floor's own Kubernetes user
	vault   *vaultapi.Client
	shape   string
	workers int
	// record: before its Vault writes, each binding gets the ownership
	// record the operator must write first (ownership), in a metadata PATCH of
	// its own.
	record bool
	// proof: before writing an object, the floor reads it, as the operator
	// must to prove that the name is free or its own (Vault has no
	// conditional write of roles, entities or policies): the converge
	// reads the role, the entity and the minion's policy, the template
	// change the entity, the policy change the policy. Not the issue's
	// floor: the part of the gap that Vault's API, not the operator, sets.
	proof bool
	// vaultKey is Vault's as the operator's record names it, read once
	// by run when it writes the record.
	vaultKey string
	// changes and policyChanges count the rollouts' floors run on these
	// bindings: the second changes Vault again (the proof floor after the
	// plain one), not to what it already holds.
	changes, policyChanges int
}

// minionName is the name of binding i's entity, and of its policy in the
// perminion shape.
func (f *floor) minionName(i int) string {
	return floorPolicyPrefix + "_minion_" + minionID(i)
}

func floorPolicy(path string) string {
	return fmt.Sprintf("# written by the scale benchmark's floor\npath %q {\n  capabilities = [\"read\"]\n}\n", path)
}

func (f *floor) run(ctx context.Context, n, creators int) error {
	auths, err := f.vault.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return fmt.Errorf("floor: reading the mount accessor: %w", err)
	}
	m, ok := auths[floorMount+"/"]
	if !ok {
		return fmt.Errorf("floor: no auth mount %s", floorMount)
	}
	accessor := m.Accessor
	if f.record {
		st, err := f.vault.Sys().SealStatusWithContext(ctx)
		if err != nil {
			return fmt.Errorf("floor: reading Vault's cluster ID: %w", err)
		}
		f.vaultKey = ownership.VaultKey(st.ClusterID, "")
	}
	roles := map[string]bool{}
	for i := 0; i < sharedRoles+1; i++ {
		for _, r := range rolesOf(i) {
			roles[r] = true
		}
	}
	for r := range roles {
		if err := f.vault.Sys().PutPolicyWithContext(ctx, floorPolicyPrefix+"_role_"+r, floorPolicy("salt/data/roles/"+r)); err != nil {
			return fmt.Errorf("floor: policy: %w", err)
		}
	}

	g, ctx := errgroup.WithContext(ctx)
	created := make(chan int, 1024)
	g.Go(func() error {
		defer close(created)
		return createBindings(ctx, f.admin, floorNamespace, n, creators, created)
	})
	for w := 0; w < f.workers; w++ {
		g.Go(func() error {
			for i := range created {
				if err := f.one(ctx, i, accessor); err != nil {
					return fmt.Errorf("floor: binding %s: %w", minionID(i), err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// one is the floor's work for binding i: 3 Vault writes and 1 read (one
// write more in the perminion shape), and one status patch.
func (f *floor) one(ctx context.Context, i int, accessor string) error {
	if f.record {
		if err := f.recordFirst(ctx, i); err != nil {
			return err
		}
	}
	m := minionID(i)
	lg := f.vault.Logical()
	if f.proof {
		paths := []string{"auth/" + floorMount + "/role/" + m, "identity/entity/name/" + f.minionName(i)}
		if f.shape == shapePerMinion {
			paths = append(paths, "sys/policies/acl/"+f.minionName(i))
		}
		if err := f.readAbsent(ctx, paths...); err != nil {
			return err
		}
	}
	policies := f.policiesOf(i)
	if f.shape == shapePerMinion {
		if err := f.vault.Sys().PutPolicyWithContext(ctx, f.minionName(i), floorPolicy("salt/data/minions/"+m)); err != nil {
			return err
		}
	}
	rolePath := "auth/" + floorMount + "/role/" + m
	// The parameters the operator writes for a template without appRole
	// settings (saltext's defaults), and the token policies.
	if _, err := lg.WriteWithContext(ctx, rolePath, map[string]any{
		"bind_secret_id": true, "secret_id_num_uses": 1, "secret_id_ttl": 60,
		"token_explicit_max_ttl": 60, "token_num_uses": 10, "token_policies": policies,
	}); err != nil {
		return err
	}
	sec, err := lg.ReadWithContext(ctx, rolePath+"/role-id")
	if err != nil {
		return err
	}
	if sec == nil {
		return fmt.Errorf("no role ID at %s", rolePath)
	}
	roleID, _ := sec.Data["role_id"].(string)
	entity := f.minionName(i)
	metadata := f.metadataOf(i, false)
	sec, err = lg.WriteWithContext(ctx, "identity/entity/name/"+entity, map[string]any{"metadata": metadata})
	if err != nil {
		return err
	}
	if sec == nil || sec.Data["id"] == nil {
		return fmt.Errorf("entity %s: no ID in the response (not new?)", entity)
	}
	entityID, _ := sec.Data["id"].(string)
	if _, err := lg.WriteWithContext(ctx, "identity/entity-alias", map[string]any{
		"name": roleID, "mount_accessor": accessor, "canonical_id": entityID,
	}); err != nil {
		return err
	}

	// The operator's status, field for field: the policy documents the
	// binding renders (its token policies but the one by name), the
	// role's parameter digest and the hash (16 hex digits each), the
	// condition's message.
	documents := policies[1:]
	now := time.Now().UTC().Format(time.RFC3339)
	return f.patchStatus(ctx, i, map[string]any{
		"observedGeneration": 1,
		"conditions":         readyConditions(f.readyMessage(i, metadata), now),
		"policies":           policies,
		"policyDocuments":    documents,
		"entity":             map[string]any{"name": entity, "id": entityID, "metadata": metadata},
		"appRole":            map[string]any{"mount": floorMount, "name": m, "roleID": roleID, "paramsDigest": fmt.Sprintf("%016x", i)},
		"connection":         connectionName,
		"lastSyncTime":       now,
		"deletionPolicy":     "Delete",
		"lastAppliedHash":    fmt.Sprintf("%016x", i+1),
	})
}

// policiesOf is binding i's token policies: its own by name, its roles',
// and in the perminion shape its own policy document.
func (f *floor) policiesOf(i int) []string {
	policies := []string{"saltstack/" + minionID(i)}
	for _, r := range rolesOf(i) {
		policies = append(policies, floorPolicyPrefix+"_role_"+r)
	}
	if f.shape == shapePerMinion {
		policies = append(policies, f.minionName(i))
	}
	return policies
}

// readyMessage is the operator's Ready message for binding i with this
// entity metadata (binding.readyMessage).
func (f *floor) readyMessage(i int, metadata map[string]string) string {
	return fmt.Sprintf("AppRole %s/%s with %d policies, entity %s with %d metadata keys",
		floorMount, minionID(i), len(f.policiesOf(i)), f.minionName(i), len(metadata))
}

// readyConditions is the status's conditions as a merge patch sends them
// (the whole list).
func readyConditions(message, now string) []map[string]any {
	return []map[string]any{{
		"type": v1alpha1.ReadyCondition, "status": "True", "reason": v1alpha1.SucceededReason,
		"message": message, "lastTransitionTime": now, "observedGeneration": 1,
	}}
}

// patchStatus merges status into binding i's, as the floor's user.
func (f *floor) patchStatus(ctx context.Context, i int, status map[string]any) error {
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	obj := &v1alpha1.MinionBinding{}
	obj.Namespace, obj.Name = floorNamespace, minionID(i)
	return f.status.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}

// metadataOf is the entity metadata the floor writes for binding i, with
// the template change's key when changed.
func (f *floor) metadataOf(i int, changed bool) map[string]string {
	roles := rolesOf(i)
	metadata := map[string]string{"minion-id": minionID(i), "roles": metadataRoles(roles)}
	for k, r := range roles {
		metadata[fmt.Sprintf("roles__%d", k)] = r
	}
	if changed {
		metadata[changedKey] = changedValueOf(f.changes)
	}
	return metadata
}

// changedValueOf is the changed key's value in rollout round: the
// operator's template change's first.
func changedValueOf(round int) string {
	if round == 0 {
		return changedValue
	}
	return fmt.Sprintf("%s.%d", changedValue, round)
}

// change is the least work of the template change phase, for the floor's
// bindings after run: the entity written with the new metadata, and one
// status patch, per binding. The operator also reads the entity, the role
// and its role ID first (the resync's budget), and records an event.
func (f *floor) change(ctx context.Context, n int) error {
	defer func() { f.changes++ }()
	return forEachIndex(ctx, n, f.workers, func(ctx context.Context, i int) error {
		metadata := f.metadataOf(i, true)
		if f.proof {
			if err := f.readPresent(ctx, "identity/entity/name/"+f.minionName(i)); err != nil {
				return err
			}
		}
		if _, err := f.vault.Logical().WriteWithContext(ctx, "identity/entity/name/"+f.minionName(i), map[string]any{"metadata": metadata}); err != nil {
			return fmt.Errorf("floor: binding %s: %w", minionID(i), err)
		}
		now := time.Now().UTC().Format(time.RFC3339)
		return f.patchStatus(ctx, i, map[string]any{
			"conditions":      readyConditions(f.readyMessage(i, metadata), now),
			"entity":          map[string]any{"metadata": metadata},
			"lastSyncTime":    now,
			"lastAppliedHash": fmt.Sprintf("%016x", n+i+f.changes),
		})
	})
}

// floorPolicyChanged is the floor's per-minion policy after the policy
// change of round: one rule more, as the operator's.
func floorPolicyChanged(m string, round int) string {
	path := changedPolicy(m)
	if round > 0 {
		path += fmt.Sprintf("/%d", round)
	}
	return floorPolicy("salt/data/minions/"+m) + fmt.Sprintf("\npath %q {\n  capabilities = [\"list\"]\n}\n", path)
}

// policyChange is the least work of the policy change phase, for the
// floor's bindings after run (perminion): each minion's policy written
// with its new body. No read: the floor knows what Vault holds. No status
// patch: a binding's status names its policies, not their bodies, so the
// operator's does not change either.
func (f *floor) policyChange(ctx context.Context, n int) error {
	round := f.policyChanges
	defer func() { f.policyChanges++ }()
	return forEachIndex(ctx, n, f.workers, func(ctx context.Context, i int) error {
		if f.proof {
			if err := f.readPresent(ctx, "sys/policies/acl/"+f.minionName(i)); err != nil {
				return err
			}
		}
		if err := f.vault.Sys().PutPolicyWithContext(ctx, f.minionName(i), floorPolicyChanged(minionID(i), round)); err != nil {
			return fmt.Errorf("floor: policy of %s: %w", minionID(i), err)
		}
		return nil
	})
}

// forced is the least work of the forced resync phase, for the floor's
// bindings after run: the annotation that asks for it (the harness's patch
// in the operator's phase), the role, its role ID and the entity read to
// compare, and the status patch that says it was handled.
func (f *floor) forced(ctx context.Context, n int) error {
	stamp := time.Now().UTC().Format(time.RFC3339Nano)
	annotate, err := requestPatch(stamp)
	if err != nil {
		return err
	}
	lg := f.vault.Logical()
	return forEachIndex(ctx, n, f.workers, func(ctx context.Context, i int) error {
		obj := &v1alpha1.MinionBinding{}
		obj.Namespace, obj.Name = floorNamespace, minionID(i)
		if err := f.admin.Patch(ctx, obj, client.RawPatch(types.MergePatchType, annotate)); err != nil {
			return fmt.Errorf("floor: annotating %s: %w", minionID(i), err)
		}
		rolePath := "auth/" + floorMount + "/role/" + minionID(i)
		for _, path := range []string{rolePath, rolePath + "/role-id", "identity/entity/name/" + f.minionName(i)} {
			sec, err := lg.ReadWithContext(ctx, path)
			if err != nil {
				return fmt.Errorf("floor: binding %s: %w", minionID(i), err)
			}
			if sec == nil {
				return fmt.Errorf("floor: binding %s: nothing at %s", minionID(i), path)
			}
		}
		return f.patchStatus(ctx, i, map[string]any{"lastHandledReconcileAt": stamp})
	})
}

// readAbsent reads each path, as the operator reads a new binding's
// objects before it creates them; each must be absent.
func (f *floor) readAbsent(ctx context.Context, paths ...string) error {
	for _, path := range paths {
		sec, err := f.vault.Logical().ReadWithContext(ctx, path)
		if err != nil {
			return fmt.Errorf("floor: reading %s: %w", path, err)
		}
		if sec != nil {
			return fmt.Errorf("floor: %s exists before the floor wrote it", path)
		}
	}
	return nil
}

// readPresent reads path, as the operator reads an object it is about to
// change to prove it is still its own; it must be there.
func (f *floor) readPresent(ctx context.Context, path string) error {
	sec, err := f.vault.Logical().ReadWithContext(ctx, path)
	if err != nil {
		return fmt.Errorf("floor: reading %s: %w", path, err)
	}
	if sec == nil {
		return fmt.Errorf("floor: nothing at %s", path)
	}
	return nil
}

// requestPatch is the merge patch that asks for a reconcile at stamp.
func requestPatch(stamp string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.ReconcileRequestAnnotation: stamp}}})
}

// recordFirst is the metadata PATCH the operator makes before it writes
// Vault: the finalizer and the ownership annotation, the operator's own
// (the floor "writes the finalizer and record"). Every later write
// of the binding costs the API server in proportion to what it holds.
func (f *floor) recordFirst(ctx context.Context, i int) error {
	record := ownership.Inventory{{Vault: f.vaultKey, Connection: connectionName, Mount: floorMount, Entity: f.minionName(i),
		DeletionPolicy: string(v1alpha1.DeletionPolicyDelete)}}.Encode()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers":  []string{v1alpha1.Finalizer},
		"annotations": map[string]string{v1alpha1.VaultObjectsAnnotation: record},
	}})
	if err != nil {
		return err
	}
	obj := &v1alpha1.MinionBinding{}
	obj.Namespace, obj.Name = floorNamespace, minionID(i)
	return f.status.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}
