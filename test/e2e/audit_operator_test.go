//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	vaultapi "github.com/hashicorp/vault/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/cli"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

// auditManifests: a template whose policy documents mix per-role policies,
// Vault's identity templating (metadata list keys present and missing, the
// entity's name, an empty value), +, globs, and denies that
// win or lose across policies; four minions with different pillar roles.
const auditManifests = `apiVersion: minionvault.dev/v1alpha1
kind: VaultConnection
metadata:
  name: audit-vault
spec:
  address: %s
  auth:
    token:
      secretRef: {name: vault-token, namespace: minionvault-system}
---
apiVersion: v1
kind: Namespace
metadata:
  name: audit-e2e
  labels: {team: audit-e2e}
---
apiVersion: minionvault.dev/v1alpha1
kind: MinionTemplate
metadata:
  name: audit-e2e
spec:
  connectionRef: {name: audit-vault}
  policies:
    assign: ['audit/minions', 'audit/common', 'audit/{minion}', 'audit_role_{pillar[roles]}']
  metadata:
    entity:
      roles: '{pillar[roles]}'
      env: '{pillar[env]}'
  policyDocuments:
    - name: 'audit_role_{pillar[roles]}'
      rules:
        - path: 'salt/data/roles/{pillar[roles]}'
          capabilities: [read, list]
        - path: 'salt/metadata/roles/{pillar[roles]}/*'
          capabilities: [list]
        - path: 'salt/data/roles/{pillar[roles]}/secret'
          capabilities: [deny]
    - name: audit/minions
      rules:
        - path: 'salt/data/roles/{{identity.entity.metadata.roles__0}}'
          capabilities: [read]
        - path: 'salt/data/roles/{{identity.entity.metadata.roles__1}}/*'
          capabilities: [read, update]
        - path: 'salt/data/roles/{{identity.entity.metadata.roles__2}}'
          capabilities: [create]
        - path: 'salt/data/env/{{identity.entity.metadata.env}}'
          capabilities: [read]
        - path: 'salt/data/+/{{identity.entity.metadata.roles__0}}/shared'
          capabilities: [list]
        - path: 'salt/data/minions/{{identity.entity.name}}'
          capabilities: [read, update]
        - path: 'salt/data/roles/*'
          capabilities: [list]
        - path: 'salt/data/roles/db/*'
          capabilities: [deny]
    - name: audit/common
      rules:
        - path: 'salt/data/common'
          capabilities: [read]
        - path: 'salt/data/roles/ci'
          capabilities: [deny]
        - path: 'salt/data/+/web/*'
          capabilities: [delete]
  namespaceSelector:
    matchLabels: {team: audit-e2e}
  allowedPolicies: ['audit/*', 'audit_role_*']
%s`

const auditBinding = `---
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata:
  name: %[1]s
  namespace: audit-e2e
spec:
  minionID: %[1]s
  templateRef: {name: audit-e2e}
  grains: {id: %[1]s, os: Debian}
  pillar:
    roles: %[2]s
    env: '%[3]s'
`

// auditReader is exactly the read-only policy docs/audit.md documents for
// the online audit.
const auditReader = `path "sys/policies/acl" { capabilities = ["list"] }
path "sys/policies/acl/*" { capabilities = ["read"] }
path "sys/auth" { capabilities = ["read"] }
path "auth/` + testenv.AppRoleMount + `/role" { capabilities = ["list"] }
path "auth/` + testenv.AppRoleMount + `/role/*" { capabilities = ["read"] }
path "identity/entity/id" { capabilities = ["list"] }
path "identity/entity/id/*" { capabilities = ["read"] }
path "identity/group/id/*" { capabilities = ["read"] }
`

