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
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/cli"
	"github.com/minionvault/minion-vault-operator/internal/importer"
	"github.com/minionvault/minion-vault-operator/internal/mastercheck"
	"github.com/minionvault/minion-vault-operator/internal/saltext"
	"github.com/minionvault/minion-vault-operator/internal/testing/saltmaster"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// The Salt master's side of the test: the mount, KV mount and names of
// the minions it issues for.
const (
	smMount = "salt-master-e2e"
	smKV    = "sm-kv"
	smNS    = "sm"
)

// smQuickstartPolicy is saltext-vault's quickstart AppRole policy for the
// master (docs/topics/quickstart.md), on the test's mount: every fight of
// a master beside the operator needs one of its paths.
const smQuickstartPolicy = `
path "auth/` + smMount + `/role" { capabilities = ["list"] }
path "auth/` + smMount + `/role/*" { capabilities = ["read", "create", "update", "delete"] }
path "sys/auth/` + smMount + `" { capabilities = ["read", "sudo"] }
path "identity/entity/name/salt_minion_*" { capabilities = ["read", "create", "update", "delete"] }
path "identity/entity-alias" { capabilities = ["create", "update"] }
path "identity/lookup/entity" { capabilities = ["create", "update"] }
`

// smTemplate is the operator's template: the master's default entity name,
// a policy per minion reading its own KV path and one per role.
func smTemplate() *v1alpha1.MinionTemplate {
	tpl := minionTemplate("sm", "sm-vault", smMount, "sm")
	tpl.Spec.EntityName = "salt_minion_{minion}"
	tpl.Spec.Metadata = &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}}
	tpl.Spec.PillarPaths = []string{smKV + "/minions/{minion}", smKV + "/roles/{pillar[roles]}"}
	tpl.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
		{Name: "sm_minion_{minion}", Rules: []v1alpha1.PolicyRule{{Path: smKV + "/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}},
		{Name: "sm_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{{Path: smKV + "/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}},
	}
	return tpl
}

// saltMaster is a replay of a Salt master: saltext-vault 1.8.0's issuing
// calls (internal/testing/saltmaster) with its own Vault token, a clock the test
// moves, and the minions' pillar as the master compiles it.
type saltMaster struct {
	*saltmaster.Master
	accessor string
	now      time.Time
}

// newSaltMaster gives a master a token of policy and the configuration
// config (a master config file's YAML), its vault:auth:token filled in.
func (s *suite) newSaltMaster(t *testing.T, policy, config string, pillar map[string][]string) *saltMaster {
	t.Helper()
	tok, err := s.root.Auth().Token().CreateWithContext(context.Background(), &vaultapi.TokenCreateRequest{Policies: []string{policy}, TTL: "2h"})
	s.must(err)
	config = strings.ReplaceAll(config, "MASTER-TOKEN", tok.Auth.ClientToken)
	config = strings.ReplaceAll(config, "VAULT-ADDR", s.env.Vault.Addr)
	cfg, err := saltext.NewConfigFromMasterYAML([]byte(config))
	s.must(err)
	m := &saltMaster{Master: saltmaster.NewMaster(cfg, nil), accessor: tok.Auth.Accessor, now: time.Now()}
	m.Now = func() time.Time { return m.now }
	m.MinionData = func(minion string, _ bool) (value.Value, value.Value, error) {
		roles := make([]value.Value, 0, len(pillar[minion]))
		for _, r := range pillar[minion] {
			roles = append(roles, value.NewString(r))
		}
		return value.NewMap([]value.Pair{{Key: value.NewString("id"), Val: value.NewString(minion)}}),
			value.NewMap([]value.Pair{{Key: value.NewString("roles"), Val: value.NewList(roles)}}), nil
	}
	return m
}

