package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// `minionvault plan` runs the reconcilers' own apply steps against a
// vault.DryRun, so that the plan is what the operator would do, not a
// second implementation of it.

// ApplyBinding runs the binding reconciler's apply step (role, entity,
// alias) against vc, outside a reconcile; with a vault.DryRun it is a plan.
// obj's status, if it has one (a binding read from the cluster), tells
// which metadata keys the operator wrote before.
func ApplyBinding(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, res *render.Result) error {
	r := &MinionBindingReconciler{matchByName: true, ClusterID: planCluster}
	if _, dry := vc.(*vault.DryRun); dry {
		r.newRoleID = func() string { return vault.Placeholder }
	}
	obj = obj.DeepCopy()
	if obj.UID == "" {
		obj.UID = planUID
	}
	sc := &bindingScope{}
	if vk, err := vc.ServerInfo(ctx); err == nil {
		sc.vault = vk.ClusterID
	}
	return r.apply(ctx, vc, obj, tpl, res, sc)
}

// ApplyPolicies runs the template reconciler's policy step against vc.
// desired are the policy documents its bindings render (CollectPolicies),
// managed the policies it wrote before; it returns the policies it refuses
// to overwrite (not written by this template, and no adoptPolicies).
func ApplyPolicies(ctx context.Context, vc vault.Client, tpl *v1alpha1.MinionTemplate, desired map[string]string, managed []string) ([]string, error) {
	pass, err := syncPolicies(ctx, vc, tpl.Name, tpl.Spec.AdoptPolicies, desired, managed, nil)
	slices.Sort(pass.notOwned)
	return pass.notOwned, err
}

// A plan's owner marker, for a binding the cluster has not stored yet.
const (
	planCluster = "this-cluster"
	planUID     = "known-after-apply"
)

// Refusal says why ApplyBinding wrote nothing because Vault's objects are
// not the binding's (ok false for any other error).
func Refusal(err error) (reason, msg string, ok bool) {
	var r *errRefused
	if errors.As(err, &r) {
		return r.reason, r.msg, true
	}
	return "", "", false
}

// PolicyManagedBy returns the MinionTemplate named in a policy's ownership
// header.
func PolicyManagedBy(hcl string) (string, bool) { return policyOwner(hcl) }

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

// discardEvents is the event recorder outside a reconcile.
type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}
