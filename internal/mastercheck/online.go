package mastercheck

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Vault is what the online check asks Vault: roles as the master reads
// them, and the capabilities of the master's token (never a minion's).
type Vault interface {
	// ReadRole is GET auth/<mount>/role/<name>; nil when absent.
	ReadRole(ctx context.Context, mount, name string) (map[string]any, error)
	// MasterCapabilities are the master token's capabilities on path
	// (sys/capabilities-accessor or sys/capabilities).
	MasterCapabilities(ctx context.Context, path string) ([]string, error)
}

// Minion is a minion the manifests bind, and whether its role is
// expected in Vault (its binding is applied).
type Minion struct {
	ID       string
	Template string
}

// Rights are what the master's token may do to the operator's objects.
type Rights struct {
	CreateRoles, RewriteRoles, DeleteRoles, ListRoles bool
	WriteEntities, WriteAliases, CreateTokens         bool
	ReadRoles, ReadRoleIDs, IssueSecretIDs            bool
	// Checked: the capabilities were asked (a master token or accessor
	// was given).
	Checked bool
}

// MayWrite says whether the master can change what the operator owns.
func (r Rights) MayWrite() bool {
	return r.CreateRoles || r.RewriteRoles || r.DeleteRoles || r.ListRoles || r.WriteEntities || r.WriteAliases || r.CreateTokens
}

// CheckRights asks Vault what the master's token may do on the paths
// saltext uses, for one minion of the mount (any name: the policies that
// matter use "+" or "*").
func CheckRights(ctx context.Context, v Vault, mount, minion string) (Rights, []Finding, error) {
	r := Rights{Checked: true}
	caps := func(path string) (map[string]bool, error) {
		list, err := v.MasterCapabilities(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("capabilities of the master's token on %s: %w", path, err)
		}
		set := map[string]bool{}
		for _, c := range list {
			set[c] = true
		}
		if set["root"] {
			for _, c := range []string{"create", "read", "update", "delete", "list", "sudo"} {
				set[c] = true
			}
		}
		return set, nil
	}
	role := "auth/" + mount + "/role/" + strings.ToLower(minion)
	checks := []struct {
		path string
		set  func(map[string]bool)
	}{
		{role, func(c map[string]bool) {
			r.CreateRoles, r.RewriteRoles, r.DeleteRoles, r.ReadRoles = c["create"], c["update"], c["delete"], c["read"]
		}},
		{"auth/" + mount + "/role", func(c map[string]bool) { r.ListRoles = c["list"] }},
		{role + "/role-id", func(c map[string]bool) { r.ReadRoleIDs = c["read"] }},
		{role + "/secret-id", func(c map[string]bool) { r.IssueSecretIDs = c["update"] }},
		{"identity/entity/name/salt_minion_" + minion, func(c map[string]bool) { r.WriteEntities = c["create"] || c["update"] || c["delete"] }},
		{"identity/entity-alias", func(c map[string]bool) { r.WriteAliases = c["create"] || c["update"] }},
		{"auth/token/create", func(c map[string]bool) { r.CreateTokens = c["create"] || c["update"] }},
	}
	for _, c := range checks {
		set, err := caps(c.path)
		if err != nil {
			return r, nil, err
		}
		c.set(set)
	}
	var out []Finding
	fight := func(key, problem, fix string) {
		out = append(out, Finding{Severity: Fight, Key: key, Problem: problem, Fix: fix})
	}
	const fix = "give the master config/vault/salt-master-policy.hcl only (docs/operations.md#running-beside-a-salt-master)"
	if r.CreateRoles || r.RewriteRoles || r.DeleteRoles {
		fight(role, "the master's token may create, rewrite or delete the operator's roles: a missing role is created with the master's policies (a deleted binding gets its access back), differing parameters are written over", fix)
	}
	if r.ListRoles {
		fight("auth/"+mount+"/role", "the master's token may list the roles: vault.sync_approles, vault.sync_entities and vault.cleanup_auth work", fix)
	}
	if r.WriteEntities || r.WriteAliases {
		fight("identity/", "the master's token may write entities or aliases: it replaces an entity's whole metadata (the operator's minionvault-owner and minionvault-keys) and moves aliases", fix)
	}
	if r.CreateTokens {
		fight("auth/token/create", "the master's token may create tokens: vault.generate_token issues tokens with the master's policies and no entity", fix)
	}
	var missing []string
	for _, m := range []struct {
		ok   bool
		what string
	}{{r.ReadRoles, "read " + role}, {r.ReadRoleIDs, "read " + role + "/role-id"}, {r.IssueSecretIDs, "update " + role + "/secret-id"}} {
		if !m.ok {
			missing = append(missing, m.what)
		}
	}
	if len(missing) > 0 {
		fight("master token", "the master's token cannot "+strings.Join(missing, ", ")+": minions get no credentials", fix)
	}
	return r, out, nil
}

// CheckRoles reads each minion's role as the master would and says which
// the master would create or rewrite, and why.
func (m *Master) CheckRoles(ctx context.Context, v Vault, t *Template, minions []string, rights Rights) ([]Finding, error) {
	var out []Finding
	minions = slices.Clone(minions)
	slices.Sort(minions)
	for _, id := range minions {
		path := "auth/" + t.Mount + "/role/" + id
		role, err := v.ReadRole(ctx, t.Mount, id)
		if err != nil {
			return out, fmt.Errorf("reading %s: %w", path, err)
		}
		if role == nil {
			f := Finding{Severity: Note, Key: path, Problem: "no role yet: the master's get_config for " + id + " is refused (403) until its binding is Ready",
				Fix: "apply the MinionBinding and wait for Ready before accepting the minion's key"}
			if !rights.Checked || rights.CreateRoles {
				f.Severity = Fight
				f.Problem = "no role: the master's next get_config for " + id + " (its own pillar compile included) creates role, entity and alias with its own policies, and the binding reports NotOwned"
			}
			out = append(out, f)
			continue
		}
		diffs, err := m.differences(role)
		if err != nil {
			return out, err
		}
		if len(diffs) == 0 {
			continue
		}
		problem := "the master would rewrite it, token_policies from its own rendering included, at every refresh of its 1 h role cache: " + strings.Join(diffs.strings(), "; ")
		if rights.Checked && !rights.RewriteRoles {
			problem = "the master would rewrite it and is refused (403): " + id + " gets no credentials: " + strings.Join(diffs.strings(), "; ")
		}
		out = append(out, Finding{Severity: Fight, Key: path, Problem: problem,
			Fix: "set these vault:issue:approle:params to null on the master"})
	}
	return out, nil
}
