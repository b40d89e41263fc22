package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// The online audit reads the fleet from Vault itself, with read rights
// only, as plan reaches it (VAULT_ADDR, VAULT_TOKEN, VAULT_CACERT ...):
// the ACL policies, the AppRole roles of the minion mount, and for each
// role the entity its alias (name = role ID, on the mount's accessor)
// belongs to, with that entity's groups. A minion is its role: what a
// fresh login of the role would get now. It never logs a minion in,
// creates a secret ID or a token.

// LoadOnline reads the fleet from Vault (vaultapi.DefaultConfig: VAULT_ADDR,
// VAULT_TOKEN ...): a minion per AppRole role of mount. The rules are
// those of version, or of the server's own version when version is "".
func LoadOnline(ctx context.Context, mount, version string) (*Fleet, error) {
	c, err := vaultapi.NewClient(vaultapi.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	if version == "" {
		h, err := c.Sys().HealthWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading Vault's version: %w", err)
		}
		version = h.Version
	}
	mode, err := acl.ModeForVersion(version)
	if err != nil {
		return nil, err
	}
	f := &Fleet{byID: map[string]*Minion{}, docs: map[string]string{}, version: version, client: c}
	names, err := c.Sys().ListPoliciesWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing ACL policies: %w", err)
	}
	for _, n := range names {
		if n == "root" {
			continue
		}
		text, err := c.Sys().GetPolicyWithContext(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("reading policy %q: %w", n, err)
		}
		f.docs[n] = text
	}
	f.ev, err = acl.New(f.docs, acl.Options{Mode: mode})
	if err != nil {
		return nil, err
	}
	mount = strings.Trim(mount, "/")
	auths, err := c.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing auth mounts: %w", err)
	}
	am, ok := auths[mount+"/"]
	if !ok {
		return nil, fmt.Errorf("no auth mount %q", mount)
	}
	f.accessor = am.Accessor
	s, err := c.Logical().ListWithContext(ctx, "auth/"+mount+"/role")
	if err != nil {
		return nil, fmt.Errorf("listing roles of %s: %w", mount, err)
	}
	var roles []string
	if s != nil {
		roles = anyStrings(s.Data["keys"])
	}
	slices.Sort(roles)
	for _, role := range roles {
		m, err := onlineMinion(ctx, c, mount, am.Accessor, role)
		if err != nil {
			return nil, err
		}
		m.prep = f.ev.Prepare(m.subject)
		f.minions = append(f.minions, m)
		f.byID[strings.ToLower(role)] = m
	}
	return f, nil
}

// onlineMinion is a role as a fresh login would make its token: the role's
// token policies (with "default" unless token_no_default_policy), and the
// entity of its alias as it is now, the alias's role_name set as the login
// sets it.
func onlineMinion(ctx context.Context, c *vaultapi.Client, mount, accessor, role string) (*Minion, error) {
	base := "auth/" + mount + "/role/" + role
	s, err := c.Logical().ReadWithContext(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("reading role %q: %w", role, err)
	}
	if s == nil {
		return nil, fmt.Errorf("reading role %q: no such role", role)
	}
	noDefault, _ := s.Data["token_no_default_policy"].(bool)
	tok := anyStrings(s.Data["token_policies"])
	s, err = c.Logical().ReadWithContext(ctx, base+"/role-id")
	if err != nil {
		return nil, fmt.Errorf("reading the role ID of %q: %w", role, err)
	}
	if s == nil {
		return nil, fmt.Errorf("reading the role ID of %q: no role ID", role)
	}
	roleID, _ := s.Data["role_id"].(string)
	m := &Minion{id: role, role: role, binding: "", metadata: map[string]string{}, roleID: roleID}
	m.subject.TokenPolicies = acl.LoginPolicies(tok, !noDefault)
	s, err = c.Logical().WriteWithContext(ctx, "identity/lookup/entity", map[string]any{"alias_name": roleID, "alias_mount_accessor": accessor})
	if err != nil {
		return nil, fmt.Errorf("looking up the entity of role %q: %w", role, err)
	}
	if s == nil || s.Data == nil {
		// No entity yet: the first login makes one, named by Vault.
		m.subject.Entity = &acl.Entity{Aliases: []acl.Alias{{Name: roleID, MountAccessor: accessor, Metadata: map[string]string{"role_name": role}}}}
		return m, nil
	}
	e := &acl.Entity{
		Name: fmt.Sprint(s.Data["name"]), Metadata: anyStringMap(s.Data["metadata"]),
		Policies: anyStrings(s.Data["policies"]), Disabled: s.Data["disabled"] == true,
	}
	e.ID, _ = s.Data["id"].(string)
	live := *e
	aliases, _ := s.Data["aliases"].([]any)
	for _, a := range aliases {
		am, _ := a.(map[string]any)
		al := acl.Alias{Metadata: anyStringMap(am["metadata"]), CustomMetadata: anyStringMap(am["custom_metadata"])}
		al.ID, _ = am["id"].(string)
		al.Name, _ = am["name"].(string)
		al.MountAccessor, _ = am["mount_accessor"].(string)
		live.Aliases = append(live.Aliases, al)
		if al.Name == roleID && al.MountAccessor == accessor {
			al.Metadata = maps.Clone(al.Metadata)
			al.Metadata["role_name"] = role
		}
		e.Aliases = append(e.Aliases, al)
	}
	m.live = &live
	m.metadata = e.Metadata
	m.subject.Entity = e
	for _, gid := range append(anyStrings(s.Data["direct_group_ids"]), anyStrings(s.Data["inherited_group_ids"])...) {
		g, err := c.Logical().ReadWithContext(ctx, "identity/group/id/"+gid)
		if err != nil {
			return nil, fmt.Errorf("reading group %s: %w", gid, err)
		}
		if g == nil {
			return nil, fmt.Errorf("reading group %s: no such group", gid)
		}
		name, _ := g.Data["name"].(string)
		ns, _ := g.Data["namespace_id"].(string)
		m.subject.Groups = append(m.subject.Groups, acl.Group{ID: gid, Name: name, NamespaceID: ns,
			Metadata: anyStringMap(g.Data["metadata"]), Policies: anyStrings(g.Data["policies"])})
	}
	return m, nil
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func anyStringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}
