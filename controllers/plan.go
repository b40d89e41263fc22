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
	inv, err := ownership.Decode(obj.Annotations[v1alpha1.VaultObjectsAnnotation])
	if err != nil {
		return BindingPlan{}, &ErrInvalidInput{err: fmt.Errorf("annotation %s: %w", v1alpha1.VaultObjectsAnnotation, err)}
	}
	tpl := a.Template
	conn := ""
	if tpl != nil {
		conn = tpl.Spec.ConnectionRef.Name
	}
	for i := range inv {
		if inv[i].Vault == "" && inv[i].Connection == conn {
			inv[i].Vault = key
		}
	}
	pl := planPipeline(obj, vc, key)
	w := bindingWork{obj: obj, inv: inv}
	if obj.DeletionTimestamp.IsZero() {
		res := a.Result
		cur := ownership.Placement{Vault: key, Connection: conn, Mount: res.AppRole.Mount, Entity: res.EntityName,
			DeletionPolicy: string(tpl.Spec.EffectiveDeletionPolicy())}
		w.res, w.vc, w.cur, w.rivals = res, vc, &cur, rivals(planCluster, a)
		w.stale, w.policy, w.mode = inv.Stale(&cur), recordedPolicy(tpl), planModeOf(obj, tpl, desiredHash(key, res))
	} else if controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
		w.stale = placesToLook(obj, inv, func(string) string { return key })
		w.policy = deletionPolicyFor(tpl)
	} else {
		return BindingPlan{}, nil
	}
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
	pr := statusProof(ownerOf(planCluster, obj), obj)
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
	var r *ErrRefused
	if errors.As(err, &r) {
		return r.Reason, r.Msg, true
	}
	if o := OutcomeFor(err); o.Kind == OutcomeStalled {
		return o.Reason, o.Message, true
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
		return PolicyPlan{}, &admission.Verdict{Kind: admission.Stalled, Reason: o.Reason, Message: o.Message}
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
