package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// diff -o markdown is a pull-request comment: the verdict first, who gains
// and who loses grouped with the deciding rule, a removed binding one
// line, the details collapsed.
func TestAuditDiffMarkdown(t *testing.T) {
	base := copySamples(t)
	gain := copySamples(t)
	replaceIn(t, filepath.Join(gain, "minionbinding-web01.yaml"), "roles: [web, db]", "roles: [web, db, cache]")
	removed := copySamples(t)
	if err := os.Remove(filepath.Join(removed, "minionbinding-db01.yaml")); err != nil {
		t.Fatal(err)
	}
	refused := copySamples(t)
	replaceIn(t, filepath.Join(refused, "minionbinding-web01.yaml"), "roles: [web, db]", "roles: [web, Web, db]")
	cases := []struct {
		name  string
		head  string
		code  int
		first string
		want  []string
		not   []string
	}{
		{"no change", base, 0, "## ✅ Vault access: no minion gains access", []string{"**0 of 3 minions gain access, 0 lose access**"}, []string{"<details><summary>Every change"}},
		{"a role added", gain, 1, "## ❌ Vault access: 1 minion gains access", []string{
			"### Gained (1 minion)",
			"| 1 (`web01`) | cache, db, web | `+list,+read` | `salt/data/roles/cache` | salt_role_cache,saltstack/minions salt/data/roles/cache (exact match) |",
			"<details><summary>Every change, per minion"}, []string{"Cut to fit"}},
		{"a binding removed", removed, 0, "## ✅ Vault access: no minion gains access", []string{
			"- **removed** 1 (`db01`): loses access (its binding is removed)",
			"| `db01` | | | | removed: loses access on "}, []string{"| `db01` | `salt/"}},
		{"a binding refused", refused, 1, "## ❌ Vault access: 1 binding the operator would refuse", []string{
			"### ⛔ The operator would refuse 1 binding of the head",
			"- refused `default/web01` (minion `web01`): **ConflictingPolicyBody**: policyDocuments[0]: policy \"salt_role_web\" renders two different bodies",
			"- **refused** 1 (`web01`): loses access (ConflictingPolicyBody: "}, []string{"| `web01` | `salt/"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runAudit(t, "diff", "--base", base, "--head", c.head, "-o", "markdown")
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s%s", code, c.code, out, errOut)
			}
			if first := strings.SplitN(out, "\n", 2)[0]; first != c.first {
				t.Errorf("first line %q, want %q", first, c.first)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if strings.Contains(out, w) {
					t.Errorf("%q in\n%s", w, out)
				}
			}
		})
	}
	if code, _, errOut := runAudit(t, "who-can", "salt/data/roles/db", "-f", base, "-o", "markdown"); code != 2 || !strings.Contains(errOut, "--output") {
		t.Fatalf("who-can -o markdown: exit %d: %s", code, errOut)
	}
}