// issue replays what a minion's credential request does: get_config and
// generate_secret_id through the master, then the minion's wrapped login.
// The minion is logged in after it (its pillar reads use its token).
func (s *suite) issue(t *testing.T, m *saltMaster, minion string, impersonated bool) (*saltmaster.Minion, *saltmaster.Login, error) {
	t.Helper()
	conf, err := m.GetConfig(minion, impersonated, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("get_config: %w", err)
	}
	sec, err := m.GenerateSecretID(minion, impersonated, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("generate_secret_id: %w", err)
	}
	wrappedRoleID := saltmaster.WrapToken(conf, "auth", "role_id")
	wrappedSecretID := saltmaster.WrapToken(sec)
	if wrappedRoleID == "" || wrappedSecretID == "" {
		return nil, nil, fmt.Errorf("no wrapped role ID or secret ID in %v / %v", conf, sec)
	}
	mi := saltmaster.NewMinion(minion, smMount, saltmaster.Endpoint{Address: s.env.Vault.Addr})
	login, err := mi.Login(wrappedRoleID, wrappedSecretID)
	return mi, login, err
}

// issued is issue for the calls whose outcome is its error only.
func (s *suite) issued(t *testing.T, m *saltMaster, minion string, impersonated bool) error {
	t.Helper()
	_, _, err := s.issue(t, m, minion, impersonated)
	return err
}

func readyReason(b *v1alpha1.MinionBinding) string {
	if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		return c.Reason
	}
	return ""
}

// masterCheck runs `minionvault master-check --vault` as an administrator
// would: the master's configuration, the cluster's template and bindings as
// manifests, the checking token (root here) reading the roles, and the
// master token's accessor.
func (s *suite) masterCheck(t *testing.T, config string, m *saltMaster, minions ...string) (cli.MasterCheckResult, int) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	var docs []string
	add := func(kind string, obj any) {
		raw, err := yaml.Marshal(obj)
		s.must(err)
		docs = append(docs, "apiVersion: minionvault.dev/v1alpha1\nkind: "+kind+"\n"+string(raw))
	}
	tpl := &v1alpha1.MinionTemplate{}
	s.must(s.c.Get(ctx, types.NamespacedName{Name: "sm"}, tpl))
	add("MinionTemplate", tpl)
	for _, mi := range minions {
		add("MinionBinding", s.binding(smNS, mi))
	}
	manifests, conf := filepath.Join(dir, "manifests.yaml"), filepath.Join(dir, "vault.conf")
	s.must(os.WriteFile(manifests, []byte(strings.Join(docs, "---\n")), 0o644))
	s.must(os.WriteFile(conf, []byte(config), 0o644))
	t.Setenv("VAULT_TOKEN", s.root.Token())
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"master-check", "--config", conf, "-f", manifests, "--vault", s.env.Vault.Addr, "--master-accessor", m.accessor, "-o", "json"}, &out, &errOut)
	var res cli.MasterCheckResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("master-check: exit %d, %v\n%s\n%s", code, err, out.String(), errOut.String())
	}
	return res, code
}

// smSnapshot is what the operator owns of a minion, as Vault has it.
type smSnapshot struct {
	role     map[string]any
	metadata map[string]string
	aliases  []string
}

func (s *suite) smSnapshot(t *testing.T, minion string) smSnapshot {
	t.Helper()
	snap := smSnapshot{role: s.vaultRead("auth/" + smMount + "/role/" + minion)}
	if e := s.vaultRead("identity/entity/name/salt_minion_" + minion); e != nil {
		snap.metadata = rawMetadataOf(e)
		for _, a := range e["aliases"].([]any) {
			a := a.(map[string]any)
			snap.aliases = append(snap.aliases, fmt.Sprint(a["mount_path"], a["name"]))
		}
	}
	return snap
}

func (s *suite) smSnapshots(t *testing.T, minions []string) map[string]smSnapshot {
	t.Helper()
	out := map[string]smSnapshot{}
	for _, mi := range minions {
		out[mi] = s.smSnapshot(t, mi)
	}
	return out
}

// unchanged fails for each minion whose objects differ from before.
func (s *suite) unchanged(t *testing.T, before map[string]smSnapshot) {
	t.Helper()
	for mi, snap := range before {
		if after := s.smSnapshot(t, mi); !reflect.DeepEqual(after, snap) {
			t.Errorf("%s changed:\nbefore %+v\nafter  %+v", mi, snap, after)
		}
	}
}

