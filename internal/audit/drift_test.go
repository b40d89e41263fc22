package audit

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/testing/samples"
	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// vaultShell is a fleet of manifests as LoadOnline would hold it:
// minions by role, each with its role ID and live entity (an owner marker
// among its metadata, as the operator writes it).
func vaultShell(t *testing.T, dir string) *Fleet {
	t.Helper()
	f, err := Load([]string{dir}, Options{VaultVersion: "1.21.4", Accessor: "auth_approle_1"})
	if err != nil {
		t.Fatal(err)
	}
	out := byRole(f)
	out.accessor = "auth_approle_1"
	for _, m := range out.minions {
		e := *m.subject.Entity
		e.ID = "entity-" + m.role
		e.Metadata = map[string]string{"minionvault-owner": "cluster=c binding=default/" + m.role + " uid=u"}
		for k, v := range m.metadata {
			e.Metadata[k] = v
		}
		m.roleID = "role-id-" + m.role
		e.Aliases = []acl.Alias{{ID: "alias-" + m.role, Name: m.roleID, MountAccessor: "auth_approle_1", Metadata: map[string]string{"role_name": m.role}}}
		m.live = &e
		m.subject.Entity = &e
		m.metadata = e.Metadata
		m.prep = f.ev.Prepare(m.subject)
	}
	return out
}

func TestAuditDrift(t *testing.T) {
	dir := samples.Copy(t)
	more := samples.Copy(t)
	samples.ReplaceIn(t, filepath.Join(more, "minionbinding-web01.yaml"), "roles: [web, db]", "roles: [web, db, cache]")
	less := samples.Copy(t)
	samples.ReplaceIn(t, filepath.Join(less, "minionbinding-web01.yaml"), "roles: [web, db]", "roles: [web]")
	cases := []struct {
		name           string
		vault          string
		extra, missing int
		want           string // "minion path +extra -missing"
	}{
		{"in sync", dir, 0, 0, ""},
		{"Vault gives more", more, 1, 0, "web01 salt/data/roles/cache +list,+read"},
		{"Vault gives less", less, 0, 1, "web01 salt/data/roles/db -list,-read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			offline, err := Load([]string{dir}, Options{VaultVersion: "1.21.4", Accessor: "auth_approle_1"})
			if err != nil {
				t.Fatal(err)
			}
			r := Drift(offline, vaultShell(t, c.vault), nil)
			if r.Summary.Extra != c.extra || r.Summary.Missing != c.missing {
				t.Fatalf("summary %+v: %+v", r.Summary, r.Minions)
			}
			if c.want == "" {
				if len(r.Minions) != 0 {
					t.Fatalf("drift in sync: %+v", r.Minions)
				}
				return
			}
			var got []string
			for _, m := range r.Minions {
				for _, ch := range m.Changes {
					var d []string
					if len(ch.Extra) > 0 {
						d = append(d, "+"+strings.Join(ch.Extra, ",+"))
					}
					if len(ch.Missing) > 0 {
						d = append(d, "-"+strings.Join(ch.Missing, ",-"))
					}
					got = append(got, m.Minion+" "+ch.Path+" "+strings.Join(d, " "))
				}
			}
			found := false
			for _, g := range got {
				found = found || g == c.want
			}
			if !found {
				t.Fatalf("want %q among %q", c.want, got)
			}
		})
	}
}

// TestAuditDriftAligns: what only Vault chooses (entity ID, role ID, the
// owner marker) is no drift, even for policies that template it.
func TestAuditDriftAligns(t *testing.T) {
	dir := samples.Copy(t)
	samples.WriteFile(t, filepath.Join(dir, "own.hcl"), "# policy: saltstack/minions\n"+
		`path "own/{{identity.entity.id}}" { capabilities = ["read"] }
path "own/{{identity.entity.aliases.auth_approle_1.name}}" { capabilities = ["read"] }
path "own/{{identity.entity.metadata.minionvault-owner}}" { capabilities = ["read"] }
`)
	offline, err := Load([]string{dir}, Options{VaultVersion: "1.21.4", Accessor: "auth_approle_1"})
	if err != nil {
		t.Fatal(err)
	}
	online := vaultShell(t, dir)
	r := Drift(offline, online, []string{"own/entity-web01", "own/role-id-web01"})
	if r.Summary.Extra != 0 || r.Summary.Missing != 0 || len(r.Minions) != 0 {
		t.Fatalf("drift where only Vault's choices differ: %+v %+v", r.Summary, r.Minions)
	}
	// A role no binding renders, and a binding Vault lacks.
	online.minions = online.minions[:len(online.minions)-1]
	delete(online.byID, "web01")
	rogue := *online.byID["db01"]
	rogue.id, rogue.role = "rogue", "rogue"
	online.minions = append(online.minions, &rogue)
	online.byID["rogue"] = &rogue
	offline, _ = Load([]string{dir}, Options{VaultVersion: "1.21.4", Accessor: "auth_approle_1"})
	r = Drift(offline, online, nil)
	var status []string
	for _, m := range r.Minions {
		if m.Status != "" {
			status = append(status, m.Minion+": "+m.Status)
		}
	}
	if !reflect.DeepEqual(status, []string{"rogue: not in the manifests", "web01: not in Vault"}) || r.Summary.Extra != 1 || r.Summary.Missing != 1 {
		t.Fatalf("status %q summary %+v", status, r.Summary)
	}
}

func TestAuditDriftTable(t *testing.T) {
	r := DriftReport{
		Summary: DriftSummary{Minions: 2, Extra: 1, Paths: 3},
		Minions: []MinionDrift{{Minion: "web01", Role: "web01", Changes: []PathDrift{{Path: "secret/data/x", Manifests: []string{"deny"}, Vault: []string{"read"}, Extra: []string{"read"}, Why: "p secret/data/x (exact match)"}}}},
		Verify: &VerifyReport{Seed: 7, TokenRole: "r", Agreed: 5,
			Minions:       []VerifiedMinion{{Role: "web01", Paths: 3}, {Role: "db01", Skipped: "Vault makes no token for it: 403 entity from given entity alias is disabled"}},
			Disagreements: []Disagreement{{Role: "web01", Path: "secret/data/x", Evaluator: []string{"deny"}, Vault: []string{"read"}}}},
	}
	var b strings.Builder
	driftTable(&b, r)
	for _, want := range []string{
		"1 of 2 minions have access in Vault the manifests do not give, 0 lack access the manifests give (3 paths compared)\n",
		"web01   web01  secret/data/x  deny       read   +read  p secret/data/x (exact match)\n",
		"verify (seed 7, token role r): 5 answers agree with Vault's sys/capabilities, 1 disagree\n",
		"  db01: not verified: Vault makes no token for it: 403 entity from given entity alias is disabled\n",
		"web01  secret/data/x  deny       read\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}
