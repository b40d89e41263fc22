package policy

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// Planner plans templates' ACL policies against one Vault, which it
// only reads, with the template reconciler's own stages: the index's
// wanted set and conflicts (rebuilt from the admitted bindings as a full
// scan does), discovery, the reads and planPolicies. One planner serves
// every template planned against its Vault, so that each policy is read
// once between them, as after the operator's start.
type Planner struct {
	Vault vault.Client

	owners     policyOwners
	listFailed bool // warned once, not once per template
}

// Plan is what the template reconciler would do with a template's
// ACL policies.
type Plan struct {
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
func (p *Planner) Plan(ctx context.Context, tpl *v1alpha1.MinionTemplate, cluster string, bindings map[types.NamespacedName]*render.Result) (Plan, error) {
	idx := newPolicyIndex()
	scanned := make(map[types.NamespacedName]bindingPolicies, len(bindings))
	for key, res := range bindings {
		scanned[key] = bindingPolicies{template: tpl.Name, member: true, docs: docsOf(res)}
	}
	idx.rebuild(tpl.Name, nil, scanned, true)
	if s := idx.summary(tpl.Name); len(s.conflicts) > 0 {
		o := s.outcome()
		return Plan{}, &admission.Verdict{Kind: admission.Stalled, Reason: o.Reason, Message: o.Message}
	}
	var pp Plan
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
		return Plan{}, err
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

// headerCluster is the one cluster the headers of a template's policies
// name (the previous release's, which name none, aside), or ownership.PlanCluster,
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
		return ownership.PlanCluster, ""
	case 1:
		return clusters[0], ""
	}
	return ownership.PlanCluster, fmt.Sprintf("the ACL policies of MinionTemplate %s name clusters %s in their ownership headers: pass --cluster-id to plan for one",
		template, strings.Join(clusters, ", "))
}

// changeOrder is the order of a template's changes in a plan.
var changeOrder = map[string]int{vault.ChangeCreate: 0, vault.ChangeUpdate: 1, vault.ChangeDelete: 2}
