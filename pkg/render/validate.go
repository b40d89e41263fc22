package render

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/template"
)

// Reason classifies a violation; the controller uses it as condition reason.
type Reason string

// Violation reasons.
const (
	ReasonInvalidTemplate   Reason = "InvalidTemplate"
	ReasonInvalidPolicyName Reason = "InvalidPolicyName"
	ReasonPolicyNotAllowed  Reason = "PolicyNotAllowed"
	ReasonACLPathWidened    Reason = "ACLPathWidened"
	ReasonUntrustedGrain    Reason = "UntrustedGrain"
	ReasonMetadataLimit     Reason = "MetadataLimit"
	ReasonConflictingPolicy Reason = "ConflictingPolicyBody"
	ReasonInvalidEntityName Reason = "InvalidEntityName"
	// ReasonInvalidPolicyDocument: the rendered policy text is one Vault
	// refuses to store (acl.Parse says why).
	ReasonInvalidPolicyDocument Reason = "InvalidPolicyDocument"
)

// Violation is one guard-rail problem: rendering worked, but writing the
// result to Vault would be wrong or unsafe.
type Violation struct {
	Reason  Reason
	Field   string // where in the template, e.g. policies[2]
	Message string
}

func (v Violation) String() string {
	if v.Field == "" {
		return fmt.Sprintf("%s: %s", v.Reason, v.Message)
	}
	return fmt.Sprintf("%s: %s: %s", v.Reason, v.Field, v.Message)
}

// Vault's limits on entity and secret-ID metadata. Vault answers a write
// beyond them with HTTP 500, which would look like a transient error
// forever, so they are checked before writing.
const (
	MaxMetadataPairs    = 64
	MaxMetadataKeyLen   = 128
	MaxMetadataValueLen = 512
	maxPolicyNameLen    = 256
)