// TestAuditThroughTheOperator: MinionBindings made Ready by the operator,
// then `audit what-can` and `audit who-can`, online with a read-only token
// and offline from the same manifests, agree with Vault's own
// sys/capabilities for a token of a real AppRole login of each minion.
func TestAuditThroughTheOperator(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	minions := []auditMinion{
		{"aud-web", "[web]", "prod"},
		{"aud-db", "[db, web]", "prod"},
		{"aud-ci", "[ci, web, db]", "staging"},
		{"aud-cache", "[cache]", ""},
	}
	var bindings strings.Builder
	for _, m := range minions {
		fmt.Fprintf(&bindings, auditBinding, m.id, m.roles, m.env)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "fleet.yaml")
	s.must(os.WriteFile(file, []byte(fmt.Sprintf(auditManifests, s.env.Vault.Addr, bindings.String())), 0o600))
	s.applyFile(ctx, file)
	// The next tests share Vault and the cluster: the minions, and what
	// this test wrote by hand, go (before the operator stops).
	t.Cleanup(func() {
		_, _ = s.root.Logical().Delete("identity/group/name/audit-e2e-group")
		_ = s.root.Sys().DeletePolicy("audit-e2e-group")
		_ = s.root.Sys().DeletePolicy("audit-e2e-reader")
		s.must(s.c.DeleteAllOf(ctx, &v1alpha1.MinionBinding{}, client.InNamespace("audit-e2e")))
		for _, m := range minions {
			s.waitGone("audit-e2e", m.id)
		}
	})
	s.waitConnectionReady("audit-vault")
	for _, m := range minions {
		s.waitReady("audit-e2e", m.id)
	}

	paths := []string{
		"salt/data/roles", "salt/data/roles/web", "salt/data/roles/db", "salt/data/roles/ci", "salt/data/roles/cache",
		"salt/data/roles/web/x", "salt/data/roles/db/x", "salt/data/roles/ci/x", "salt/data/roles/cache/x",
		"salt/data/roles/web/secret", "salt/data/roles/db/secret", "salt/data/roles/cache/secret",
		"salt/metadata/roles/web/", "salt/metadata/roles/db/x",
		"salt/data/env/prod", "salt/data/env/staging", "salt/data/env/st*", "salt/data/env/stage2", "salt/data/env/s",
		"salt/data/x/web/shared", "salt/data/y/db/shared", "salt/data/z/cache/shared", "salt/data/x/web/other",
		"salt/data/common", "salt/data/common/x",
		"sys/mounts", "auth/token/lookup-self", "cubbyhole/x", "secret/data/x", "identity/entity/id/x",
	}
	for _, m := range minions {
		paths = append(paths, "salt/data/minions/salt_minion_"+m.id, "salt/data/minions/salt_minion_"+m.id+"/x")
	}

	// Vault's own answers, for a token of a real login of each minion.
	tokens := map[string]string{}
	for _, m := range minions {
		tokens[m.id] = s.minionToken(t, testenv.AppRoleMount, m.id)
	}
	want := map[string]map[string]string{} // role -> path -> answer
	askVault := func() {
		for _, m := range minions {
			want[m.id] = vaultCapabilities(t, s.root, tokens[m.id], paths)
		}
	}
	askVault()

	// The online audit, with a token of exactly the documented rights.
	s.must(s.root.Sys().PutPolicyWithContext(ctx, "audit-e2e-reader", auditReader))
	rt, err := s.root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{"audit-e2e-reader"}, NoDefaultPolicy: true, TTL: "30m"})
	s.must(err)
	t.Setenv("VAULT_ADDR", s.env.Vault.Addr)
	t.Setenv("VAULT_TOKEN", rt.Auth.ClientToken)
	// What Vault holds before the audits: they must log nobody in and make
	// no secret ID and no token.
	log := s.vaultAudit(t)
	reader := s.accessorOf(t, rt.Auth.ClientToken)
	mark := log.mark(t)
	secretIDs, tokenCount := s.secretIDCounts(t, minions...), s.tokenCount(t)
	type auditMode struct {
		name string
		args []string
	}
	// "salt/data/env/st*" is a literal "*", as sys/capabilities takes it:
	// what-can and who-can refuse it as a pattern without --literal.
	online := auditMode{"online", []string{"--vault", "--minion-mount", testenv.AppRoleMount, "--literal"}}
	offline := auditMode{"offline", []string{"-f", dir, "--literal"}}

	agreed, failed, compared := 0, 0, 0
	phase := ""
	compare := func(how, role, path, got string) {
		t.Helper()
		if w := want[role][path]; got != w {
			failed++
			t.Errorf("%s%s: minion %s, path %q: audit %s, Vault %s", phase, how, role, path, got, w)
			return
		}
		agreed++
	}
	audit := func(modes ...auditMode) {
		t.Helper()
		compared += 2 * len(modes) * len(minions) * len(paths)
		for _, mode := range modes {
			for _, m := range minions {
				args := append([]string{"what-can", m.id}, mode.args...)
				for _, p := range paths {
					args = append(args, "--path", p)
				}
				out := auditJSON(t, args...)
				var r struct{ Paths map[string]json.RawMessage }
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatalf("%v: %v\n%s", args, err, out)
				}
				if len(r.Paths) != len(paths) {
					t.Errorf("%s what-can %s: %d paths answered, %d asked", mode.name, m.id, len(r.Paths), len(paths))
				}
				for _, p := range paths {
					compare(mode.name+" what-can", m.id, p, answer(r.Paths[p]))
				}
			}
			for _, p := range paths {
				args := append([]string{"who-can", p}, mode.args...)
				out := auditJSON(t, args...)
				var r struct {
					Minions []struct {
						Role         string
						Capabilities []string
						Error        string
					}
				}
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatalf("%v: %v\n%s", args, err, out)
				}
				got := map[string]string{}
				for _, e := range r.Minions {
					if _, ours := want[e.Role]; !ours {
						continue
					}
					if _, twice := got[e.Role]; twice {
						t.Errorf("%s who-can %q: minion %s listed twice", mode.name, p, e.Role)
					}
					switch {
					case e.Error != "":
						got[e.Role] = "error"
					default:
						got[e.Role] = strings.Join(e.Capabilities, ",")
					}
				}
				for _, m := range minions {
					g, ok := got[m.id]
					if !ok || g == "" {
						g = "deny" // those with ["deny"] may be left out
					}
					compare(mode.name+" who-can", m.id, p, g)
				}
			}
		}
	}
	audit(online, offline)

	// Vault's own state beyond the manifests, seen online only (offline
	// cannot see identity groups nor a disabled entity, docs/audit.md): one
	// minion's entity in a group with a policy, another's entity disabled
	// (Vault then answers an error for its token, and so must the audit).
	s.must(s.root.Sys().PutPolicyWithContext(ctx, "audit-e2e-group", `path "salt/data/group/*" { capabilities = ["read"] }
path "salt/data/roles/web" { capabilities = ["deny"] }`))
	webEntity := fmt.Sprint(s.vaultRead("identity/entity/name/salt_minion_aud-web")["id"])
	_, err = s.root.Logical().WriteWithContext(ctx, "identity/group/name/audit-e2e-group", map[string]any{
		"policies": []string{"audit-e2e-group"}, "member_entity_ids": []string{webEntity}})
	s.must(err)
	cacheEntity := fmt.Sprint(s.vaultRead("identity/entity/name/salt_minion_aud-cache")["id"])
	_, err = s.root.Logical().WriteWithContext(ctx, "identity/entity/id/"+cacheEntity, map[string]any{"disabled": true})
	s.must(err)
	paths = append(paths, "salt/data/group/x")
	askVault()
	if want["aud-web"]["salt/data/group/x"] != "read" || want["aud-web"]["salt/data/roles/web"] != "deny" || want["aud-cache"]["salt/data/common"] != "error" {
		t.Fatalf("Vault did not take the group or the disabled entity: %v %v %v",
			want["aud-web"]["salt/data/group/x"], want["aud-web"]["salt/data/roles/web"], want["aud-cache"]["salt/data/common"])
	}
	phase = "with a group and a disabled entity: "
	audit(online)
	_, err = s.root.Logical().WriteWithContext(ctx, "identity/entity/id/"+cacheEntity, map[string]any{"disabled": false})
	s.must(err)
	_, err = s.root.Logical().DeleteWithContext(ctx, "identity/group/name/audit-e2e-group")
	s.must(err)

	log.settle(t)
	// The online audit only reads: not even a lookup (a POST).
	if calls := log.since(t, mark, reader); len(calls.Paths) != 0 {
		for _, w := range calls.Paths {
			t.Errorf("the online audit wrote to Vault: %s", w)
		}
	}
	if got := s.secretIDCounts(t, minions...); !maps.Equal(got, secretIDs) {
		t.Errorf("secret IDs per minion before the audits %v, after %v", secretIDs, got)
	}
	if got := s.tokenCount(t); got != tokenCount {
		t.Errorf("%d tokens before the audits, %d after", tokenCount, got)
	}
	if failed > 0 {
		for _, m := range minions {
			var row []string
			for _, p := range paths {
				row = append(row, p+"="+want[m.id][p])
			}
			t.Logf("Vault now for %s: %s", m.id, strings.Join(row, " "))
		}
	}
	t.Logf("%d answers agree with Vault's sys/capabilities (%d minions, %d paths, what-can and who-can, online and offline, then online with a group and a disabled entity), %d disagree",
		agreed, len(minions), len(paths), failed)
	if agreed+failed != compared {
		t.Fatalf("%d answers compared, want %d", agreed+failed, compared)
	}
}

