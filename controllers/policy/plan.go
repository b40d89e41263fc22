package policy

import (
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// objPolicy is the kind of Vault object a policy action changes, as a
// plan shows it.
const objPolicy = "acl-policy"

// policyAction is one ACL policy name's step, as planPolicies decided it
// from what was read: Keep, NotOwned and Absent make no request.
type policyAction struct {
	kind ownership.PolicyDecision
	name string
	// body is the text a write sends: the header, then the rendered body.
	body string
	// before is Vault's text when found: a plan shows what changes.
	before string
	found  bool
	// wanted: a binding renders the name, so someone else's policy there
	// is reported (PolicyNotOwned), not merely left as absent.
	wanted bool
}

// sendsRequest: the action writes or deletes in Vault.
func (a policyAction) sendsRequest() bool {
	return a.kind == ownership.PolicyWrite || a.kind == ownership.PolicyDelete
}

// planPolicies decides one action per name of w that was observed, in
// w.inOrder(). It has no side effects: the sync executes the actions, a
// plan prints them. A name that was not observed (its read failed) gets no
// action and stays for the next sync.
func planPolicies(w policyWork, observed map[string]observedPolicy, self ownership.PolicyOwner, adopt bool) []policyAction {
	return planNames(w, w.inOrder(), observed, self, adopt)
}

// planNames is planPolicies over some of w's names, in order (a sync's
// chunk).
func planNames(w policyWork, order []string, observed map[string]observedPolicy, self ownership.PolicyOwner, adopt bool) []policyAction {
	actions := make([]policyAction, 0, len(observed))
	for _, name := range order {
		o, ok := observed[name]
		if !ok {
			continue
		}
		want, wanted := w.desired[name]
		v := ownership.DecidePolicy(self, ownership.PolicyFacts{Name: name, Found: o.found, Actual: o.hcl, Wanted: wanted, Want: want, Adopt: adopt})
		actions = append(actions, policyAction{kind: v.Decision, name: name, body: v.Body, before: o.hcl, found: o.found, wanted: wanted})
	}
	return actions
}

// change shows an action as the Vault request it makes (ok false for an
// action that makes none).
func (a policyAction) change() (c vault.Change, ok bool) {
	c = vault.Change{Kind: objPolicy, Path: "sys/policies/acl/" + a.name}
	switch {
	case a.kind == ownership.PolicyWrite && a.found:
		c.Action, c.Before, c.After = vault.ChangeUpdate, a.before, a.body
	case a.kind == ownership.PolicyWrite:
		c.Action, c.After = vault.ChangeCreate, a.body
	case a.kind == ownership.PolicyDelete:
		c.Action, c.Before = vault.ChangeDelete, a.before
	default:
		return vault.Change{}, false
	}
	return c, true
}
