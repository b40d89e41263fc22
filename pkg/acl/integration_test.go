//go:build integration

package acl

// The evaluator against a real Vault dev server (internal/testing/testenv, Vault
// only): random policies (globs, +, deny, overlaps across policies,
// templated paths with present and missing keys, alias and group
// selectors, KV v2 paths) are written to Vault, minions log in through
// AppRole with entities carrying metadata, and every answer of
// sys/capabilities for random paths must be the evaluator's, errors
// included. ACL_SEED=N replays a run; the seed is printed either way.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{NoKubernetes: true})
}

// liveCase is one minion of one round: what Vault holds for it and its
// token.
type liveCase struct {
	role     string
	token    string
	subject  Subject
	disabled bool
}

func integrationSeed(t *testing.T) uint64 {
	if s := os.Getenv("ACL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ACL_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

func TestIntegrationAgreesWithVault(t *testing.T) {
	ctx := context.Background()
	root := testenv.Get(t).Vault.Client
	seed := integrationSeed(t)
	t.Logf("seed %d (ACL_SEED=%d replays it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 18))

	health, err := root.Sys().HealthWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mode, err := ModeForVersion(health.Version)
	if err != nil {
		t.Fatal(err)
	}
	accessor := mountAccessor(t, root, testenv.AppRoleMount)
	def, err := root.Sys().GetPolicyWithContext(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}

	rounds, minions, paths := 12, 5, 60
	if testing.Short() {
		rounds = 3
	}
	agreed, mismatches, errs, granting := 0, 0, 0, 0
	for round := range rounds {
		prefix := fmt.Sprintf("acl%d-%d-", seed%100000, round)
		docs := map[string]string{"default": def}
		var names []string
		for i := range 2 + r.IntN(3) {
			name := fmt.Sprintf("%sp%d", prefix, i)
			doc := randomPolicy(r) + strings.ReplaceAll(livePolicyExtras(r, accessor), "GROUP", prefix+"group")
			if err := root.Sys().PutPolicyWithContext(ctx, name, doc); err != nil {
				// Vault refused it: so must the parser of its release.
				if _, perr := ParseMode(name, doc, mode); perr == nil {
					t.Fatalf("seed %d: Vault refuses policy %s that Parse accepts: %v\n%s", seed, name, err, doc)
				}
				continue
			}
			if _, perr := ParseMode(name, doc, mode); perr != nil {
				t.Fatalf("seed %d: Parse refuses policy %s that Vault accepts: %v\n%s", seed, name, perr, doc)
			}
			docs[name] = doc
			names = append(names, name)
		}
		group := createGroup(t, root, prefix, r, names)
		ev, err := New(docs, Options{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		for m := range minions {
			c := loginMinion(t, root, r, accessor, fmt.Sprintf("%sm%d", prefix, m), names, group)
			p := ev.Prepare(c.subject)
			// The default policy's templated rules, and its globs.
			ps := []string{"identity/entity/id/" + c.subject.Entity.ID, "identity/entity/name/" + c.subject.Entity.Name,
				"cubbyhole/x", "sys/tools/hash/sha2-256", "identity/oidc/provider/p/authorize"}
			for len(ps) < paths {
				// A path named like a top-level key of Vault's response
				// ("data", ...) would overwrite it: Vault copies the
				// answer's data to the top level (injectDataIntoTopRoutes).
				if path := liveRandomPath(r, c.role); !slices.Contains(ps, path) && !slices.Contains(responseKeys, path) {
					ps = append(ps, path)
				}
			}
			got, verr := vaultCapabilities(root, c.token, ps)
			for _, path := range ps {
				d := p.Check(path)
				if verr != nil || d.Err != nil {
					if (verr == nil) != (d.Err == nil) || !sameError(verr, d.Err) {
						mismatches++
						t.Errorf("seed %d role %s: Vault error %v, evaluator error %v", seed, c.role, verr, d.Err)
					} else {
						agreed++
						errs++
					}
					continue
				}
				if want := got[path]; !reflect.DeepEqual(d.Capabilities(), want) {
					mismatches++
					if mismatches <= 10 {
						t.Errorf("seed %d role %s path %q: Vault %v, evaluator %v\nexplanation %+v\nsubject %+v\npolicies:\n%s",
							seed, c.role, path, want, d.Capabilities(), p.Explain(path), c.subject, fmtDocs(docs))
					}
					continue
				}
				agreed++
				if d.Caps.Granted() != 0 {
					granting++
				}
			}
		}
	}
	t.Logf("%d answers agree (%d errors, %d granting something), %d differ", agreed, errs, granting, mismatches)
	if mismatches > 0 {
		t.Fatalf("seed %d: %d of %d answers differ from Vault", seed, mismatches, agreed+mismatches)
	}
}

// sameError reports whether Vault's error is the evaluator's: 400 "invalid
// token" for a disabled entity, 500 "error parsing templated policy" for a
// templated policy that no longer parses.
func sameError(vaultErr, evalErr error) bool {
	switch {
	case errors.Is(evalErr, ErrInvalidToken):
		return strings.HasPrefix(vaultErr.Error(), "400 ") && strings.Contains(vaultErr.Error(), "invalid token")
	case errors.Is(evalErr, ErrTemplatedPolicy):
		return strings.HasPrefix(vaultErr.Error(), "500 ") && strings.Contains(vaultErr.Error(), "error parsing templated policy")
	}
	return true
}

// livePolicyExtras adds rules only a live server can render: the AppRole
// alias's role_name, a group's metadata, an alias on a mount that does not
// exist, KV v2 paths.
func livePolicyExtras(r *rand.Rand, accessor string) string {
	extras := []string{
		rule("secret/data/{{identity.entity.aliases."+accessor+".metadata.role_name}}/*", "read"),
		rule("secret/metadata/{{identity.entity.aliases."+accessor+".name}}", "list"),
		rule("secret/data/g/{{identity.groups.names.GROUP.metadata.gk}}", "read", "update"),
		rule("secret/data/{{identity.entity.aliases.auth_nope_1.name}}", "read"),
		rule("secret/data/+/a*", "create"),
		rule("secret/metadata/*", "list"),
		rule("secret/data/{{identity.entity.metadata.k1}}/x", "deny"),
		"path \"a/b\" {\n  policy = \"write\"\n}\n",
		"path \"a/*\" {\n  capabilities = [\"list\"]\n  policy = \"read\"\n}\n",
		"path \"a/+\" {\n  policy = \"deny\"\n}\n",
		"path \"ab\" {\n  capabilities = [\"deny\", \"bogus\"]\n}\n",
		"path \"secret/data/x\" {\n  capabilities = [\"create\", \"update\"]\n  allowed_parameters = { \"k\" = [] }\n}\n",
		rule("a/+a/*", "recover", "subscribe"),
	}
	var b strings.Builder
	for range r.IntN(3) {
		b.WriteString(extras[r.IntN(len(extras))])
	}
	return b.String()
}

var responseKeys = []string{"data", "auth", "warnings", "wrap_info", "lease_id", "renewable", "lease_duration", "request_id", "mount_type", "capabilities"}

func liveRandomPath(r *rand.Rand, role string) string {
	if r.IntN(3) == 0 {
		mid := []string{"data", "metadata"}[r.IntN(2)]
		tail := []string{"a", "ab", "x", "web01", "a/x", "ab/x", "g/gv", "g/a*", role, role + "/x"}[r.IntN(10)]
		p := "secret/" + mid + "/" + tail
		if r.IntN(4) == 0 {
			p += "/"
		}
		return p
	}
	return randomPath(r)
}

func mountAccessor(t *testing.T, c *vaultapi.Client, mount string) string {
	t.Helper()
	auths, err := c.Sys().ListAuth()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := auths[strings.TrimSuffix(mount, "/")+"/"]
	if !ok {
		t.Fatalf("no auth mount %s", mount)
	}
	return m.Accessor
}

// createGroup makes an internal group named GROUP's stand-in for this
// round, with metadata and maybe one of the round's policies; minions join
// it at random.
func createGroup(t *testing.T, c *vaultapi.Client, prefix string, r *rand.Rand, policies []string) string {
	t.Helper()
	data := map[string]any{"name": prefix + "group", "metadata": map[string]string{"gk": []string{"gv", "a*", "x/y"}[r.IntN(3)]}}
	if len(policies) > 0 && r.IntN(2) == 0 {
		data["policies"] = []string{policies[r.IntN(len(policies))]}
	}
	s, err := c.Logical().Write("identity/group", data)
	if err != nil {
		t.Fatal(err)
	}
	return s.Data["id"].(string)
}

// loginMinion creates an AppRole role with random token policies, an
// entity with random metadata (present, missing, globs, slashes, empty)
// and an alias on the role ID, logs in, and reads back what Vault holds.
func loginMinion(t *testing.T, c *vaultapi.Client, r *rand.Rand, accessor, name string, policies []string, groupID string) liveCase {
	t.Helper()
	mount := "auth/" + testenv.AppRoleMount
	var tok []string
	for _, p := range policies {
		if r.IntN(2) == 0 {
			tok = append(tok, strings.ToUpper(p[:1])+p[1:])
		}
	}
	if r.IntN(6) == 0 {
		tok = append(tok, "no-such-policy")
	}
	noDefault := r.IntN(5) == 0
	if _, err := c.Logical().Write(mount+"/role/"+name, map[string]any{
		"token_policies": tok, "token_no_default_policy": noDefault, "token_ttl": "10m", "token_num_uses": 0,
	}); err != nil {
		t.Fatal(err)
	}
	s, err := c.Logical().Read(mount + "/role/" + name + "/role-id")
	if err != nil {
		t.Fatal(err)
	}
	roleID := s.Data["role_id"].(string)

	vals := []string{"a", "b", "ab", "a*", "+", "x/y", "ab+", "", "data", "web01"}
	md := map[string]string{"minion-id": name}
	for _, k := range []string{"k1", "k2", "roles__0"} {
		if r.IntN(4) > 0 {
			md[k] = vals[r.IntN(len(vals))]
		}
	}
	entity := map[string]any{"name": name, "metadata": md}
	if len(policies) > 0 && r.IntN(4) == 0 {
		entity["policies"] = []string{policies[r.IntN(len(policies))]}
	}
	s, err = c.Logical().Write("identity/entity", entity)
	if err != nil {
		t.Fatal(err)
	}
	entityID := s.Data["id"].(string)
	if _, err := c.Logical().Write("identity/entity-alias", map[string]any{
		"name": roleID, "mount_accessor": accessor, "canonical_id": entityID,
	}); err != nil {
		t.Fatal(err)
	}
	if r.IntN(3) == 0 {
		if _, err := c.Logical().Write("identity/group/id/"+groupID, map[string]any{"member_entity_ids": appendMember(t, c, groupID, entityID)}); err != nil {
			t.Fatal(err)
		}
	}
	s, err = c.Logical().Write(mount+"/role/"+name+"/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	anon, err := c.Clone()
	if err != nil {
		t.Fatal(err)
	}
	anon.ClearToken()
	login, err := anon.Logical().Write(mount+"/login", map[string]any{"role_id": roleID, "secret_id": s.Data["secret_id"]})
	if err != nil {
		t.Fatal(err)
	}
	lc := liveCase{role: name, token: login.Auth.ClientToken}
	if want := LoginPolicies(tok, !noDefault); !reflect.DeepEqual(nonNil(login.Auth.TokenPolicies), nonNil(want)) {
		t.Fatalf("login token policies %v, LoginPolicies %v", login.Auth.TokenPolicies, want)
	}
	if r.IntN(12) == 0 {
		if _, err := c.Logical().Write("identity/entity/id/"+entityID, map[string]any{"disabled": true}); err != nil {
			t.Fatal(err)
		}
		lc.disabled = true
	}
	lc.subject = Subject{TokenPolicies: login.Auth.TokenPolicies}
	lc.subject.Entity, lc.subject.Groups = readEntity(t, c, entityID)
	return lc
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func appendMember(t *testing.T, c *vaultapi.Client, groupID, entityID string) []string {
	t.Helper()
	s, err := c.Logical().Read("identity/group/id/" + groupID)
	if err != nil {
		t.Fatal(err)
	}
	members := []string{entityID}
	for _, m := range anyList(s.Data["member_entity_ids"]) {
		members = append(members, m)
	}
	return members
}

// readEntity reads the entity and its groups as Vault holds them now.
func readEntity(t *testing.T, c *vaultapi.Client, id string) (*Entity, []Group) {
	t.Helper()
	s, err := c.Logical().Read("identity/entity/id/" + id)
	if err != nil {
		t.Fatal(err)
	}
	e := &Entity{
		ID: id, Name: s.Data["name"].(string), Metadata: anyMap(s.Data["metadata"]),
		Policies: anyList(s.Data["policies"]), Disabled: s.Data["disabled"] == true,
	}
	for _, a := range s.Data["aliases"].([]any) {
		am := a.(map[string]any)
		e.Aliases = append(e.Aliases, Alias{
			ID: am["id"].(string), Name: am["name"].(string), MountAccessor: am["mount_accessor"].(string),
			Metadata: anyMap(am["metadata"]), CustomMetadata: anyMap(am["custom_metadata"]),
		})
	}
	var groups []Group
	ids := append(anyList(s.Data["direct_group_ids"]), anyList(s.Data["inherited_group_ids"])...)
	for _, gid := range ids {
		g, err := c.Logical().Read("identity/group/id/" + gid)
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, Group{ID: gid, Name: g.Data["name"].(string), NamespaceID: fmt.Sprint(g.Data["namespace_id"]),
			Metadata: anyMap(g.Data["metadata"]), Policies: anyList(g.Data["policies"])})
	}
	return e, groups
}

func anyMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}

func anyList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// vaultCapabilities asks sys/capabilities for several paths at once (more
// than one, so that the legacy "capabilities" key is absent).
func vaultCapabilities(c *vaultapi.Client, token string, paths []string) (map[string][]string, error) {
	s, err := c.Logical().Write("sys/capabilities", map[string]any{"token": token, "paths": paths})
	if err != nil {
		var re *vaultapi.ResponseError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("%d %v", re.StatusCode, re.Errors)
		}
		return nil, err
	}
	out := map[string][]string{}
	for k, v := range s.Data {
		out[k] = anyList(v)
	}
	return out, nil
}

// TestIntegrationWriteParity writes documents Vault accepts and refuses,
// and Parse must agree on each (rows 44 and 45 of the specification, and
// the HCL and key checks).
func TestIntegrationWriteParity(t *testing.T) {
	ctx := context.Background()
	root := testenv.Get(t).Vault.Client
	// The parser decides as the server's release does (recover from
	// 1.20.0, duplicate attributes refused from 1.21.0): the compatibility
	// suite runs this against every tested line.
	health, err := root.Sys().HealthWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mode, err := ModeForVersion(health.Version)
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{
		`path "a" { capabilities = ["deny", "bogus"] }`,
		`path "a" { capabilities = ["bogus", "deny"] }`,
		`path "a+*" { capabilities = ["read"] }`,
		`path "a/+/*" { capabilities = ["read"] }`,
		`path "x/{{identity.entity.name}}}}" { capabilities = ["read"] }`,
		`path "x/}}{{identity.entity.name}}" { capabilities = ["read"] }`,
		`path "x/{{identity.entity.foo}}" { capabilities = ["read"] }`,
		`path "x/{{identity.entity.name}}+*" { capabilities = ["read"] }`,
		`path "a" { capabilities = ["read"] nope = 1 }`,
		`paths "a" { capabilities = ["read"] }`,
		`path "a" { policy = "all" }`,
		`path "a" { policy = "deny" capabilities = ["bogus"] }`,
		`path "a" { capabilities = "read" }`,
		`path "a" { capabilities = ["read"] capabilities = ["list"] }`,
		`path "a" { capabilities = ["patch", "subscribe", "recover", "sudo"] }`,
		`path "a" { capabilities = ["read"] min_wrapping_ttl = "1h" max_wrapping_ttl = "1m" }`,
		`path "a" { capabilities = ["read"] min_wrapping_ttl = "soon" }`,
		`path "a" { capabilities = ["deny"] min_wrapping_ttl = "soon" }`,
		`path "a" { capabilities = ["read"] subscribe_event_types = ["kv*"] }`,
		`path "a" { capabilities = ["read"] comment = "x" }`,
		`path "a" { capabilities = ["read"] required_parameters = ["x"] denied_parameters = { "y" = ["1"] } }`,
		`name = "x"` + "\n" + `path "a" { capabilities = ["read"] }`,
		`path "a" {`,
		`{"path": {"a/b": {"capabilities": ["read"]}}}`,
		`{"path": {"a/b": {"capabilities": ["bogus"]}}}`,
		`path = "a"`,
	}
	for i, doc := range docs {
		name := fmt.Sprintf("acl-parity-%d", i)
		werr := root.Sys().PutPolicyWithContext(ctx, name, doc)
		_, perr := ParseMode(name, doc, mode)
		if (werr == nil) != (perr == nil) {
			t.Errorf("Vault %s: %s: Vault %v, Parse %v", health.Version, doc, werr, perr)
		}
	}
}

// TestIntegrationSpecRows puts the rows of section 2 of the specification
// to the real server: the same policies, a token built as the row says
// (an AppRole login with the row's entity, a token without an entity, the
// root token), and sys/capabilities must give the row's answer. Rows that
// need another Vault version, a clock, or a token Vault cannot make are
// left out.
func TestIntegrationSpecRows(t *testing.T) {
	ctx := context.Background()
	root := testenv.Get(t).Vault.Client
	accessor := mountAccessor(t, root, testenv.AppRoleMount)
	mount := "auth/" + testenv.AppRoleMount
	for _, c := range specCases() {
		toks := c.tokenPolicies()
		ent := c.entity
		if ent == nil {
			ent = c.subject.Entity
		}
		switch {
		case c.mode != (Mode{}), strings.HasPrefix(c.row, "47"), c.subject.NoIdentityPolicies:
			continue
		case slices.Contains(toks, "root") && ent != nil:
			continue
		}
		t.Run(c.row, func(t *testing.T) {
			for name, doc := range c.docs {
				if SanitizeName(name) == "default" {
					continue // the server's own, the same text
				}
				if err := root.Sys().PutPolicyWithContext(ctx, name, strings.ReplaceAll(doc, specApprole, accessor)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = root.Sys().DeletePolicy(name) })
			}
			var token string
			switch {
			case slices.Contains(toks, "root"):
				token = root.Token()
			case ent == nil && len(toks) > 0:
				s, err := root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: toks, NoDefaultPolicy: true, TTL: "10m"})
				if err != nil {
					t.Fatal(err)
				}
				token = s.Auth.ClientToken
			default:
				token = specLogin(t, root, mount, accessor, toks, ent, c.subject.Groups)
			}
			got, err := vaultCapabilities(root, token, []string{c.path, "zz/unused"})
			if c.wantErr != nil {
				status, msg := "", c.wantErr.Error()
				switch {
				case errors.Is(c.wantErr, ErrInvalidToken), errors.Is(c.wantErr, ErrMissingPath):
					status = "400 "
				case errors.Is(c.wantErr, ErrTemplatedPolicy):
					status = "500 "
				}
				if err == nil || !strings.HasPrefix(err.Error(), status) || !strings.Contains(err.Error(), msg) {
					t.Fatalf("Vault answers %v, %v; the row says %v", got, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got[c.path], c.want) {
				t.Fatalf("Vault answers %v, the row says %v", got[c.path], c.want)
			}
		})
	}
}

// specLogin makes the row's entity (metadata, policies, groups, an alias on
// the AppRole mount), logs in with a role named like the entity, and
// disables the entity afterwards when the row says so.
func specLogin(t *testing.T, c *vaultapi.Client, mount, accessor string, toks []string, ent *Entity, groups []Group) string {
	t.Helper()
	role := "spec-role"
	if ent != nil && ent.Name != "" {
		role = ent.Name
	}
	if _, err := c.Logical().Write(mount+"/role/"+role, map[string]any{
		"token_policies": toks, "token_no_default_policy": true, "token_ttl": "10m",
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Logical().Delete(mount + "/role/" + role) })
	s, err := c.Logical().Read(mount + "/role/" + role + "/role-id")
	if err != nil {
		t.Fatal(err)
	}
	roleID := s.Data["role_id"].(string)
	var entityID string
	if ent != nil {
		data := map[string]any{"name": ent.Name, "metadata": ent.Metadata}
		if len(ent.Policies) > 0 {
			data["policies"] = ent.Policies
		}
		s, err := c.Logical().Write("identity/entity", data)
		if err != nil {
			t.Fatal(err)
		}
		entityID = s.Data["id"].(string)
		t.Cleanup(func() { _, _ = c.Logical().Delete("identity/entity/id/" + entityID) })
		if _, err := c.Logical().Write("identity/entity-alias", map[string]any{
			"name": roleID, "mount_accessor": accessor, "canonical_id": entityID,
		}); err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			s, err := c.Logical().Write("identity/group", map[string]any{
				"name": g.Name, "policies": g.Policies, "metadata": g.Metadata, "member_entity_ids": []string{entityID},
			})
			if err != nil {
				t.Fatal(err)
			}
			id := s.Data["id"].(string)
			t.Cleanup(func() { _, _ = c.Logical().Delete("identity/group/id/" + id) })
		}
	}
	s, err = c.Logical().Write(mount+"/role/"+role+"/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	anon, err := c.Clone()
	if err != nil {
		t.Fatal(err)
	}
	anon.ClearToken()
	login, err := anon.Logical().Write(mount+"/login", map[string]any{"role_id": roleID, "secret_id": s.Data["secret_id"]})
	if err != nil {
		t.Fatal(err)
	}
	if ent == nil {
		// The login made an entity: remove it with the row.
		id := login.Auth.EntityID
		t.Cleanup(func() { _, _ = c.Logical().Delete("identity/entity/id/" + id) })
	}
	if ent != nil && ent.Disabled {
		if _, err := c.Logical().Write("identity/entity/id/"+entityID, map[string]any{"disabled": true}); err != nil {
			t.Fatal(err)
		}
	}
	return login.Auth.ClientToken
}
