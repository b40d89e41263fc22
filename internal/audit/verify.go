package audit

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// --verify asks Vault's own sys/capabilities about sampled minions without
// holding a minion's token or secret ID: for each, an alias named
// VerifyAliasPrefix+entityID on the token auth mount is attached to the
// minion's entity, a token is created through a token role that allows
// that alias (entity_alias), with the policies a fresh login of the role
// would carry, short-lived and with one use; sys/capabilities is asked
// about that token by the auditor's token (it spends none of the token's
// uses), and the token and the alias are removed again.

// VerifyAliasPrefix starts the names of the aliases Verify attaches; the
// token role's allowed_entity_aliases is this prefix and "*"
// (docs/audit.md).
const VerifyAliasPrefix = "minionvault-audit-"

// VerifyOptions say how many minions Verify samples, and how.
type VerifyOptions struct {
	// N minions are sampled among the roles with an entity.
	N int
	// Role is the token role the short-lived tokens are created with.
	Role string
	// Seed is the sample's seed (0: a new one, which the report says).
	Seed int64
}

// VerifyReport is what --verify found.
type VerifyReport struct {
	Seed          int64            `json:"seed"`
	TokenRole     string           `json:"tokenRole"`
	Minions       []VerifiedMinion `json:"minions"`
	Agreed        int              `json:"agreed"`
	Disagreements []Disagreement   `json:"disagreements"`
}

// VerifiedMinion is one sampled minion.
type VerifiedMinion struct {
	Role  string `json:"role"`
	Paths int    `json:"paths"`
	// Skipped says why Vault could not be asked (no entity yet, a token
	// that cannot be created ...).
	Skipped string `json:"skipped,omitempty"`
	// Note: the token's policies differ from the fresh login's (a token
	// role cannot give it the same), the answers are compared for the
	// token's.
	Note string `json:"note,omitempty"`
}

// Disagreement is one answer of the evaluator that is not Vault's.
type Disagreement struct {
	Role      string   `json:"role"`
	Path      string   `json:"path"`
	Evaluator []string `json:"evaluator"`
	Vault     []string `json:"vault"`
}

// Verify asks Vault's own sys/capabilities, for v.N minions of online
// sampled, about the paths Drift compared that all minions share (those
// the policies of both fleets name, and extra) and each minion's own, and
// reports where the evaluator disagrees.
func Verify(ctx context.Context, offline, online *Fleet, v VerifyOptions, extra []string) (*VerifyReport, error) {
	return verifyFleet(ctx, online, v, driftPaths(offline, online, extra))
}

