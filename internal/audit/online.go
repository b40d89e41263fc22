package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
	"golang.org/x/sync/errgroup"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// The online audit reads the fleet from Vault itself, with read rights
// only, as plan reaches it (VAULT_ADDR, VAULT_TOKEN, VAULT_CACERT ...):
// the AppRole roles of the minion mount, for each role the entity its
// alias (name = role ID, on the mount's accessor) belongs to, with that
// entity's groups, and the ACL policies they name. A minion is its role:
// what a fresh login of the role would get now. It never logs a minion in,
// creates a secret ID or a token, and never writes.
//
// Each object is read once per call, and only those the call needs:
//
//   - once per call: the server's version (sys/health, unless
//     --vault-version), the auth mounts (sys/auth), the roles
//     (LIST auth/<mount>/role, unless the call names its minions), the
//     policy names (LIST sys/policies/acl) and the entities with their
//     aliases (LIST identity/entity/id: its key_info has each entity's name
//     and aliases, so no lookup per role; the listing by name drops
//     key_info);
//   - once per role: the role (its token policies) and its role ID;
//   - once per entity an alias of a role leads to: the entity (metadata,
//     policies, disabled, group IDs);
//   - once per group and once per policy name the minions need (token,
//     entity and group policies, and default).
//
// Nothing cheaper answers exactly: AppRole has no listing with the roles'
// settings nor a read that includes the role ID (Vault v1.21.4
// builtin/credential/approle/path_role.go pathRoleList, pathRoleRead), the
// entity listing has no metadata, policies or disabled flag
// (vault/identity_store_entities.go handlePathEntityListCommon), and the
// policy listing no texts (vault/logical_system.go handlePoliciesList).

// onlineWorkers is how many reads the online audit has in flight.
const onlineWorkers = 8

// OnlineOptions say what LoadOnlineWith reads.
type OnlineOptions struct {
	// Mount is the minions' AppRole auth mount.
	Mount string
	// Version is --vault-version; "" takes the server's own.
	Version string
	// Roles, when set, are the only roles read (what-can asks about one
	// minion); a role the mount lacks is left out. nil reads every role.
	Roles []string
	// Client, when set, is used instead of one made from the environment.
	Client *vaultapi.Client
}

// LoadOnline reads the fleet from Vault (vaultapi.DefaultConfig: VAULT_ADDR,
// VAULT_TOKEN ...): a minion per AppRole role of mount. The rules are
// those of version, or of the server's own version when version is "".
func LoadOnline(ctx context.Context, mount, version string) (*Fleet, error) {
	return LoadOnlineWith(ctx, OnlineOptions{Mount: mount, Version: version})
}

