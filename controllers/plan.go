package controllers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// `minionvault plan` runs the binding reconciler's observe and planBinding
// against a Vault it only reads, and prints the actions: what the
// reconciler would execute, decided by the same code. ACL policies go
// through the template reconciler's own policy step against a
// vault.DryRun.

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
	planCluster = "this-cluster"
	planUID     = "known-after-apply"
)

// planTarget is the Vault a plan reads, as a placement names it.
type planTarget struct {
	r   *MinionBindingReconciler
	vc  vault.Client
	key string // ownership.VaultKey
}

func newPlanTarget(ctx context.Context, vc vault.Client, vaultNamespace string) (*planTarget, error) {
	info, err := vc.ServerInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading Vault's cluster ID: %w", err)
	}
	var random [16]byte
	_, _ = rand.Read(random[:]) // never fails (crypto/rand)
	r := &MinionBindingReconciler{matchByName: true, ClusterID: planCluster, random: func() [16]byte { return random }}
	return &planTarget{r: r, vc: vc, key: ownership.VaultKey(info.ClusterID, vaultNamespace)}, nil
}

// PlanBinding plans one binding, as read from manifests or from the
// cluster (its record, status and deletion timestamp are used when it has
// them): its role, entity and alias brought to what it renders (a.Result),
// and the removals at the placements its record holds and it no longer
// needs; for a binding being deleted, the removals of finalize. a is what
// the admission gate said (for a deletion only a.Template, nil when the
// template is gone). A refusal is an error (Refusal tells it).
func PlanBinding(ctx context.Context, vc vault.Client, vaultNamespace string, obj *v1alpha1.MinionBinding, a *admission.Admitted) (BindingPlan, error) {
	tpl, res := a.Template, a.Result
	t, err := newPlanTarget(ctx, vc, vaultNamespace)
	if err != nil {
		return BindingPlan{}, err
	}
	obj = obj.DeepCopy()
	if obj.UID == "" {
		obj.UID = planUID
	}
	inv, err := ownership.Decode(obj.Annotations[v1alpha1.VaultObjectsAnnotation])
	if err != nil {
		return BindingPlan{}, &errInvalidInput{err: fmt.Errorf("annotation %s: %w", v1alpha1.VaultObjectsAnnotation, err)}
	}
	conn := ""
	if tpl != nil {
		conn = tpl.Spec.ConnectionRef.Name
	}
	for i := range inv {
		if inv[i].Vault == "" && inv[i].Connection == conn {
			inv[i].Vault = t.key
		}
	}
	if !obj.DeletionTimestamp.IsZero() {
		return t.deletion(ctx, obj, tpl, inv)
	}
	cur := ownership.Placement{Vault: t.key, Connection: conn, Mount: res.AppRole.Mount, Entity: res.EntityName,
		DeletionPolicy: string(tpl.Spec.EffectiveDeletionPolicy())}
	o, err := t.r.observe(ctx, vc, obj, res, t.r.rivals(a))
	if err != nil {
		return BindingPlan{}, err
	}
	mode := t.r.planMode(obj, tpl, res, o.proof.self, desiredHash(t.key, res))
	bp := BindingPlan{newRoleID: mode.newRoleID}
	policy := recordedPolicy(tpl)
	stale := t.reachable(inv.Stale(&cur), &bp)
	for _, p := range stale {
		po, err := observePlace(ctx, vc, p, &cur, o.entity, strings.ToLower(obj.Spec.MinionID), o.proof, policy(p) == v1alpha1.DeletionPolicyRetain)
		if err != nil {
			return BindingPlan{}, err
		}
		o.places = append(o.places, po)
	}
	plan, err := planBinding(res, o, mode)
	if err != nil {
		return BindingPlan{}, err
	}
	bp.setActions(plan)
	return bp, nil
}

