package acl

import "slices"

// Subject is what Vault knows of one token when it answers
// sys/capabilities: its own policies, fixed at login, and its entity and
// groups, read live.
type Subject struct {
	// TokenPolicies are te.Policies (for a login: LoginPolicies of the
	// role's token_policies).
	TokenPolicies []string
	// NoIdentityPolicies is te.NoIdentityPolicies.
	NoIdentityPolicies bool
	// Entity is nil for a token without an entity.
	Entity *Entity
	// Groups are the entity's groups, direct and inherited.
	Groups []Group
}

// PolicyNames are the names Vault loads for the subject, sanitised, without
// duplicates, sorted: token policies, then the identity policies of the
// entity and its groups.
func (s *Subject) PolicyNames() []string {
	var names []string
	add := func(list []string) {
		for _, n := range list {
			if n = SanitizeName(n); n != "" {
				names = append(names, n)
			}
		}
	}
	add(s.TokenPolicies)
	if !s.NoIdentityPolicies && s.Entity != nil {
		add(s.Entity.Policies)
		for _, g := range s.Groups {
			add(g.Policies)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// LoginPolicies is policyutil.SanitizePolicies as a login applies it to a
// role's token_policies: trimmed, lower-cased, "default" added unless the
// role says no, root alone, no duplicates, sorted.
func LoginPolicies(tokenPolicies []string, addDefault bool) []string {
	var out []string
	hasDefault, hasRoot := false, false
	for _, p := range tokenPolicies {
		p = SanitizeName(p)
		if p == "" {
			continue
		}
		hasDefault = hasDefault || p == "default"
		hasRoot = hasRoot || p == "root"
		out = append(out, p)
	}
	if !hasDefault && addDefault {
		out = append(out, "default")
	}
	if hasRoot {
		return []string{"root"}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
