package binding

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// `minionvault plan` runs the binding reconciler's observe and planBinding
// against a Vault it only reads, and prints the actions: what the
// reconciler would execute, decided by the same code. ACL policies go
// through the template reconciler's own stages the same way
// (policy.Planner): observe, then planPolicies.

// BindingPlan is what the binding reconciler would do in Vault for one
// binding.
type BindingPlan struct {
	// Changes are the planner's actions that write, in order.
	Changes []vault.Change
	// Skipped are stale placements the plan could not look at (another
	// Vault than the one planned against).
	Skipped []string
	// NotOwned are objects at stale placements that would be left because
	// Vault does not prove them the binding's.
	NotOwned []string

	actions   []vaultAction
	newRoleID string
}

// A plan's owner marker, for a binding the cluster has not stored yet.
const (
	planUID = "known-after-apply"
)

// PlanBinding plans one binding, as read from manifests or from the
// cluster (its record, status and deletion timestamp are used when it has
// them), with the binding pipeline the reconciler runs: its role, entity
// and alias brought to what it renders (a.Result), and the removals at
// the placements its record holds and it no longer needs; for a binding
// being deleted, the removals of finalize. It reads only vc, the Vault
// planned against (other placements are skipped), knows no holder in the
// cluster, and takes a marker naming the binding's namespace and name as
// its own. a is what the admission gate said (for a deletion only
// a.Template, nil when the template is gone). A refusal is an error
// (Refusal tells it).
func PlanBinding(ctx context.Context, vc vault.Client, vaultNamespace string, obj *v1alpha1.MinionBinding, a *admission.Admitted) (BindingPlan, error) {
	info, err := vc.ServerInfo(ctx)
	if err != nil {
		return BindingPlan{}, fmt.Errorf("reading Vault's cluster ID: %w", err)
	}
	key := ownership.VaultKey(info.ClusterID, vaultNamespace)
	obj = obj.DeepCopy()
	if obj.UID == "" {
		obj.UID = planUID
	}
	tpl := a.Template
	conn := ""
	if tpl != nil {
		conn = tpl.Spec.ConnectionRef.Name
	}
	// Entries of the previous release name only the connection: the
	// template's is the Vault planned against.
	inv, err := inventoryOf(obj, func(c string) string {
		if c == conn {
			return key
		}
		return ""
	})
	if err != nil {
		return BindingPlan{}, &outcome.ErrInvalidInput{Err: err}
	}
	var w bindingWork
	switch {
	case obj.DeletionTimestamp.IsZero():
		w = applyWork(obj, a, vc, inv, currentPlacement(a, key), ownership.PlanCluster, desiredHash(key, a.Result))
	case controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer):
		w = deletionWork(obj, tpl, inv, func(string) string { return key })
	default:
		return BindingPlan{}, nil
	}
	pl := planPipeline(obj, vc, key)
	sc := &bindingScope{}
	o, places, err := pl.observe(ctx, w, sc)
	if err != nil {
		return BindingPlan{}, err
	}
	for _, sp := range places {
		if sp.err != nil {
			return BindingPlan{}, sp.err
		}
	}
	plan, err := pl.plan(o, w)
	if err != nil {
		return BindingPlan{}, err
	}
	bp := BindingPlan{newRoleID: plan.newRoleID, Skipped: sc.skipped}
	plan.noteIn(sc)
	bp.setActions(plan.actions, sc.notOwned)
	return bp, nil
}

// planPipeline is the binding pipeline of a plan: it reaches only vc, the
// Vault of key, and knows no holder; a new role's role ID is random.
func planPipeline(obj *v1alpha1.MinionBinding, vc vault.Client, key string) *bindingPipeline {
	var random [16]byte
	_, _ = rand.Read(random[:]) // never fails (crypto/rand)
	pr := statusProof(ownerOf(ownership.PlanCluster, obj), obj)
	pr.byName = true
	return &bindingPipeline{
		proof: pr,
		reach: func(_ context.Context, p ownership.Placement) (vault.Client, error) {
			if p.Vault != key {
				return nil, errSkipped{msg: p.String() + ", in another Vault than the one planned against"}
			}
			return vc, nil
		},
		holders: func(context.Context, ownership.Claim, ownership.Owner) (ownership.HolderState, error) {
			return ownership.HolderUnknown, nil
		},
		newRoleID: func(self ownership.Owner, place ownership.RolePlace) string {
			return ownership.NewRoleID(self, place, random)
		},
	}
}

func (bp *BindingPlan) setActions(actions []vaultAction, notOwned []string) {
	bp.actions = actions
	bp.NotOwned = notOwned
	bp.Changes = []vault.Change{}
	for _, a := range actions {
		if a.writes() {
			bp.Changes = append(bp.Changes, bp.change(a))
		}
	}
}

// change shows an action as the Vault write it makes.
func (bp *BindingPlan) change(a vaultAction) vault.Change {
	known := func(id string) string {
		if id == "" || id == bp.newRoleID {
			return vault.Placeholder
		}
		return id
	}
	c := vault.Change{Action: string(a.kind), Kind: string(a.object), Path: a.path(), Before: a.before}
	switch a.call {
	case callWriteEntity:
		c.After = a.metadata
		if a.kind == actTake || a.kind == actRetain {
			c.Action = string(actUpdate)
		}
	case callWriteRole:
		params := make(map[string]any, len(a.params))
		for k, v := range a.params {
			params[k] = v
		}
		if _, ok := params["role_id"]; ok {
			params["role_id"] = vault.Placeholder
		}
		c.After = params
	case callCreateAlias:
		c.Action = string(actCreate)
		c.After = map[string]any{"name": known(a.aliasName), "mount_accessor": a.accessor, "canonical_id": known(a.entityID)}
	case callUpdateAlias:
		c.Action = string(actUpdate)
		c.Before, c.After = map[string]any{"name": a.before}, map[string]any{"name": known(a.aliasName)}
	case callDeleteAlias:
		c.Before = map[string]any{"name": a.before}
	}
	return c
}

// Refusal says why the operator would write nothing for a binding: Vault's
// objects are not the binding's, or the error would stall it (the one
// error → outcome table, outcome.For). ok is false for any other error.
func Refusal(err error) (reason, msg string, ok bool) {
	var r *outcome.ErrRefused
	if errors.As(err, &r) {
		return r.Reason, r.Msg, true
	}
	if o := outcome.For(err); o.Kind == outcome.OutcomeStalled {
		return o.Reason, o.Message, true
	}
	return "", "", false
}