// LoadOnlineWith reads the fleet o says from Vault.
func LoadOnlineWith(ctx context.Context, o OnlineOptions) (*Fleet, error) {
	c := o.Client
	if c == nil {
		var err error
		if c, err = vaultapi.NewClient(vaultapi.DefaultConfig()); err != nil {
			return nil, fmt.Errorf("vault client: %w", err)
		}
	}
	var rules VaultRules
	var err error
	if o.Version == "" {
		h, err := c.Sys().HealthWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading Vault's version: %w", err)
		}
		rules, err = vaultRules(h.Version, VersionFromServer)
		if err != nil {
			return nil, err
		}
	} else if rules, err = vaultRules(o.Version, VersionFromFlag); err != nil {
		return nil, err
	}
	f := &Fleet{byID: map[string]*Minion{}, docs: map[string]string{}, rules: rules, client: c}
	if w := rules.untestedWarning(); w != "" {
		f.warnings = append(f.warnings, w)
	}
	mount := strings.Trim(o.Mount, "/")
	auths, err := c.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing auth mounts: %w", err)
	}
	am, ok := auths[mount+"/"]
	if !ok {
		return nil, fmt.Errorf("no auth mount %q", mount)
	}
	f.accessor = am.Accessor
	if tm, ok := auths["token/"]; ok {
		f.tokenAccessor = tm.Accessor
	}
	roles := o.Roles
	if roles == nil {
		s, err := c.Logical().ListWithContext(ctx, "auth/"+mount+"/role")
		if err != nil {
			return nil, fmt.Errorf("listing roles of %s: %w", mount, err)
		}
		if s != nil {
			roles = anyStrings(s.Data["keys"])
		}
	} else {
		roles = nil
		for _, r := range o.Roles {
			// AppRole keeps role names lower-cased; a name with a "/"
			// (a binding's namespace/name) is no role.
			if !strings.Contains(r, "/") {
				roles = append(roles, strings.ToLower(r))
			}
		}
	}
	slices.Sort(roles)
	roles = slices.Compact(roles)
	policyNames, err := listPolicies(ctx, c)
	if err != nil {
		return nil, err
	}

	// The roles, with their role IDs.
	minions := make([]*Minion, len(roles))
	err = each(ctx, len(roles), func(ctx context.Context, i int) error {
		m, err := readRole(ctx, c, mount, f.accessor, roles[i], o.Roles != nil)
		minions[i] = m
		return err
	})
	if err != nil {
		return nil, err
	}
	minions = slices.DeleteFunc(minions, func(m *Minion) bool { return m == nil })

	// The entity each role's alias leads to, each read once.
	if len(minions) > 0 {
		byAlias, err := listEntityAliases(ctx, c)
		if err != nil {
			return nil, err
		}
		entityOf := map[string][]*Minion{}
		var ids []string
		for _, m := range minions {
			if id, ok := byAlias[aliasKey{f.accessor, m.roleID}]; ok {
				if len(entityOf[id]) == 0 {
					ids = append(ids, id)
				}
				entityOf[id] = append(entityOf[id], m)
			}
		}
		entities := make([]*vaultapi.Secret, len(ids))
		err = each(ctx, len(ids), func(ctx context.Context, i int) error {
			s, err := c.Logical().ReadWithContext(ctx, "identity/entity/id/"+ids[i])
			if err != nil {
				return fmt.Errorf("reading entity %s: %w", ids[i], err)
			}
			entities[i] = s
			return nil
		})
		if err != nil {
			return nil, err
		}
		for i, id := range ids {
			for _, m := range entityOf[id] {
				// An entity deleted since the listing: the next login
				// makes a new one, as for a role without an entity.
				if s := entities[i]; s != nil && s.Data != nil {
					setEntity(m, s.Data, f.accessor)
				}
			}
		}
	}

	// The groups of those entities, each read once.
	if err := readGroups(ctx, c, minions); err != nil {
		return nil, err
	}

	// The policies the minions name, each read once.
	need := map[string]bool{"default": true}
	for _, m := range minions {
		for _, n := range m.subject.PolicyNames() {
			need[n] = true
		}
	}
	var names []string
	for n := range need {
		if listed, ok := policyNames[acl.SanitizeName(n)]; ok && n != "root" {
			names = append(names, listed)
		}
	}
	slices.Sort(names)
	texts := make([]string, len(names))
	err = each(ctx, len(names), func(ctx context.Context, i int) error {
		var err error
		texts[i], err = c.Sys().GetPolicyWithContext(ctx, names[i])
		if err != nil {
			return fmt.Errorf("reading policy %q: %w", names[i], err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		f.docs[n] = texts[i]
	}
	f.policyNames = policyNames

	f.ev, err = acl.New(f.docs, acl.Options{Mode: rules.mode})
	if err != nil {
		return nil, err
	}
	for _, m := range minions {
		m.prep = f.ev.Prepare(m.subject)
		f.minions = append(f.minions, m)
		f.byID[strings.ToLower(m.role)] = m
	}
	return f, nil
}

// each runs fn for 0 to n-1 on up to onlineWorkers goroutines; the first
// error stops the rest and is returned.
func each(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(onlineWorkers)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}

// listPolicies lists the ACL policies' names, by sanitised name.
func listPolicies(ctx context.Context, c *vaultapi.Client) (map[string]string, error) {
	names, err := c.Sys().ListPoliciesWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing ACL policies: %w", err)
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[acl.SanitizeName(n)] = n
	}
	return out, nil
}

// aliasKey is an alias as Vault indexes it: by mount accessor and name.
type aliasKey struct{ accessor, name string }

// listEntityAliases is every entity alias, to the ID of its entity, from
// one LIST identity/entity/id (its key_info holds each entity's aliases).
func listEntityAliases(ctx context.Context, c *vaultapi.Client) (map[aliasKey]string, error) {
	s, err := c.Logical().ListWithContext(ctx, "identity/entity/id")
	if err != nil {
		return nil, fmt.Errorf("listing entities: %w", err)
	}
	out := map[aliasKey]string{}
	if s == nil {
		return out, nil
	}
	info, _ := s.Data["key_info"].(map[string]any)
	for id, v := range info {
		e, _ := v.(map[string]any)
		aliases, _ := e["aliases"].([]any)
		for _, a := range aliases {
			am, _ := a.(map[string]any)
			acc, _ := am["mount_accessor"].(string)
			name, _ := am["name"].(string)
			out[aliasKey{acc, name}] = id
		}
	}
	return out, nil
}

// readRole reads a role and its role ID: the minion a fresh login of the
// role makes, before its entity (its token policies, with "default"
// unless token_no_default_policy). A role the mount lacks is an error, or
// nil when absentOK.
func readRole(ctx context.Context, c *vaultapi.Client, mount, accessor, role string, absentOK bool) (*Minion, error) {
	base := "auth/" + mount + "/role/" + role
	s, err := c.Logical().ReadWithContext(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("reading role %q: %w", role, err)
	}
	if s == nil {
		if absentOK {
			return nil, nil
		}
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
	// No entity yet: the first login makes one, named by Vault (setEntity
	// replaces this when the alias has an entity).
	m.subject.Entity = &acl.Entity{Aliases: []acl.Alias{{Name: roleID, MountAccessor: accessor, Metadata: map[string]string{"role_name": role}}}}
	return m, nil
}

// setEntity gives m the entity Vault holds (an identity/entity/id read),
// the alias of its role with role_name set as the login sets it.
func setEntity(m *Minion, data map[string]any, accessor string) {
	e := &acl.Entity{
		Name: fmt.Sprint(data["name"]), Metadata: anyStringMap(data["metadata"]),
		Policies: anyStrings(data["policies"]), Disabled: data["disabled"] == true,
	}
	e.ID, _ = data["id"].(string)
	live := *e
	aliases, _ := data["aliases"].([]any)
	for _, a := range aliases {
		am, _ := a.(map[string]any)
		al := acl.Alias{Metadata: anyStringMap(am["metadata"]), CustomMetadata: anyStringMap(am["custom_metadata"])}
		al.ID, _ = am["id"].(string)
		al.Name, _ = am["name"].(string)
		al.MountAccessor, _ = am["mount_accessor"].(string)
		live.Aliases = append(live.Aliases, al)
		if al.Name == m.roleID && al.MountAccessor == accessor {
			al.Metadata = maps.Clone(al.Metadata)
			al.Metadata["role_name"] = m.role
		}
		e.Aliases = append(e.Aliases, al)
	}
	m.live = &live
	m.metadata = e.Metadata
	m.subject.Entity = e
	m.groupIDs = append(anyStrings(data["direct_group_ids"]), anyStrings(data["inherited_group_ids"])...)
}

// readGroups reads every group the minions' entities are in, once each.
func readGroups(ctx context.Context, c *vaultapi.Client, minions []*Minion) error {
	var ids []string
	seen := map[string]bool{}
	for _, m := range minions {
		for _, id := range m.groupIDs {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	groups := make([]acl.Group, len(ids))
	err := each(ctx, len(ids), func(ctx context.Context, i int) error {
		g, err := c.Logical().ReadWithContext(ctx, "identity/group/id/"+ids[i])
		if err != nil {
			return fmt.Errorf("reading group %s: %w", ids[i], err)
		}
		if g == nil {
			return fmt.Errorf("reading group %s: no such group", ids[i])
		}
		name, _ := g.Data["name"].(string)
		ns, _ := g.Data["namespace_id"].(string)
		groups[i] = acl.Group{ID: ids[i], Name: name, NamespaceID: ns,
			Metadata: anyStringMap(g.Data["metadata"]), Policies: anyStrings(g.Data["policies"])}
		return nil
	})
	if err != nil {
		return err
	}
	byID := make(map[string]acl.Group, len(ids))
	for i, id := range ids {
		byID[id] = groups[i]
	}
	for _, m := range minions {
		for _, id := range m.groupIDs {
			m.subject.Groups = append(m.subject.Groups, byID[id])
		}
		m.groupIDs = nil
	}
	return nil
}

// policyText is Vault's text of a policy the online fleet did not read
// yet (audit drift: a policy only the manifests' minions name), read once;
// ok is false when Vault has no such policy.
func (f *Fleet) policyText(ctx context.Context, name string) (text string, ok bool, err error) {
	f.docsMu.Lock()
	defer f.docsMu.Unlock()
	if text, ok := f.docs[name]; ok {
		return text, true, nil
	}
	if f.extraDocs == nil {
		f.extraDocs = map[string]*string{}
	}
	if t, done := f.extraDocs[name]; done {
		if t == nil {
			return "", false, nil
		}
		return *t, true, nil
	}
	listed, ok := f.policyNames[acl.SanitizeName(name)]
	if !ok || name == "root" {
		f.extraDocs[name] = nil
		return "", false, nil
	}
	text, err = f.client.Sys().GetPolicyWithContext(ctx, listed)
	if err != nil {
		return "", false, fmt.Errorf("reading policy %q: %w", listed, err)
	}
	f.extraDocs[name] = &text
	return text, true, nil
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