// Validate returns the guard-rail violations of a rendered binding, the
// template's own problems first. Nil means it is safe to write.
func (c *Compiled) Validate(r *Result) []Violation {
	vs := append([]Violation(nil), c.problems...)
	t := &c.t

	// {grains[id]} is trusted because Salt sets it to the minion ID; a
	// binding whose grains say otherwise could claim another minion's
	// policies through it.
	if r.grainsID != nil && *r.grainsID != r.Minion {
		vs = append(vs, Violation{ReasonUntrustedGrain, "grains.id", fmt.Sprintf("grains id %q is not the minion ID %q", *r.grainsID, r.Minion)})
	}
	if !t.TrustMinionGrains {
		// Everything that decides access: policy names, the entity and
		// its metadata (which templated ACL policies read), policy texts.
		for i, p := range c.places.Policies {
			vs = append(vs, untrustedGrains(fmt.Sprintf("policies.assign[%d]", i), p)...)
		}
		vs = append(vs, untrustedGrains("entityName", c.entityName)...)
		for _, e := range c.places.Entity {
			vs = append(vs, untrustedGrains("metadata.entity."+e.Key, e.Pattern)...)
		}
		for i, d := range c.docs {
			vs = append(vs, untrustedGrains(fmt.Sprintf("policyDocuments[%d]", i), d.joint)...)
		}
	}

	for _, p := range r.Policies {
		if msg := policyNameProblem(p); msg != "" {
			vs = append(vs, Violation{ReasonInvalidPolicyName, "policies", fmt.Sprintf("%q %s", p, msg)})
			continue
		}
		if b, ok := acl.Builtin(p); ok && !b.Assignable {
			// Vault refuses every login whose policies name it ("cannot
			// assign policy"): the role would never give a token.
			vs = append(vs, Violation{ReasonInvalidPolicyName, "policies", fmt.Sprintf("%q is the built-in policy of %s that no login may carry: Vault refuses every login of the role (cannot assign policy)", p, b.Servers)})
			continue
		}
		if t.AllowedPolicies != nil && !matchAny(t.AllowedPolicies, p) {
			vs = append(vs, Violation{ReasonPolicyNotAllowed, "policies", fmt.Sprintf("%q is not in allowedPolicies %q", p, t.AllowedPolicies)})
		}
	}
	for _, d := range r.PolicyDocuments {
		msg := policyNameProblem(d.Name)
		if b, ok := acl.Builtin(d.Name); ok && msg == "" {
			// The server makes it and never lets it be deleted ("default"
			// is attached to every token): the operator never writes,
			// adopts or deletes it, whatever adoptPolicies says.
			msg = fmt.Sprintf("is the built-in policy of %s: the operator never writes, adopts or deletes it", b.Servers)
			if b.Name == "default" {
				msg += " (Vault attaches it to every token)"
			}
		}
		if msg != "" {
			vs = append(vs, Violation{ReasonInvalidPolicyName, "policyDocuments", fmt.Sprintf("%q %s", d.Name, msg)})
			continue
		}
		// The operator writes these policies: allowedPolicies bounds
		// their names as it bounds the names it assigns.
		if t.AllowedPolicies != nil && !matchAny(t.AllowedPolicies, d.Name) {
			vs = append(vs, Violation{ReasonPolicyNotAllowed, "policyDocuments", fmt.Sprintf("%q is not in allowedPolicies %q", d.Name, t.AllowedPolicies)})
		}
	}
	// Entity metadata is substituted into templated ACL paths by Vault
	// ({{identity.entity.metadata.roles__0}}), where a '*' or '+' in the
	// value is a glob: values with substitutions get the same check as
	// values substituted into policy documents.
	for _, kv := range r.EntityMetadata {
		if !c.substitutedEntityKey(kv.Key) {
			continue
		}
		if msg := widens(kv.Value); msg != "" && kv.Value != "" {
			vs = append(vs, Violation{ReasonACLPathWidened, "metadata.entity." + kv.Key,
				fmt.Sprintf("value %q %s; Vault substitutes entity metadata into templated ACL paths", kv.Value, msg)})
		}
	}
	for _, f := range r.docFields {
		field := fmt.Sprintf("policyDocuments[%d]", f.doc)
		if f.conflict {
			vs = append(vs, Violation{ReasonConflictingPolicy, field, fmt.Sprintf("policy %q renders two different bodies", f.name)})
			continue
		}
		if f.refusal != "" {
			vs = append(vs, Violation{ReasonInvalidPolicyDocument, field, fmt.Sprintf("policy %q is one Vault refuses: %s", f.name, f.refusal)})
			continue
		}
		if msg := widens(f.value); msg != "" {
			vs = append(vs, Violation{ReasonACLPathWidened, field, fmt.Sprintf("substituted value %q %s (policy %q)", f.value, msg, f.name)})
		}
	}
	if msg := entityNameProblem(r.EntityName); msg != "" {
		vs = append(vs, Violation{ReasonInvalidEntityName, "entityName", fmt.Sprintf("%q %s", r.EntityName, msg)})
	}
	vs = append(vs, metadataLimits("metadata.entity", r.EntityMetadata)...)
	vs = append(vs, entityMetadataReserved(r.EntityMetadata)...)
	vs = append(vs, metadataLimits("metadata.secret", r.SecretMetadata)...)
	return vs
}

// entityMetadataReserved keeps the operator's own entity metadata (the
// owner marker and the list of rendered keys, pkg/ownership) out of any
// template's reach, and room for them within Vault's limits.
func entityMetadataReserved(kvs []template.KV) []Violation {
	const field = "metadata.entity"
	var vs []Violation
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, ownership.ReservedKeyPrefix) {
			vs = append(vs, Violation{ReasonMetadataLimit, field, fmt.Sprintf("key %.40q starts with %q, which the operator reserves for its owner marker", kv.Key, ownership.ReservedKeyPrefix)})
		}
	}
	if len(kvs) > MaxMetadataPairs {
		return vs // reported by metadataLimits
	}
	if n := len(kvs); n > MaxMetadataPairs-2 {
		vs = append(vs, Violation{ReasonMetadataLimit, field, fmt.Sprintf("%d pairs, and the operator's owner marker needs 2: Vault allows %d in all", n, MaxMetadataPairs)})
	}
	if _, err := ownership.KeysValue(kvs); err != nil {
		vs = append(vs, Violation{ReasonMetadataLimit, field, err.Error()})
	}
	return vs
}

// untrustedGrains flags every grain but grains[id]: the rest is reported
// by the minion itself, so a compromised minion could pick its policies.
// mapdata too: the parameter stack picks its layers by grains (os_family,
// osarch, ...) and config lookups fall back to grains.
func untrustedGrains(field string, p *template.Pattern) []Violation {
	var vs []Violation
	for _, f := range p.Fields() {
		switch {
		case f != "grains[id]" && (f == "grains" || strings.HasPrefix(f, "grains[") || strings.HasPrefix(f, "grains.")):
			vs = append(vs, Violation{ReasonUntrustedGrain, field, fmt.Sprintf("{%s} is minion-controlled; only {grains[id]} is trusted unless trustMinionGrains is set", f)})
		case f == "mapdata" || strings.HasPrefix(f, "mapdata[") || strings.HasPrefix(f, "mapdata."):
			vs = append(vs, Violation{ReasonUntrustedGrain, field, fmt.Sprintf("{%s} depends on minion-controlled grains (the parameter stack picks layers by grains); allowed only with trustMinionGrains", f)})
		}
	}
	return vs
}

