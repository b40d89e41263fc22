package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/audit"
	"github.com/minionvault/minion-vault-operator/internal/testing/samples"
)

// copySamples copies config/samples to a new folder, for a test to edit.
func copySamples(t *testing.T) string { return samples.Copy(t) }

func writeAuditFile(t *testing.T, file, text string) { samples.WriteFile(t, file, text) }

func runAudit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(append([]string{"audit"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAuditWhoCan(t *testing.T) {
	dir := copySamples(t)
	cases := []struct {
		name    string
		args    []string
		matches int
		minions []string
	}{
		{"read on the db role's path", []string{"who-can", "salt/data/roles/db", "--cap", "read"}, 2, []string{"db01", "web01"}},
		{"any access to the ci role's path", []string{"who-can", "salt/data/roles/ci"}, 1, []string{"build01"}},
		{"the env path through templating", []string{"who-can", "salt/data/env/staging", "--cap", "read"}, 1, []string{"build01"}},
		{"nobody updates", []string{"who-can", "salt/data/roles/db", "--cap", "update"}, 0, nil},
		{"a KV v2 read of a logical path", []string{"who-can", "salt/roles/db", "--kv-op", "read"}, 2, []string{"db01", "web01"}},
		{"a KV v2 write of a logical path", []string{"who-can", "salt/roles/db", "--kv-op", "write"}, 0, nil},
		{"all lists the denied too", []string{"who-can", "salt/data/roles/ci", "--all"}, 1, []string{"build01", "db01", "web01"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runAudit(t, append(c.args, "-f", dir, "-o", "json")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var r audit.WhoCanReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range r.Minions {
				got = append(got, m.Minion)
			}
			if r.Count.Matching != c.matches || r.Count.Minions != 3 || !reflect.DeepEqual(got, c.minions) {
				t.Fatalf("count %+v minions %v, want %d of 3, %v", r.Count, got, c.matches, c.minions)
			}
		})
	}
}

func TestAuditWhoCanFlagErrors(t *testing.T) {
	dir := copySamples(t)
	for _, args := range [][]string{
		{"who-can", "salt/roles/db", "--kv-op", "read", "--cap", "read"},
		{"who-can", "salt/roles/db", "--kv-op", "fly"},
		{"who-can", "salt/roles/db", "--cap", "fly"},
		{"who-can", "salt/roles/db", "-o", "xml"},
	} {
		if code, _, _ := runAudit(t, append(args, "-f", dir)...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

func TestAuditWhoCanTableStartsWithCount(t *testing.T) {
	code, out, errOut := runAudit(t, "who-can", "salt/data/roles/db", "-f", copySamples(t))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if first := strings.SplitN(out, "\n", 2)[0]; first != "2 of 3 minions have any access to salt/data/roles/db" {
		t.Fatalf("first line %q", first)
	}
	code, out, _ = runAudit(t, "who-can", "salt/data/roles/db", "-f", copySamples(t), "-o", "yaml")
	if code != 0 || !strings.HasPrefix(out, "path: salt/data/roles/db\n") {
		t.Fatalf("yaml exit %d:\n%s", code, out)
	}
}

func TestAuditWhatCan(t *testing.T) {
	dir := copySamples(t)
	code, out, errOut := runAudit(t, "what-can", "web01", "salt/data/roles/web", "salt/data/roles/ci", "sys/mounts", "-f", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		Paths    map[string][]string
		Policies []string
		Patterns []struct{ Pattern string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"salt/data/roles/web": {"list", "read"}, "salt/data/roles/ci": {"deny"}, "sys/mounts": {"deny"}}
	if !reflect.DeepEqual(r.Paths, want) {
		t.Fatalf("paths %v, want %v", r.Paths, want)
	}
	found := false
	for _, p := range r.Patterns {
		found = found || p.Pattern == "salt/data/roles/db" // roles__1 rendered
	}
	if !found {
		t.Fatalf("patterns %+v lack the rendered salt/data/roles/db", r.Patterns)
	}
	if code, _, _ := runAudit(t, "what-can", "nope", "-f", dir); code != 2 {
		t.Fatalf("unknown minion: exit %d, want 2", code)
	}
}

func TestAuditDiff(t *testing.T) {
	base := copySamples(t)
	gain := copySamples(t)
	replaceIn(t, filepath.Join(gain, "minionbinding-web01.yaml"), "roles: [web, db]", "roles: [web, db, cache]")
	loss := copySamples(t)
	replaceIn(t, filepath.Join(loss, "minionbinding-web01.yaml"), "roles: [web, db]", "roles: [web]")
	sudo := copySamples(t)
	// A policy the template assigns but does not render, written by hand.
	replaceIn(t, filepath.Join(sudo, "miniontemplate.yaml"), "      - 'salt_role_{pillar[roles]}'\n", "      - 'salt_role_{pillar[roles]}'\n      - 'saltstack/extra-{minion}'\n")
	writeAuditFile(t, filepath.Join(sudo, "web01.hcl"), "# policy: saltstack/extra-web01\npath \"sys/*\" {\n  capabilities = [\"sudo\", \"read\"]\n}\n")

	cases := []struct {
		name       string
		head       string
		extra      []string
		code       int
		gaining    int
		losing     int
		wantChange string // "minion path"
	}{
		{"no change", base, nil, 0, 0, 0, ""},
		{"a new role gains access", gain, nil, 1, 1, 0, "web01 salt/data/roles/cache"},
		{"a dropped role only loses", loss, nil, 0, 0, 1, "web01 salt/data/roles/db"},
		{"a policy file grants sudo", sudo, []string{"sys/mounts"}, 1, 1, 0, "web01 sys/mounts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"diff", "--base", base, "--head", c.head, "-o", "json"}
			for _, p := range c.extra {
				args = append(args, "--path", p)
			}
			code, out, errOut := runAudit(t, args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s%s", code, c.code, out, errOut)
			}
			var r audit.DiffReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if r.Summary.Gaining != c.gaining || r.Summary.Losing != c.losing {
				t.Fatalf("summary %+v, want %d gaining %d losing", r.Summary, c.gaining, c.losing)
			}
			if c.wantChange == "" {
				return
			}
			for _, m := range r.Minions {
				for _, ch := range m.Changes {
					if m.Minion+" "+ch.Path == c.wantChange {
						return
					}
				}
			}
			t.Fatalf("no change %q in %+v", c.wantChange, r.Minions)
		})
	}
	if code, _, _ := runAudit(t, "diff", "--base", base, "--head", filepath.Join(base, "nope")); code != 2 {
		t.Fatalf("missing head: exit %d, want 2", code)
	}
}

func TestAuditCheck(t *testing.T) {
	dir := copySamples(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	cases := []struct {
		name       string
		rules      string
		code       int
		violations []string // "rule minion"
	}{
		{"only db minions read db secrets", `rules:
  - name: db only
    paths: ["salt/data/roles/db"]
    capability: read
    allow:
      roles: [db]
`, 0, nil},
		{"only web minions read db secrets", `rules:
  - name: web only
    paths: ["salt/data/roles/*"]
    capability: read
    allow:
      roles: [web]
`, 1, []string{"web only db01"}},
		{"nobody gets sudo under sys", `rules:
  - name: no sudo
    paths: ["sys/*"]
    capability: sudo
`, 0, nil},
		{"by minion glob", `rules:
  - name: ci
    paths: ["salt/data/roles/ci"]
    capability: read
    allow:
      minions: ["web*"]
`, 1, []string{"ci build01"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			writeAuditFile(t, rules, c.rules)
			code, out, errOut := runAudit(t, "check", "--rules", rules, "-f", dir, "-o", "json")
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s%s", code, c.code, out, errOut)
			}
			var r audit.CheckReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range r.Violations {
				got = append(got, v.Rule+" "+v.Minion)
			}
			if !reflect.DeepEqual(got, c.violations) {
				t.Fatalf("violations %v, want %v", got, c.violations)
			}
		})
	}
	writeAuditFile(t, rules, "rules:\n  - paths: [a]\n    capability: fly\n")
	if code, _, _ := runAudit(t, "check", "--rules", rules, "-f", dir); code != 2 {
		t.Fatalf("bad capability: exit %d, want 2", code)
	}
	writeAuditFile(t, rules, "rules:\n  - paths: [a]\n    capability: read\n    nope: 1\n")
	if code, _, _ := runAudit(t, "check", "--rules", rules, "-f", dir); code != 2 {
		t.Fatalf("unknown key: exit %d, want 2", code)
	}
}

// Bindings that render one policy name differently: the audit refuses the
// fleet with the template reconciler's message.
func TestAuditRefusesAPolicyConflict(t *testing.T) {
	dir := copySamples(t)
	// Names are lowercased, rule paths are not.
	replaceIn(t, filepath.Join(dir, "minionbinding-build01.yaml"), "roles: [ci, web]", "roles: [ci, Web]")
	code, _, errOut := runAudit(t, "who-can", "salt/data/roles/web", "-f", dir)
	if code != 2 || !strings.Contains(errOut, `policy "salt_role_web" renders differently for MinionBindings default/`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// A head the operator would refuse fails the gate, and says so first: its
// minions are not shown as merely losing access.
func TestAuditDiffFailsOnRefusedBindings(t *testing.T) {
	base := copySamples(t)
	conflict := copySamples(t)
	// "Web" and "web" name one policy (Vault lowercases names) with two
	// bodies: ConflictingPolicyBody.
	replaceIn(t, filepath.Join(conflict, "minionbinding-web01.yaml"), "roles: [web, db]", "roles: [web, Web, db]")
	waiting := copySamples(t)
	replaceIn(t, filepath.Join(waiting, "minionbinding-db01.yaml"), "name: salt-minions", "name: no-such-template")
	duplicate := copySamples(t)
	replaceIn(t, filepath.Join(duplicate, "minionbinding-db01.yaml"), "minionID: db01", "minionID: web01")
	replaceIn(t, filepath.Join(duplicate, "minionbinding-db01.yaml"), "id: db01", "id: web01")
	cases := []struct {
		name, head, minion, status, reason string
	}{
		{"a conflicting policy body", conflict, "web01", "refused", "ConflictingPolicyBody"},
		{"a template not among the manifests", waiting, "db01", "waiting", "TemplateNotFound"},
		{"a duplicate minion ID", duplicate, "db01", "", "DuplicateMinionID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runAudit(t, "diff", "--base", base, "--head", c.head, "-o", "json")
			if code != 1 {
				t.Fatalf("exit %d, want 1: %s%s", code, out, errOut)
			}
			var r struct {
				Refused []struct{ Binding, Minion, Kind, Reason, Message string }
				Minions []struct{ Minion, Status, Why string }
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Refused) != 1 || r.Refused[0].Reason != c.reason || r.Refused[0].Message == "" {
				t.Fatalf("refused %+v, want one %s", r.Refused, c.reason)
			}
			if c.status != "" {
				found := false
				for _, m := range r.Minions {
					if m.Minion == c.minion {
						found = m.Status == c.status && strings.HasPrefix(m.Why, c.reason+": ")
					}
				}
				if !found {
					t.Fatalf("minion %s is not %s with the reason: %+v", c.minion, c.status, r.Minions)
				}
			}
			_, table, _ := runAudit(t, "diff", "--base", base, "--head", c.head)
			if !strings.HasPrefix(table, "REFUSED: ") || !strings.Contains(strings.SplitN(table, "\n", 3)[1], c.reason) {
				t.Fatalf("the table does not start with the refusal:\n%s", table)
			}

			// The same refusal on the base is not this change's: said, and
			// the gate passes (nothing else changes).
			code, table, errOut = runAudit(t, "diff", "--base", c.head, "--head", c.head)
			if code != 0 || !strings.HasPrefix(table, "ALREADY LEFT OUT: ") || !strings.Contains(table, c.reason) || strings.Contains(table, "REFUSED: ") {
				t.Fatalf("a refusal the base has too: exit %d, want 0 and said as already left out:\n%s%s", code, table, errOut)
			}
			code, md, _ := runAudit(t, "diff", "--base", c.head, "--head", c.head, "-o", "markdown")
			if code != 0 || !strings.Contains(md, "Already left out on the base") || strings.Contains(md, "⛔") {
				t.Fatalf("markdown of a refusal the base has too: exit %d:\n%s", code, md)
			}
		})
	}
}

// A gate must not pass on nothing: no bindings, no rules, no path.
func TestAuditNothingIsAnError(t *testing.T) {
	dir := copySamples(t)
	empty := t.TempDir()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeAuditFile(t, rules, "rules:\n  - paths: [salt/data/roles/db]\n    capability: read\n")
	noRules := filepath.Join(t.TempDir(), "none.yaml")
	writeAuditFile(t, noRules, "rules: []\n")
	emptyFile := filepath.Join(t.TempDir(), "empty.yaml")
	writeAuditFile(t, emptyFile, "")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"who-can in an empty folder", []string{"who-can", "salt/data/roles/db", "-f", empty}, "no MinionBinding among the manifests"},
		{"check in an empty folder", []string{"check", "--rules", rules, "-f", empty}, "no MinionBinding among the manifests"},
		{"pillar in an empty folder", []string{"pillar", "-f", empty}, "no MinionBinding among the manifests"},
		{"diff to an empty head", []string{"diff", "--base", dir, "--head", empty}, "no MinionBinding among the manifests"},
		{"an empty rules list", []string{"check", "--rules", noRules, "-f", dir}, "no rules"},
		{"an empty rules file", []string{"check", "--rules", emptyFile, "-f", dir}, "no rules"},
		{"who-can ''", []string{"who-can", "", "-f", dir}, "names no Vault path"},
		{"who-can /", []string{"who-can", "/", "-f", dir}, "names no Vault path"},
		{"what-can ''", []string{"what-can", "web01", "", "-f", dir}, "names no Vault path"},
		{"diff --path ''", []string{"diff", "--base", dir, "--head", dir, "--path", ""}, "names no Vault path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runAudit(t, c.args...)
			if code != 2 || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, want 2 with %q: %s%s", code, c.want, out, errOut)
			}
		})
	}
}

// "*" and "+" are Vault patterns in a check rule, and refused in who-can
// (one path, as sys/capabilities), never taken as literal characters
// without a word; check reports every violating path, not the first.
func TestAuditPatterns(t *testing.T) {
	dir := copySamples(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	cases := []struct {
		name       string
		rule       string
		code       int
		violations []string // "minion path"
	}{
		{"a + segment", `paths: ["salt/data/+/db"]`, 1, []string{"db01 salt/data/roles/db", "web01 salt/data/roles/db"}},
		{"a + segment and a glob", `paths: ["salt/+/roles/d*"]`, 1, []string{"db01 salt/data/roles/db", "web01 salt/data/roles/db"}},
		{"every path of a minion", `paths: ["salt/data/roles/*"]`, 1, []string{"db01 salt/data/roles/db", "web01 salt/data/roles/db", "web01 salt/data/roles/web"}},
		{"a * inside", `paths: ["salt/*/db"]`, 2, nil},
		{"a + inside a segment", `paths: ["salt/data/ro+les/db"]`, 2, nil},
		{"+*", `paths: ["salt/data/+*"]`, 2, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			writeAuditFile(t, rules, "rules:\n  - name: r\n    "+c.rule+"\n    capability: read\n    allow:\n      roles: [ci]\n")
			code, out, errOut := runAudit(t, "check", "--rules", rules, "-f", dir, "-o", "json")
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s%s", code, c.code, out, errOut)
			}
			if c.code == 2 {
				return
			}
			var r audit.CheckReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range r.Violations {
				got = append(got, v.Minion+" "+v.Path)
			}
			if !reflect.DeepEqual(got, c.violations) {
				t.Fatalf("violations %q, want %q", got, c.violations)
			}
		})
	}
	for _, p := range []string{"salt/data/+/db", "salt/data/roles/*"} {
		if code, _, errOut := runAudit(t, "who-can", p, "-f", dir); code != 2 || !strings.Contains(errOut, "audit check") {
			t.Errorf("who-can %q: exit %d: %s", p, code, errOut)
		}
		if code, out, errOut := runAudit(t, "who-can", p, "--literal", "-f", dir); code != 0 || !strings.HasPrefix(out, "0 of 3 minions") {
			t.Errorf("who-can %q --literal: exit %d: %s%s", p, code, out, errOut)
		}
		// what-can and diff --path answer for paths as given, too.
		for _, args := range [][]string{{"what-can", "web01", p, "-f", dir}, {"diff", "--base", dir, "--head", dir, "--path", p}} {
			if code, _, errOut := runAudit(t, args...); code != 2 || !strings.Contains(errOut, "--literal") {
				t.Errorf("%q: exit %d: %s", args, code, errOut)
			}
			if code, out, errOut := runAudit(t, append(args, "--literal")...); code != 0 {
				t.Errorf("%q --literal: exit %d: %s%s", args, code, out, errOut)
			}
		}
	}
}