// deletion plans finalize's removals: every recorded placement and the one
// status names, under the template's deletion policy (the recorded one
// when the template is gone).
func (t *planTarget) deletion(ctx context.Context, obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, inv ownership.Inventory) (BindingPlan, error) {
	bp := BindingPlan{}
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
		return bp, nil
	}
	if st := &obj.Status; st.AppRole != nil && st.Entity != nil && st.Connection != "" && st.AppRole.Mount != "" && st.Entity.Name != "" {
		p := ownership.Placement{Connection: st.Connection, Mount: st.AppRole.Mount, Entity: st.Entity.Name, Vault: t.key}
		if !slices.ContainsFunc(inv, p.Same) {
			inv = append(inv, p)
		}
	}
	policy := func(p ownership.Placement) v1alpha1.DeletionPolicy {
		switch {
		case tpl != nil:
			return tpl.Spec.EffectiveDeletionPolicy()
		case p.DeletionPolicy != "":
			return v1alpha1.DeletionPolicy(p.DeletionPolicy)
		}
		return v1alpha1.DeletionPolicyDelete
	}
	pr := t.r.proofOf(obj)
	var observed []placeObserved
	for _, p := range t.reachable(inv, &bp) {
		po, err := observePlace(ctx, t.vc, p, nil, nil, strings.ToLower(obj.Spec.MinionID), pr, policy(p) == v1alpha1.DeletionPolicyRetain)
		if err != nil {
			return BindingPlan{}, err
		}
		observed = append(observed, po)
	}
	bp.setActions(planRemovals(observed, pr))
	return bp, nil
}

// reachable keeps the placements in the planned Vault (others are noted
// as skipped).
func (t *planTarget) reachable(stale []ownership.Placement, bp *BindingPlan) []ownership.Placement {
	var out []ownership.Placement
	for _, p := range stale {
		switch {
		case p.Vault != t.key:
			bp.Skipped = append(bp.Skipped, p.String()+", in another Vault than the one planned against")
		default:
			out = append(out, p)
		}
	}
	return out
}

func (bp *BindingPlan) setActions(plan bindingPlan) {
	bp.actions = plan.actions
	bp.NotOwned = plan.notOwned
	bp.Changes = []vault.Change{}
	for _, a := range plan.actions {
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

// Execute makes the plan's writes against vc, as the reconciler would
// (tests converge a fake Vault with it).
func (bp BindingPlan) Execute(ctx context.Context, vc vault.Client) error {
	_, err := execute(ctx, vc, bp.actions)
	return err
}

// Refusal says why the operator would write nothing for a binding: Vault's
// objects are not the binding's, or the error would stall it (the one
// error → outcome table, outcomeFor). ok is false for any other error.
func Refusal(err error) (reason, msg string, ok bool) {
	var r *errRefused
	if errors.As(err, &r) {
		return r.reason, r.msg, true
	}
	if o := outcomeFor(err); o.kind == outcomeStalled {
		return o.reason, o.message, true
	}
	return "", "", false
}

// ApplyPolicies runs the template reconciler's policy step against vc,
// for the template's policies of cluster (the header's owner). desired
// are the policy documents its bindings render (CollectPolicies), managed
// the policies it wrote before; it returns the policies it refuses to
// overwrite (not written by this template, and no adoptPolicies).
func ApplyPolicies(ctx context.Context, vc vault.Client, tpl *v1alpha1.MinionTemplate, cluster string, desired map[string]string, managed []string) ([]string, error) {
	pass, err := syncPolicies(ctx, vc, ownership.PolicyOwner{Cluster: cluster, Template: tpl.Name}, tpl.Spec.AdoptPolicies, desired, managed, nil)
	return pass.notOwned, err
}

// RenderedBinding is one binding's render result, named for messages.
type RenderedBinding struct {
	Name   string // namespace/name
	Result *render.Result
}

// CollectPolicies gathers the policy documents of a template's bindings:
// each name once. Two bindings rendering different bodies for one name is
// a template error, returned as a message.
func CollectPolicies(bindings []RenderedBinding) (map[string]string, string) {
	desired := map[string]string{}
	from := map[string]string{}
	for _, b := range bindings {
		for _, d := range b.Result.PolicyDocuments {
			if prev, ok := desired[d.Name]; ok && prev != d.HCL {
				return nil, fmt.Sprintf("policy %q renders differently for MinionBindings %s and %s", d.Name, from[d.Name], b.Name)
			}
			desired[d.Name] = d.HCL
			from[d.Name] = b.Name
		}
	}
	return desired, ""
}