// secretIDCounts is the number of secret IDs of each minion's role.
func (s *suite) secretIDCounts(t *testing.T, minions ...auditMinion) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range minions {
		sec, err := s.root.Logical().List("auth/" + testenv.AppRoleMount + "/role/" + m.id + "/secret-id")
		s.must(err)
		if sec != nil {
			out[m.id] = len(strs(sec.Data["keys"]))
		}
	}
	return out
}

// tokenCount is the number of tokens in Vault.
func (s *suite) tokenCount(t *testing.T) int {
	t.Helper()
	sec, err := s.root.Logical().List("auth/token/accessors")
	s.must(err)
	return len(strs(sec.Data["keys"]))
}

type auditMinion struct{ id, roles, env string }

// minionToken logs in as the minion would (a new secret ID) and returns
// its token.
func (s *suite) minionToken(t *testing.T, mount, role string) string {
	t.Helper()
	roleID := fmt.Sprint(s.vaultRead("auth/" + mount + "/role/" + role + "/role-id")["role_id"])
	sec, err := s.anon(t).Logical().Write("auth/"+mount+"/login", map[string]any{"role_id": roleID, "secret_id": s.secretID(t, mount, role)})
	s.must(err)
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		t.Fatal("login: no token")
	}
	return sec.Auth.ClientToken
}

