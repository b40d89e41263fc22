package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/audit"
)

// The samples let every minion read its predicted pillar; a template that
// assigns a per-minion policy no document renders does not, and the check
// says which path, read as what, and why.
func TestAuditPillar(t *testing.T) {
	samples := copySamples(t)
	noDoc := copySamples(t)
	replaceIn(t, filepath.Join(noDoc, "miniontemplate.yaml"), "    - name: 'saltstack/{minion}'\n", "    - name: 'saltstack/unused-{minion}'\n")
	// Only the templated shared policy grants the roles' paths: it reads
	// them from the entity metadata (roles__0..2).
	templatedOnly := copySamples(t)
	replaceIn(t, filepath.Join(templatedOnly, "miniontemplate.yaml"), "    - name: 'salt_role_{pillar[roles]}'\n", "    - name: 'saltstack/unassigned-{pillar[roles]}'\n")
	// A KV version 1 path: no data/ inserted, and no rule for it; and a
	// cubbyhole path, which Vault's default policy lets every token read.
	v1 := copySamples(t)
	replaceIn(t, filepath.Join(v1, "miniontemplate.yaml"), "    - 'salt/data/minions/{minion}'\n", "    - 'kv1/minions/{minion}'\n    - 'cubbyhole/{minion}'\n")

	// A deny on the very pattern that grants: the same pattern merges, and
	// deny wins.
	denied := copySamples(t)
	replaceIn(t, filepath.Join(denied, "miniontemplate.yaml"), "      - 'salt_role_{pillar[roles]}'\n", "      - 'salt_role_{pillar[roles]}'\n      - 'saltstack/extra-{minion}'\n")
	writeAuditFile(t, filepath.Join(denied, "web01.hcl"), "# policy: saltstack/extra-web01\npath \"salt/data/minions/web01\" {\n  capabilities = [\"deny\"]\n}\n")

	cases := []struct {
		name  string
		dir   string
		extra []string
		code  int
		want  []string // "minion pillar -> path"
	}{
		{"a deny on the minion's own path", denied, nil, 1, []string{"web01 salt/data/minions/web01 -> salt/data/minions/web01"}},
		{"the samples", samples, nil, 0, nil},
		{"a per-minion policy without a document", noDoc, nil, 1, []string{
			"build01 salt/data/minions/build01 -> salt/data/minions/build01",
			"db01 salt/data/minions/db01 -> salt/data/minions/db01",
			"web01 salt/data/minions/web01 -> salt/data/minions/web01"}},
		{"roles through templated rules only", templatedOnly, nil, 0, nil},
		{"KV v1, and the default policy's cubbyhole", v1, []string{"--kv", "kv1=1", "--kv", "cubbyhole=1"}, 1, []string{
			"build01 kv1/minions/build01 -> kv1/minions/build01",
			"db01 kv1/minions/db01 -> kv1/minions/db01",
			"web01 kv1/minions/web01 -> kv1/minions/web01"}},
		{"every mount KV v2 unless said", v1, nil, 1, []string{
			"build01 kv1/minions/build01 -> kv1/data/minions/build01",
			"db01 kv1/minions/db01 -> kv1/data/minions/db01",
			"web01 kv1/minions/web01 -> kv1/data/minions/web01"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runAudit(t, append([]string{"pillar", "-f", c.dir, "-o", "json"}, c.extra...)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s%s", code, c.code, out, errOut)
			}
			var r audit.PillarReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range r.Unreadable {
				got = append(got, u.Minion+" "+u.Pillar+" -> "+u.Path)
			}
			if !slices.Equal(got, c.want) || r.Minions != 3 || r.Paths == 0 {
				t.Errorf("unreadable %q, want %q (%d minions, %d paths)", got, c.want, r.Minions, r.Paths)
			}
		})
	}
	code, out, _ := runAudit(t, "pillar", "-f", noDoc)
	if code != 1 || !strings.Contains(out, "3 of 8 predicted pillar paths of 3 minions cannot be read") || !strings.Contains(out, "no rule matches") ||
		!strings.Contains(out, `  web01 salt/data/minions/web01: policy "saltstack/web01" does not exist and is skipped`) {
		t.Errorf("table: exit %d\n%s", code, out)
	}
	// The deciding rule is named, with every policy that has it.
	code, out, _ = runAudit(t, "pillar", "-f", denied)
	if code != 1 || !regexp.MustCompile(`(?m)^web01 +salt/data/minions/web01 +salt/data/minions/web01 +deny +saltstack/extra-web01,saltstack/web01 "salt/data/minions/web01" \(exact match\)$`).MatchString(out) {
		t.Errorf("deny table: exit %d\n%s", code, out)
	}
	if code, _, errOut := runAudit(t, "pillar", "-f", samples, "--kv", "salt=3"); code != 2 || !strings.Contains(errOut, "MOUNT=1 or MOUNT=2") {
		t.Errorf("--kv salt=3: exit %d %s", code, errOut)
	}
}