// substitutedEntityKey reports whether the entity metadata key (or the
// key__N it was expanded into) comes from a pattern with substitutions.
func (c *Compiled) substitutedEntityKey(key string) bool {
	for _, e := range c.places.Entity {
		if key == e.Key || strings.HasPrefix(key, e.Key+"__") {
			if len(e.Pattern.Fields()) > 0 {
				return true
			}
		}
	}
	return false
}

// policyNameProblem says why Vault should not get this policy name. Vault
// itself accepts spaces and '*', lowercases, and redirects "..": we refuse
// all of that rather than write something other than what was rendered.
func policyNameProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case name == "root":
		return "is Vault's root policy"
	case len(name) > maxPolicyNameLen:
		return fmt.Sprintf("is longer than %d bytes", maxPolicyNameLen)
	case strings.Contains(name, ".."):
		return `contains ".."`
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return "has an empty path segment"
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./@:=,", r)) {
			return fmt.Sprintf("contains %q (allowed: a-z 0-9 _ - . / @ : = ,)", r)
		}
	}
	return ""
}

// widens says how a value substituted into an ACL policy would grant more
// than its placeholder: globs, traversal, another path segment, or Vault
// template or HCL syntax.
func widens(v string) string {
	switch {
	case v == "":
		return "is empty"
	case strings.ContainsAny(v, "*+"):
		return "contains a glob ('*' or '+')"
	case strings.Contains(v, ".."):
		return `contains ".."`
	case strings.Contains(v, "/"):
		return "contains '/' and would change the path outside its placeholder"
	case strings.ContainsAny(v, `{}"\`):
		return "contains template or quoting characters"
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return "contains a control character"
		}
	}
	return ""
}

func entityNameProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case strings.Contains(name, "/"):
		return "contains '/'"
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return "contains a control character"
		}
	}
	return ""
}

func metadataLimits(field string, kvs []template.KV) []Violation {
	var vs []Violation
	if len(kvs) > MaxMetadataPairs {
		vs = append(vs, Violation{ReasonMetadataLimit, field, fmt.Sprintf("%d pairs, Vault allows %d", len(kvs), MaxMetadataPairs)})
	}
	for _, kv := range kvs {
		if msg := metadataKeyProblem(kv.Key); msg != "" {
			vs = append(vs, Violation{ReasonMetadataLimit, field, fmt.Sprintf("key %.40q %s", kv.Key, msg)})
		}
		if len(kv.Key) > MaxMetadataKeyLen {
			vs = append(vs, Violation{ReasonMetadataLimit, field, fmt.Sprintf("key %.40q... is %d bytes, Vault allows %d", kv.Key, len(kv.Key), MaxMetadataKeyLen)})
		}
		if len(kv.Value) > MaxMetadataValueLen {
			vs = append(vs, Violation{ReasonMetadataLimit, field, fmt.Sprintf("value of %q is %d bytes, Vault allows %d", kv.Key, len(kv.Value), MaxMetadataValueLen)})
		}
	}
	return vs
}

// matchAny reports whether name matches one of the globs, where '*'
// matches any run of characters (slashes included) and '?' one character.
func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if globMatch(g, name) {
			return true
		}
	}
	return false
}

func globMatch(pattern, name string) bool {
	// Iterative matching with single-star backtracking: linear-ish, and
	// no regexp built from user input.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// metadataKeyProblem applies Vault's rules for metadata keys (which it,
// too, answers with HTTP 500): letters, digits and = / + _ -, not
// starting with "vault-".
func metadataKeyProblem(k string) string {
	if k == "" {
		return "is empty"
	}
	if strings.HasPrefix(k, "vault-") {
		return `starts with "vault-", which Vault reserves`
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("=/+_-", r)) {
			return fmt.Sprintf("contains %q (Vault allows a-z A-Z 0-9 = / + _ -)", r)
		}
	}
	return ""
}