// driftPaths are the paths drift compared that all minions share.
func driftPaths(offline, online *Fleet, extra []string) []string {
	set := map[string]bool{}
	fleetProbes(offline, set)
	fleetProbes(online, set)
	for _, p := range extra {
		set[p] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// verifyFleet samples v.N minions of the online fleet and compares the
// evaluator with sys/capabilities on paths and each minion's own paths.
func verifyFleet(ctx context.Context, f *Fleet, v VerifyOptions, paths []string) (*VerifyReport, error) {
	c := f.client
	// The token mount's accessor, from the auth mounts the online fleet
	// listed.
	if f.tokenAccessor == "" {
		return nil, errors.New("no token auth mount")
	}
	if v.Seed == 0 {
		v.Seed = time.Now().UnixNano()
	}
	r := &VerifyReport{Seed: v.Seed, TokenRole: v.Role, Minions: []VerifiedMinion{}, Disagreements: []Disagreement{}}
	// A role without an entity yet has nothing a token could be bound to.
	var eligible []*Minion
	for _, m := range f.minions {
		if m.live != nil && m.live.ID != "" {
			eligible = append(eligible, m)
		}
	}
	order := rand.New(rand.NewSource(v.Seed)).Perm(len(eligible))
	if len(order) > v.N {
		order = order[:v.N]
	}
	slices.Sort(order)
	for _, i := range order {
		m := eligible[i]
		vm, ds, err := verifyMinion(ctx, c, f, m, f.tokenAccessor, v.Role, paths)
		if err != nil {
			return nil, err
		}
		r.Minions = append(r.Minions, vm)
		r.Disagreements = append(r.Disagreements, ds...)
		if vm.Skipped == "" {
			r.Agreed += vm.Paths - len(ds)
		}
	}
	return r, nil
}

// verifyMinion compares the evaluator with sys/capabilities for one
// minion, through a short-lived token bound to its entity.
func verifyMinion(ctx context.Context, c *vaultapi.Client, f *Fleet, m *Minion, tokenAccessor, role string, common []string) (vm VerifiedMinion, ds []Disagreement, err error) {
	vm.Role = m.role
	if vm.Skipped = verifySkipped(m); vm.Skipped != "" {
		return vm, nil, nil
	}
	paths := verifyPaths(m, common)
	alias, err := attachAlias(ctx, c, m, tokenAccessor)
	if err != nil || alias.skipped != "" {
		vm.Skipped = alias.skipped
		return vm, nil, err
	}
	defer func() {
		if _, derr := c.Logical().DeleteWithContext(ctx, "identity/entity-alias/id/"+alias.id); derr != nil && err == nil {
			err = fmt.Errorf("removing the alias %s from the entity of %s: %w", alias.id, m.role, derr)
		}
	}()
	want := m.subject.TokenPolicies
	s, err := c.Logical().WriteWithContext(ctx, "auth/token/create/"+role, map[string]any{
		"policies": want, "no_default_policy": !slices.Contains(want, "default"),
		"entity_alias": alias.name, "ttl": "60s", "explicit_max_ttl": "120s", "num_uses": 1,
		"renewable": false, "display_name": "audit-verify", "no_parent": false,
	})
	if err != nil {
		vm.Skipped = "Vault makes no token for it: " + vaultErrText(err)
		return vm, nil, nil
	}
	if s == nil || s.Auth == nil {
		return vm, nil, errors.New("creating a token: no auth in Vault's answer")
	}
	token := s.Auth.ClientToken
	defer func() {
		if _, rerr := c.Logical().WriteWithContext(ctx, "auth/token/revoke", map[string]any{"token": token}); rerr != nil && err == nil {
			err = fmt.Errorf("revoking the verification token of %s: %w", m.role, rerr)
		}
	}()
	if s.Auth.EntityID != m.live.ID {
		return vm, nil, fmt.Errorf("the verification token of %s has entity %q, not the minion's %q: check the token role's allowed_entity_aliases", m.role, s.Auth.EntityID, m.live.ID)
	}
	got := acl.LoginPolicies(s.Auth.TokenPolicies, false)
	if !reflect.DeepEqual(got, want) {
		vm.Note = fmt.Sprintf("the token has policies %v, a fresh login %v: compared for the token's", got, want)
	}
	// The token's entity holds the alias it was made through.
	e := *m.live
	e.Aliases = slices.Clone(m.live.Aliases)
	if !alias.leftover {
		e.Aliases = append(e.Aliases, acl.Alias{ID: alias.id, Name: alias.name, MountAccessor: tokenAccessor, Metadata: map[string]string{}})
	}
	prep := f.ev.Prepare(acl.Subject{TokenPolicies: got, Entity: &e, Groups: m.subject.Groups})
	vm.Paths = len(paths)
	return vm, compareWithVault(ctx, c, prep, token, m.role, paths), nil
}

// verifySkipped is why Vault cannot be asked about m ("": it can).
func verifySkipped(m *Minion) string {
	switch {
	case m.live == nil || m.live.ID == "":
		return "no entity yet: Vault has nothing to bind a token to"
	case slices.Contains(m.subject.TokenPolicies, "root"):
		return "the role gives root"
	}
	return ""
}

// verifyPaths are common and the minion's own paths, sorted.
func verifyPaths(m *Minion, common []string) []string {
	set := map[string]bool{}
	for _, p := range common {
		set[p] = true
	}
	minionProbes(m, set)
	var paths []string
	for p := range set {
		// With a single path Vault's answer holds a "capabilities" key
		// that is not a path.
		if p != "capabilities" {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// verifyAlias is the alias on the token mount that binds the token to the
// minion's entity.
type verifyAlias struct {
	name, id string
	// leftover: left by an interrupted run, used, and removed as ours.
	leftover bool
	// skipped: the entity has another alias on the token mount.
	skipped string
}

// attachAlias attaches the alias to m's entity, or finds it there.
func attachAlias(ctx context.Context, c *vaultapi.Client, m *Minion, tokenAccessor string) (verifyAlias, error) {
	a := verifyAlias{name: VerifyAliasPrefix + m.live.ID}
	for _, al := range m.live.Aliases {
		if al.MountAccessor != tokenAccessor {
			continue
		}
		if al.Name != a.name {
			a.skipped = fmt.Sprintf("the entity already has an alias %q on the token mount", al.Name)
			return a, nil
		}
		a.id, a.leftover = al.ID, true
	}
	if a.leftover {
		return a, nil
	}
	s, err := c.Logical().WriteWithContext(ctx, "identity/entity-alias", map[string]any{
		"name": a.name, "canonical_id": m.live.ID, "mount_accessor": tokenAccessor})
	if err != nil {
		return a, fmt.Errorf("attaching an alias to the entity of %s: %w", m.role, err)
	}
	if s == nil || s.Data["id"] == nil {
		return a, fmt.Errorf("attaching an alias to the entity of %s: no alias ID in Vault's answer", m.role)
	}
	a.id = fmt.Sprint(s.Data["id"])
	return a, nil
}

// compareWithVault is every path on which prep's answer is not
// sys/capabilities' for token (an error on one side only included).
func compareWithVault(ctx context.Context, c *vaultapi.Client, prep *acl.Prepared, token, role string, paths []string) []Disagreement {
	var ds []Disagreement
	vaultAnswer, vaultErr := capabilitiesOf(ctx, c, token, paths)
	for _, p := range paths {
		d := prep.Check(p)
		var mine, theirs []string
		switch {
		case d.Err != nil:
			mine = []string{"error: " + d.Err.Error()}
		case d.Root:
			mine = []string{"root"}
		default:
			mine = d.Capabilities()
		}
		if vaultErr != nil {
			theirs = []string{"error: " + vaultErr.Error()}
		} else {
			theirs = vaultAnswer[p]
		}
		if (d.Err != nil) != (vaultErr != nil) || (vaultErr == nil && !reflect.DeepEqual(mine, theirs)) {
			ds = append(ds, Disagreement{Role: role, Path: p, Evaluator: mine, Vault: theirs})
		}
	}
	return ds
}

// capabilitiesOf is sys/capabilities for token on paths, asked with the
// caller's own token: an error of Vault's (a disabled entity: "invalid
// token") is returned with its message.
func capabilitiesOf(ctx context.Context, c *vaultapi.Client, token string, paths []string) (map[string][]string, error) {
	s, err := c.Logical().WriteWithContext(ctx, "sys/capabilities", map[string]any{"token": token, "paths": paths})
	if err != nil {
		var re *vaultapi.ResponseError
		if errors.As(err, &re) && re.StatusCode < 500 && len(re.Errors) > 0 {
			return nil, errors.New(strings.Join(re.Errors, "; "))
		}
		return nil, err
	}
	out := map[string][]string{}
	if s == nil {
		return out, nil
	}
	for k, v := range s.Data {
		l, _ := v.([]any)
		for _, x := range l {
			out[k] = append(out[k], fmt.Sprint(x))
		}
	}
	return out, nil
}

// vaultErrText is Vault's own message of an error answer, on one line.
func vaultErrText(err error) string {
	var re *vaultapi.ResponseError
	if errors.As(err, &re) && len(re.Errors) > 0 {
		return fmt.Sprintf("%d %s", re.StatusCode, strings.Join(re.Errors, "; "))
	}
	return err.Error()
}