// vaultCapabilities is Vault's sys/capabilities for token on each path,
// as the capabilities joined by commas, or "error" when Vault refuses.
func vaultCapabilities(t *testing.T, root *vaultapi.Client, token string, paths []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	sec, err := root.Logical().Write("sys/capabilities", map[string]any{"token": token, "paths": paths})
	if err != nil {
		for _, p := range paths {
			out[p] = "error"
		}
		return out
	}
	for _, p := range paths {
		l, ok := sec.Data[p].([]any)
		if !ok {
			t.Fatalf("sys/capabilities: no answer for %q: %v", p, sec.Data)
		}
		var caps []string
		for _, c := range l {
			caps = append(caps, fmt.Sprint(c))
		}
		slices.Sort(caps)
		out[p] = strings.Join(caps, ",")
	}
	return out
}

// answer is one what-can answer as vaultCapabilities writes Vault's.
func answer(raw json.RawMessage) string {
	var caps []string
	if json.Unmarshal(raw, &caps) == nil && caps != nil {
		return strings.Join(caps, ",")
	}
	var e struct{ Error string }
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return "error"
	}
	return "unreadable answer " + string(raw)
}

// auditJSON runs `minionvault audit ARGS -o json` in-process; exit 0.
func auditJSON(t *testing.T, args ...string) []byte {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append(append([]string{"audit"}, args...), "-o", "json")
	if code := cli.Main(full, &out, &errOut); code != 0 {
		t.Fatalf("minionvault %s: exit %d\n%s%s", strings.Join(full, " "), code, out.String(), errOut.String())
	}
	return out.Bytes()
}
