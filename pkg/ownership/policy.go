package ownership

import (
	"strconv"
	"strings"
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
