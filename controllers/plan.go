package controllers

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
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
// through the template reconciler's own stages the same way
// (PolicyPlanner): observe, then planPolicies.

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

// PolicyPlanner plans templates' ACL policies against one Vault, which it
// only reads, with the template reconciler's own stages: the index's
// wanted set and conflicts (rebuilt from the admitted bindings as a full
// scan does), discovery, the reads and planPolicies. One planner serves
// every template planned against its Vault, so that each policy is read
// once between them, as after the operator's start.
type PolicyPlanner struct {
	Vault vault.Client

	owners     policyOwners
	listFailed bool // warned once, not once per template
}

// PolicyPlan is what the template reconciler would do with a template's
// ACL policies.
type PolicyPlan struct {
	// Changes are the writes and deletions: creations, then updates, then
	// deletions, each in path order, as a reader scans a plan.
	Changes []vault.Change
	// NotOwned are the policies the template wants that are someone
	// else's in Vault (and no adoptPolicies): left, and the template not
	// Ready.
	NotOwned []string
	// Warnings are what the plan could not look at, or had to guess.
	Warnings []string

	actions []policyAction
}

// Plan plans tpl's ACL policies for the bindings it admits (their render
// results, by binding). cluster is whose headers the policies carry; ""
// takes the one cluster the headers of the template's policies name. Two
// bindings rendering one name differently is the template's error, an
// *admission.Verdict with its Ready condition's reason and message:
// nothing is planned.
func (p *PolicyPlanner) Plan(ctx context.Context, tpl *v1alpha1.MinionTemplate, cluster string, bindings map[types.NamespacedName]*render.Result) (PolicyPlan, error) {
	idx := newPolicyIndex()
	scanned := make(map[types.NamespacedName]bindingPolicies, len(bindings))
	for key, res := range bindings {
		scanned[key] = bindingPolicies{template: tpl.Name, member: true, docs: docsOf(res)}
	}
	idx.rebuild(tpl.Name, nil, scanned)
	if s := idx.summary(tpl.Name); len(s.conflicts) > 0 {
		o := s.outcome()
		return PolicyPlan{}, &admission.Verdict{Kind: admission.Stalled, Reason: o.reason, Message: o.message}
	}
	var pp PolicyPlan
	w := policyWork{desired: idx.wanted(tpl.Name)}
	reader := p.owners.reader("")
	// The template's policies of every cluster: the cluster may have to be
	// learned from their headers.
	headed, err := discoverHeaders(ctx, p.Vault, func(o ownership.PolicyOwner) bool { return o.Template == tpl.Name }, reader, w.desired)
	if err != nil && !p.listFailed {
		p.listFailed = true
		pp.Warnings = append(pp.Warnings, fmt.Sprintf("cannot list ACL policies (%v): policies a template no longer renders are not shown", err))
	}
	observed, err := observePolicies(ctx, p.Vault, reader, append(w.inOrder(), headed...))
	if err != nil {
		return PolicyPlan{}, err
	}
	self := ownership.PolicyOwner{Cluster: cluster, Template: tpl.Name}
	if cluster == "" {
		var warning string
		if self.Cluster, warning = headerCluster(tpl.Name, observed); warning != "" {
			pp.Warnings = append(pp.Warnings, warning)
		}
	}
	for _, n := range headed {
		if owner, _ := ownership.ParseHeader(observed[n].hcl); self.Owns(owner) {
			w.stale = append(w.stale, n)
		}
	}
	slices.Sort(w.stale)
	pp.actions = planPolicies(w, observed, self, tpl.Spec.AdoptPolicies)
	pp.Changes = []vault.Change{}
	for _, a := range pp.actions {
		if c, ok := a.change(); ok {
			pp.Changes = append(pp.Changes, c)
		} else if a.kind == ownership.PolicyNotOwned && a.wanted {
			pp.NotOwned = append(pp.NotOwned, a.name)
		}
	}
	slices.SortStableFunc(pp.Changes, func(a, b vault.Change) int {
		return cmp.Or(changeOrder[a.Action]-changeOrder[b.Action], strings.Compare(a.Path, b.Path))
	})
	return pp, nil
}

// changeOrder is the order of a template's changes in a plan.
var changeOrder = map[string]int{string(actCreate): 0, string(actUpdate): 1, string(actDelete): 2}

// headerCluster is the one cluster the headers of a template's policies
// name (the previous release's, which name none, aside), or planCluster,
// with a warning when they name several: then none is taken as ours.
func headerCluster(template string, observed map[string]observedPolicy) (cluster, warning string) {
	seen := map[string]bool{}
	for _, o := range observed {
		if owner, ok := ownership.ParseHeader(o.hcl); o.found && ok && owner.Template == template && owner.Cluster != "" {
			seen[owner.Cluster] = true
		}
	}
	clusters := slices.Sorted(maps.Keys(seen))
	switch len(clusters) {
	case 0:
		return planCluster, ""
	case 1:
		return clusters[0], ""
	}
	return planCluster, fmt.Sprintf("the ACL policies of MinionTemplate %s name clusters %s in their ownership headers: pass --cluster-id to plan for one",
		template, strings.Join(clusters, ", "))
}

// Execute makes the plan's writes against vc, as the template reconciler
// would (tests converge a fake Vault with it).
func (pp PolicyPlan) Execute(ctx context.Context, vc vault.Client) error {
	_, err := executePolicies(ctx, vc, pp.actions)
	return err
}