func (s *suite) entityNames(t *testing.T) []string {
	t.Helper()
	sec, err := s.root.Logical().ListWithContext(context.Background(), "identity/entity/name")
	s.must(err)
	if sec == nil {
		return nil
	}
	return strs(sec.Data["keys"])
}

// TestSaltMasterBesideTheOperator replays a Salt master (saltext-vault
// 1.8.0's issuing calls, byte for byte those of its Python) against the
// real Vault and API server, with each side's Vault calls counted from
// Vault's audit log per token accessor: A, the configuration and policy
// the import writes, through a cache expiry: nothing fights; B, that
// policy fails closed on every call that would write what the operator
// owns; C, saltext's quickstart policy: each fight, and the operator's
// Warning about a writer that keeps rewriting.
func TestSaltMasterBesideTheOperator(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	s.enableMount(t, smMount)
	if mounts, err := s.root.Sys().ListMountsWithContext(ctx); err == nil {
		if _, ok := mounts[smKV+"/"]; !ok {
			s.must(s.root.Sys().MountWithContext(ctx, smKV, &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}))
		}
	} else {
		s.must(err)
	}
	s.must(s.root.Sys().PutPolicyWithContext(ctx, "minionvault-operator",
		strings.ReplaceAll(operatorPolicy(t), "auth/salt-minions/", "auth/+/")))
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, tokenConnection("sm-vault", s.env.Vault.Addr, "vault-token"))))
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: smNS}})))
	s.must(s.c.Create(ctx, smTemplate()))
	pillar := map[string][]string{"sm-web01": {"web"}, "sm-db01": {"db"}, "sm-build01": {"build"}, "sm-new01": {"web"}}
	smBinding := func(minion string) *v1alpha1.MinionBinding {
		b := binding(smNS, minion, minion, map[string]any{"roles": pillar[minion]})
		b.Spec.TemplateRef.Name = "sm"
		return b
	}
	minions := []string{"sm-build01", "sm-db01", "sm-web01"}
	for _, m := range minions {
		s.must(s.c.Create(ctx, smBinding(m)))
	}
	for _, m := range append(minions, "sm-new01") {
		for _, p := range []string{"minions/" + m, "roles/" + pillar[m][0]} {
			_, err := s.root.Logical().WriteWithContext(ctx, smKV+"/data/"+p, map[string]any{"data": map[string]any{"pillar": p}})
			s.must(err)
		}
	}
	for _, m := range minions {
		s.waitReady(smNS, m)
	}
	// The template writes the policy documents its bindings render, in
	// its own scan after theirs (longer with many policies in Vault): the
	// minions read their pillar through them.
	eventually(t, 2*time.Minute, "the template's ACL policies", func() error {
		for _, m := range minions {
			for _, p := range []string{"sm_minion_" + m, "sm_role_" + pillar[m][0]} {
				if body, err := s.root.Sys().GetPolicyWithContext(ctx, p); err != nil || body == "" {
					return fmt.Errorf("policy %s: %q, %v", p, body, err)
				}
			}
		}
		return nil
	})
	tplObj := &v1alpha1.MinionTemplate{}
	s.must(s.c.Get(ctx, types.NamespacedName{Name: "sm"}, tplObj))
	tpl, err := mastercheck.FromTemplate(tplObj)
	s.must(err)

	// The master's configuration and Vault policy as the import writes
	// them, from a stock configuration (saltext's defaults, its own
	// policies:assign).
	stock := `vault:
  auth:
    method: token
    token: MASTER-TOKEN
  server:
    url: VAULT-ADDR
  issue:
    type: approle
    approle:
      mount: ` + smMount + `
  policies:
    assign: ["sm_minion_{minion}", "sm_role_{pillar[roles]}"]
  metadata:
    entity:
      roles: "{pillar[roles]}"
peer_run:
  .*: [vault.generate_token, vault.get_config, vault.generate_secret_id]
`
	stockMaster, err := mastercheck.Parse(importer.File{Name: "master.d/vault.conf", Data: []byte(stock)})
	s.must(err)
	written, err := mastercheck.Config(stockMaster, tpl)
	s.must(err)
	recommended := strings.ReplaceAll(string(written), "'FILL-IN: the master''s own, not copied'", "MASTER-TOKEN")
	s.must(s.root.Sys().PutPolicyWithContext(ctx, "sm-master-issue-only", string(mastercheck.Policy(tpl))))
	s.must(s.root.Sys().PutPolicyWithContext(ctx, "sm-master-quickstart", smQuickstartPolicy))

	// logAccessors reports each side's calls since mark.
	logCalls := func(t *testing.T, what string, mark int64, m *saltMaster) (master, op vaultCalls) {
		t.Helper()
		audit.settle(t)
		master, op = audit.since(t, mark, m.accessor), audit.since(t, mark, operator)
		t.Logf("%s: master %d reads, %d writes (%d refused: %s); operator %d reads, %d writes: %s", what,
			master.Reads, master.Writes, master.Denied, strings.Join(master.DeniedPaths, ", "), op.Reads, op.Writes, strings.Join(op.Paths, ", "))
		return master, op
	}

	s.run("A: the written configuration and policy, through a cache expiry: nothing fights", func(t *testing.T) {
		m := s.newSaltMaster(t, "sm-master-issue-only", recommended, pillar)
		before := s.smSnapshots(t, minions)
		entities := s.entityNames(t)
		writesBefore := s.writes.writes.Load()
		mark := audit.mark(t)

		rounds := []struct {
			name         string
			impersonated bool
			advance      time.Duration
		}{{"peer run", false, 0}, {"impersonated", true, 0}, {"peer run after the role cache expired", false, 3601 * time.Second}}
		for _, r := range rounds {
			m.now = m.now.Add(r.advance)
			for _, mi := range minions {
				minion, login, err := s.issue(t, m, mi, r.impersonated)
				if err != nil {
					t.Fatalf("%s, %s: %v", r.name, mi, err)
				}
				b := s.binding(smNS, mi)
				if login.EntityID != b.Status.Entity.ID {
					t.Errorf("%s, %s: the login's entity %s, the operator's %s", r.name, mi, login.EntityID, b.Status.Entity.ID)
				}
				// The rendered policies and Vault's default (the role does
				// not set token_no_default_policy).
				want := append([]string{"default"}, b.Status.Policies...)
				slices.Sort(want)
				if got := slices.Sorted(slices.Values(login.TokenPolicies)); !slices.Equal(got, want) {
					t.Errorf("%s, %s: token policies %q, want %q", r.name, mi, got, want)
				}
				for _, p := range b.Status.PillarPaths {
					if data, err := minion.ReadPillar(p); err != nil || data == nil {
						t.Errorf("%s, %s: pillar %s: %v %v", r.name, mi, p, data, err)
					}
				}
			}
		}
		for _, mi := range minions {
			s.requestReconcile(smNS, mi)
		}
		stamp := s.requestTemplateReconcile("sm")
		eventually(t, 30*time.Second, "template reconcile", func() error {
			tpl := &v1alpha1.MinionTemplate{}
			if err := s.c.Get(ctx, types.NamespacedName{Name: "sm"}, tpl); err != nil {
				return err
			}
			if tpl.Status.LastHandledReconcileAt != stamp {
				return fmt.Errorf("lastHandledReconcileAt %q", tpl.Status.LastHandledReconcileAt)
			}
			return nil
		})
		master, op := logCalls(t, "A", mark, m)
		if op.Writes != 0 || s.writes.writes.Load() != writesBefore {
			t.Errorf("the operator wrote %d times (audit log; %d by its metrics): %s", op.Writes, s.writes.writes.Load()-writesBefore, strings.Join(op.Paths, ", "))
		}
		if master.Denied != 0 {
			t.Errorf("the master was refused: %s", strings.Join(master.DeniedPaths, ", "))
		}
		for _, p := range master.Paths {
			if !strings.HasPrefix(p, "update auth/"+smMount+"/role/") || !strings.HasSuffix(p, "/secret-id") {
				t.Errorf("the master wrote %s", p)
			}
		}
		for p := range master.ReadPaths {
			if !strings.HasPrefix(p, "auth/"+smMount+"/role/") || strings.Count(p, "/") > 4 {
				t.Errorf("the master read %s", p)
			}
		}
		s.unchanged(t, before)
		for _, mi := range minions {
			if len(before[mi].aliases) != 1 || !strings.HasSuffix(before[mi].aliases[0], fmt.Sprint(s.binding(smNS, mi).Status.AppRole.RoleID)) {
				t.Errorf("%s: aliases %q", mi, before[mi].aliases)
			}
			s.noEvent(t, mi, "DriftCorrected")
			s.noEvent(t, mi, "DriftDetected")
			if b := s.binding(smNS, mi); !isReady(b) || readyReason(b) != v1alpha1.SucceededReason {
				t.Errorf("%s: %+v", mi, b.Status.Conditions)
			}
		}
		if got := s.entityNames(t); !slices.Equal(got, entities) {
			t.Errorf("entities before %q, after %q", entities, got)
		}
		if res, code := s.masterCheck(t, recommended, m, minions...); code != 0 || len(res.Findings) != 0 {
			t.Errorf("master-check of the written configuration and policy: exit %d, %+v", code, res.Findings)
		}
	})

	s.run("B: the written policy fails closed: every write the operator owns is refused, a deletion revokes, a new minion waits for its binding", func(t *testing.T) {
		m := s.newSaltMaster(t, "sm-master-issue-only", recommended, pillar)
		before := s.smSnapshots(t, minions)
		mark := audit.mark(t)
		refused := func(what string, err error) {
			t.Helper()
			if code := saltmaster.HTTPStatus(err); code != 403 {
				t.Errorf("%s: %v (status %d), want a 403", what, err, code)
			}
		}
		refused("sync_approles", m.SyncApproles(minions))
		refused("sync_entities", m.SyncEntities(minions))
		_, err := m.CleanupAuth([]string{"sm-web01"})
		refused("cleanup_auth", err)
		refused("_manage_approle", m.ManageApprole("sm-web01", nil))
		refused("_manage_entity", m.ManageEntity("sm-web01"))
		refused("_manage_entity_alias", m.ManageEntityAlias("sm-web01"))
		_, err = m.GenerateToken("sm-web01", false, nil, nil)
		refused("generate_token", err)
		s.unchanged(t, before)

		// A deleted binding stays revoked.
		s.must(s.c.Delete(ctx, s.binding(smNS, "sm-db01")))
		s.waitGone(smNS, "sm-db01")
		m.now = m.now.Add(3601 * time.Second)
		err = s.issued(t, m, "sm-db01", false)
		refused("get_config for a deleted binding's minion", err)
		if r := s.vaultRead("auth/" + smMount + "/role/sm-db01"); r != nil {
			t.Errorf("the deleted binding's role came back: %v", r["token_policies"])
		}
		err = s.issued(t, m, "sm-db01", true)
		refused("the master's pillar compile for it", err)

		// A new minion: refused until its binding is Ready, then issued,
		// and the binding is not NotOwned.
		err = s.issued(t, m, "sm-new01", false)
		refused("get_config for a minion without a binding", err)
		s.must(s.c.Create(ctx, smBinding("sm-new01")))
		b := s.waitReady(smNS, "sm-new01")
		_, login, err := s.issue(t, m, "sm-new01", false)
		if err != nil {
			t.Fatalf("the new minion once its binding is Ready: %v", err)
		}
		if login.EntityID != b.Status.Entity.ID {
			t.Errorf("the new minion logs in on entity %s, the operator's is %s", login.EntityID, b.Status.Entity.ID)
		}
		s.requestReconcile(smNS, "sm-new01")
		if b := s.binding(smNS, "sm-new01"); readyReason(b) != v1alpha1.SucceededReason {
			t.Errorf("the new minion's binding: %+v", b.Status.Conditions)
		}
		master, _ := logCalls(t, "B", mark, m)
		for _, p := range master.Paths {
			if p != "update auth/"+smMount+"/role/sm-new01/secret-id" && !slices.Contains(master.DeniedPaths, p) {
				t.Errorf("the master wrote %s", p)
			}
		}
		minions = []string{"sm-build01", "sm-new01", "sm-web01"}
	})

	s.run("C: saltext's quickstart policy: each fight, and the operator names the writer once", func(t *testing.T) {
		fight := strings.Replace(stock, "      mount: "+smMount+"\n", "      mount: "+smMount+"\n      params:\n        token_num_uses: 5\n", 1)
		fightPillar := maps.Clone(pillar)
		fightPillar["sm-web01"] = []string{"web", "build"}
		m := s.newSaltMaster(t, "sm-master-quickstart", fight, fightPillar)
		res, code := s.masterCheck(t, fight, m, minions...)
		var said []string
		for _, f := range res.Findings {
			if f.Severity == "fight" {
				said = append(said, f.Key+" "+f.Problem)
			}
		}
		for _, want := range []string{"may create, rewrite or delete the operator's roles", "may list the roles", "may write entities",
			"auth/" + smMount + "/role/sm-web01 the master would rewrite it", "token_num_uses 5 != 10", "may run vault.generate_token"} {
			if !strings.Contains(strings.Join(said, "\n"), want) {
				t.Errorf("master-check of the quickstart master (exit %d) does not say %q:\n%s", code, want, strings.Join(said, "\n"))
			}
		}
		if code != 1 {
			t.Errorf("master-check of the quickstart master: exit %d", code)
		}

		// C1: a parameter mismatch: the master rewrites the role with its
		// own policies; the operator corrects it at its resync; within the
		// hour the master is quiet; after it, it rewrites again, and the
		// operator's second correction is said once, naming the writer.
		mark := audit.mark(t)
		if err := s.issued(t, m, "sm-web01", false); err != nil {
			t.Fatal(err)
		}
		role := s.vaultRead("auth/" + smMount + "/role/sm-web01")
		if fmt.Sprint(role["token_num_uses"]) != "5" || !slices.Contains(strs(role["token_policies"]), "sm_role_build") {
			t.Errorf("after the master's request: token_num_uses %v, token_policies %v", role["token_num_uses"], role["token_policies"])
		}
		master, _ := logCalls(t, "C1 the master's first request", mark, m)
		if !slices.Contains(master.Paths, "update auth/"+smMount+"/role/sm-web01") {
			t.Errorf("the master did not rewrite the role: %q", master.Paths)
		}
		mark = audit.mark(t)
		s.requestReconcile(smNS, "sm-web01")
		s.event("sm-web01", "DriftCorrected")
		_, op := logCalls(t, "C1 the operator's resync", mark, m)
		if op.Writes != 1 || op.Paths[0] != "update auth/"+smMount+"/role/sm-web01" {
			t.Errorf("the operator's correction: %q, want the role once", op.Paths)
		}
		mark = audit.mark(t)
		m.now = m.now.Add(10 * time.Minute)
		if err := s.issued(t, m, "sm-web01", false); err != nil {
			t.Fatal(err)
		}
		if master, _ := logCalls(t, "C1 within the hour", mark, m); slices.Contains(master.Paths, "update auth/"+smMount+"/role/sm-web01") {
			t.Errorf("the master rewrote the role within its cache hour")
		}
		mark = audit.mark(t)
		m.now = m.now.Add(time.Hour)
		if err := s.issued(t, m, "sm-web01", false); err != nil {
			t.Fatal(err)
		}
		if master, _ := logCalls(t, "C1 after the hour", mark, m); !slices.Contains(master.Paths, "update auth/"+smMount+"/role/sm-web01") {
			t.Errorf("the master did not rewrite the role after its cache hour: %q", master.Paths)
		}
		s.requestReconcile(smNS, "sm-web01")
		s.event("sm-web01", v1alpha1.DriftRecurringCondition)
		b := s.binding(smNS, "sm-web01")
		c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.DriftRecurringCondition)
		if c == nil || c.Reason != v1alpha1.OtherWriterReason || !strings.Contains(c.Message, "token_num_uses is 5, want 10") || !strings.Contains(c.Message, "Salt master") {
			t.Errorf("DriftRecurring %+v", c)
		}
		if n := s.metric("minionvault_drift_recurring_total"); n < 1 {
			t.Errorf("minionvault_drift_recurring_total %v", n)
		}

		// C2: the same mismatch with the master's parameters null: no
		// master write, ever.
		quiet := s.newSaltMaster(t, "sm-master-quickstart", recommended, fightPillar)
		mark = audit.mark(t)
		for _, d := range []time.Duration{0, 3601 * time.Second} {
			quiet.now = quiet.now.Add(d)
			if err := s.issued(t, quiet, "sm-web01", false); err != nil {
				t.Fatal(err)
			}
		}
		if master, _ := logCalls(t, "C2", mark, quiet); len(master.Paths) != 2 {
			t.Errorf("the master with nulls wrote %q, want 2 secret IDs", master.Paths)
		}

		// C4: the role deleted by hand: the master creates role, entity
		// and alias; its entity write replaces the marker; the operator
		// takes them back at its resync.
		_, err := s.root.Logical().DeleteWithContext(ctx, "auth/"+smMount+"/role/sm-build01")
		s.must(err)
		mark = audit.mark(t)
		if err := s.issued(t, quiet, "sm-build01", false); err != nil {
			t.Fatal(err)
		}
		if md := s.smSnapshot(t, "sm-build01").metadata; md["minionvault-owner"] != "" {
			t.Errorf("the master's entity write kept the marker: %v", md)
		}
		master, _ = logCalls(t, "C4 the master's request for a minion whose role was deleted", mark, quiet)
		for _, w := range []string{"create auth/" + smMount + "/role/sm-build01", "update identity/entity/name/salt_minion_sm-build01", "update identity/entity-alias"} {
			if !slices.Contains(master.Paths, w) {
				t.Errorf("the master did not %s: %q", w, master.Paths)
			}
		}
		mark = audit.mark(t)
		s.requestReconcile(smNS, "sm-build01")
		_, op = logCalls(t, "C4 the operator's resync", mark, quiet)
		if md := s.smSnapshot(t, "sm-build01").metadata; md["minionvault-owner"] == "" {
			t.Errorf("the operator did not restore the marker: %v", md)
		}
		if b := s.binding(smNS, "sm-build01"); readyReason(b) != v1alpha1.SucceededReason {
			t.Errorf("sm-build01 after the master re-created its role: %+v", b.Status.Conditions)
		}

		// C5: sync_entities wipes every marker; the operator restores each
		// with one entity write.
		s.must(quiet.SyncEntities(minions))
		for _, mi := range minions {
			if md := s.smSnapshot(t, mi).metadata; md["minionvault-owner"] != "" {
				t.Errorf("%s: sync_entities kept the marker: %v", mi, md)
			}
		}
		mark = audit.mark(t)
		for _, mi := range minions {
			s.requestReconcile(smNS, mi)
		}
		_, op = logCalls(t, "C5 the operator's resync", mark, quiet)
		entityWrites := 0
		for _, p := range op.Paths {
			if strings.HasPrefix(p, "update identity/entity/name/") {
				entityWrites++
			}
		}
		if entityWrites != len(minions) {
			t.Errorf("entity writes %d, want %d: %q", entityWrites, len(minions), op.Paths)
		}
		for _, mi := range minions {
			if md := s.smSnapshot(t, mi).metadata; md["minionvault-owner"] == "" {
				t.Errorf("%s: marker not restored: %v", mi, md)
			}
		}

		// C3: CIDRs as the master writes them never equal Vault's answer:
		// a mismatch on every cache refresh.
		cidr := strings.Replace(recommended, "token_bound_cidrs: null", "token_bound_cidrs: [127.0.0.1/32]", 1)
		cm := s.newSaltMaster(t, "sm-master-quickstart", cidr, pillar)
		mark = audit.mark(t)
		for _, d := range []time.Duration{0, 3601 * time.Second} {
			cm.now = cm.now.Add(d)
			if _, err := cm.GetConfig("sm-new01", false, nil); err != nil {
				t.Fatal(err)
			}
		}
		master, _ = logCalls(t, "C3", mark, cm)
		if rewrites := countPath(master.Paths, "update auth/"+smMount+"/role/sm-new01"); rewrites != 2 {
			t.Errorf("role rewrites over a /32 in two cache hours: %d, want 2: %q", rewrites, master.Paths)
		}

		// C8: minion overrides allowed: a minion's issue_params rewrite its
		// role at every cache refresh after the operator's correction, even
		// with the master's nulls.
		overrides := strings.Replace(recommended, "allow_minion_override_params: false", "allow_minion_override_params: true", 1)
		om := s.newSaltMaster(t, "sm-master-quickstart", overrides, pillar)
		mark = audit.mark(t)
		for _, d := range []time.Duration{0, 3601 * time.Second} {
			om.now = om.now.Add(d)
			if _, err := om.GetConfig("sm-web01", false, map[string]any{"token_num_uses": 3}); err != nil {
				t.Fatal(err)
			}
			s.requestReconcile(smNS, "sm-web01")
		}
		master, _ = logCalls(t, "C8", mark, om)
		if n := countPath(master.Paths, "update auth/"+smMount+"/role/sm-web01"); n != 2 {
			t.Errorf("role rewrites forced by a minion's issue_params in two cache hours: %d, want 2", n)
		}

		// C7: a role that needs no secret ID (here a hand edit) under a
		// master that issues them: generate_secret_id answers expire_cache.
		_, err = s.root.Logical().WriteWithContext(ctx, "auth/"+smMount+"/role/sm-web01", map[string]any{"bind_secret_id": false, "token_bound_cidrs": []string{"127.0.0.1"}})
		s.must(err)
		fresh := s.newSaltMaster(t, "sm-master-quickstart", recommended, pillar)
		ans, err := fresh.GenerateSecretID("sm-web01", false, nil)
		if err == nil || ans["expire_cache"] != true || !strings.Contains(fmt.Sprint(ans["error"]), "does not require a secret ID") {
			t.Errorf("generate_secret_id for a role without secret IDs: %v, %v", ans, err)
		}
		s.requestReconcile(smNS, "sm-web01")

		// C6: a custom entity name: sync_entities makes salt_minion_<id>, a
		// second entity, and moves the alias to it; logins land there until
		// the operator links the alias back at its resync.
		custom := smTemplate()
		custom.Name, custom.Spec.EntityName = "sm-custom", "sm_custom_{minion}"
		s.must(s.c.Create(ctx, custom))
		cb := smBinding("sm-cust01")
		cb.Spec.TemplateRef.Name = "sm-custom"
		s.must(s.c.Create(ctx, cb))
		opEntity := s.waitReady(smNS, "sm-cust01").Status.Entity.ID
		s.must(quiet.SyncEntities([]string{"sm-cust01"}))
		masterEntity := s.vaultRead("identity/entity/name/salt_minion_sm-cust01")
		if masterEntity == nil || fmt.Sprint(masterEntity["id"]) == opEntity {
			t.Fatalf("sync_entities made no second entity: %v", masterEntity)
		}
		if _, login, err := s.issue(t, quiet, "sm-cust01", false); err != nil || login.EntityID != fmt.Sprint(masterEntity["id"]) {
			t.Errorf("a login after sync_entities: %v, entity %v, want the master's %v", err, login, masterEntity["id"])
		}
		s.requestReconcile(smNS, "sm-cust01")
		if _, login, err := s.issue(t, quiet, "sm-cust01", false); err != nil || login.EntityID != opEntity {
			t.Errorf("a login after the operator's resync: %v, entity %v, want the operator's %s", err, login, opEntity)
		}
	})
}

func countPath(paths []string, p string) int {
	n := 0
	for _, x := range paths {
		if x == p {
			n++
		}
	}
	return n
}
