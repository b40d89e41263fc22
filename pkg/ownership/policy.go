package ownership

import (
	"strconv"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// PolicyOwner is who an ACL policy the operator writes belongs to: a
// MinionTemplate of one cluster. Its header (the policy's first line)
// says so, written in the same request as the policy, so no crash can
// separate the two. Two clusters on one Vault with templates of the same
// name are two owners: neither writes over or deletes the other's policy.
type PolicyOwner struct {
	// Cluster is "" in a header of the operator's previous release, which
	// named only the template.
	Cluster  string
	Template string
}

const (
	headerPrefix = "# Managed by minion-vault-operator for MinionTemplate "
	headerSuffix = ". Do not edit: changes are overwritten.\n"
	inCluster    = " in cluster "
)

// Header is the first line of every policy the operator writes for o.
func (o PolicyOwner) Header() string {
	h := headerPrefix + strconv.Quote(o.Template)
	if o.Cluster != "" {
		h += inCluster + strconv.Quote(o.Cluster)
	}
	return h + headerSuffix
}

// Owns reports whether a policy whose header names found is o's: the same
// template in the same cluster, or a header of the previous release,
// which named the template only (o rewrites it with its own header).
func (o PolicyOwner) Owns(found PolicyOwner) bool {
	return found.Template == o.Template && (found.Cluster == o.Cluster || found.Cluster == "")
}

func (o PolicyOwner) String() string {
	if o.Cluster == "" {
		return "MinionTemplate " + strconv.Quote(o.Template)
	}
	return "MinionTemplate " + strconv.Quote(o.Template) + " of cluster " + o.Cluster
}

// ParseHeader reads the owner from a policy's header; ok is false when the
// policy has none (someone else wrote it, or the header was edited).
func ParseHeader(hcl string) (o PolicyOwner, ok bool) {
	line, _, _ := strings.Cut(hcl, "\n")
	rest, found := strings.CutPrefix(line+"\n", headerPrefix)
	if !found {
		return PolicyOwner{}, false
	}
	rest, found = strings.CutSuffix(rest, headerSuffix)
	if !found {
		return PolicyOwner{}, false
	}
	tpl, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return PolicyOwner{}, false
	}
	if o.Template, err = strconv.Unquote(tpl); err != nil || o.Template == "" {
		return PolicyOwner{}, false
	}
	switch rest = rest[len(tpl):]; {
	case rest == "":
		return o, true
	case !strings.HasPrefix(rest, inCluster):
		return PolicyOwner{}, false
	}
	cluster, err := strconv.Unquote(rest[len(inCluster):])
	if err != nil || ValidCluster(cluster) != nil {
		return PolicyOwner{}, false
	}
	o.Cluster = cluster
	return o, true
}

// PolicyDecision is what the operator may do with one ACL policy name of a
// template.
type PolicyDecision int

const (
	// PolicyAbsent: not in Vault, and no binding renders it; nothing to do.
	PolicyAbsent PolicyDecision = iota
	// PolicyKeep: the template's, as wanted.
	PolicyKeep
	// PolicyWrite: wanted and absent, the template's with another body,
	// or someone else's and the template adopts it.
	PolicyWrite
	// PolicyDelete: the template's, and no binding renders it any more.
	PolicyDelete
	// PolicyNotOwned: someone else's (no header, another template's or
	// another cluster's); left alone.
	PolicyNotOwned
	// PolicyBuiltin: one of the server's built-in policies (root,
	// default, Vault 2's default-ceiling, ...: acl.Builtin), which the
	// server makes and will not delete. Never written, adopted or
	// deleted, whatever its header says, and not someone else's either:
	// nothing to report. Admission refuses a template that renders one.
	PolicyBuiltin
)

func (d PolicyDecision) String() string {
	return [...]string{"absent", "keep", "write", "delete", "not-owned", "builtin"}[d]
}

// PolicyFacts is what the template controller read of one ACL policy name
// in Vault and what the template's bindings render for it.
type PolicyFacts struct {
	// Name is the policy's name (built-in policies are never touched).
	Name string
	// Found: the policy exists in Vault, with the text Actual.
	Found  bool
	Actual string
	// Wanted: a binding renders the name, with the body Want (without the
	// header).
	Wanted bool
	Want   string
	// Adopt: the template's adoptPolicies.
	Adopt bool
}

// PolicyVerdict is a decision and, for PolicyWrite, the text to write.
type PolicyVerdict struct {
	Decision PolicyDecision
	// Body is the header of the owner followed by the rendered body, for
	// PolicyWrite.
	Body string
}

// DecidePolicy says what self may do with one ACL policy name. The header
// is the record of what a template owns: a policy without self's (or with
// the previous release's header for self's template, which self rewrites)
// is never written unless the template adopts it, and never deleted. A
// built-in policy is never written nor deleted, adopted or not.
func DecidePolicy(self PolicyOwner, f PolicyFacts) PolicyVerdict {
	if acl.IsBuiltin(f.Name) {
		return PolicyVerdict{Decision: PolicyBuiltin}
	}
	owner, headed := ParseHeader(f.Actual)
	ours := f.Found && headed && self.Owns(owner)
	switch {
	case !f.Wanted && ours:
		return PolicyVerdict{Decision: PolicyDelete}
	case !f.Wanted && f.Found:
		return PolicyVerdict{Decision: PolicyNotOwned}
	case !f.Wanted:
		return PolicyVerdict{Decision: PolicyAbsent}
	case f.Found && !ours && !f.Adopt:
		return PolicyVerdict{Decision: PolicyNotOwned}
	}
	body := self.Header() + f.Want
	if f.Found && !policyDiffers(body, f.Actual) {
		return PolicyVerdict{Decision: PolicyKeep}
	}
	return PolicyVerdict{Decision: PolicyWrite, Body: body}
}

// policyDiffers compares the text to write with Vault's. Vault may store
// a policy with its surrounding whitespace changed, which must not make
// every scan write it again.
func policyDiffers(desired, actual string) bool {
	return strings.TrimSpace(desired) != strings.TrimSpace(actual)
}
