package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/minionvault/minion-vault-operator/internal/testing/samples"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// Every report names the Vault version whose rules answered, and the rules
// it implies, in every output format; the default is the newest version
// the project tests.
func TestAuditNamesTheVaultVersion(t *testing.T) {
	dir := copySamples(t)
	head := copySamples(t)
	samples.ReplaceIn(t, filepath.Join(head, "miniontemplate.yaml"), "capabilities: [read, list]", "capabilities: [read, list, update]")
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeAuditFile(t, rules, "rules:\n  - name: nobody updates\n    paths: [\"salt/*\"]\n    capability: update\n")
	commands := map[string][]string{
		"who-can":  {"who-can", "salt/data/roles/db", "-f", dir},
		"what-can": {"what-can", "web01", "salt/data/roles/db", "-f", dir},
		"check":    {"check", "--rules", rules, "-f", dir},
		"pillar":   {"pillar", "-f", dir},
		"diff":     {"diff", "--base", dir, "--head", head},
	}
	for name, args := range commands {
		for _, c := range []struct {
			version, want, source string
			rule                  string // one rule the version implies
		}{
			{"", vault.NewestTested(), "default", "element by element (1.21.0 and later)"},
			{"1.19.5", "1.19.5", "flag", "no recover capability"},
			{"v1.21.6+ent", "1.21.6", "flag", "a templated value with * or + drops its rule"},
		} {
			a := args
			if c.version != "" {
				a = append(a[:len(a):len(a)], "--vault-version", c.version)
			}
			for _, format := range []string{"json", "yaml", "table", "markdown"} {
				if format == "markdown" && name != "diff" {
					continue
				}
				_, out, errOut := runAudit(t, append(a[:len(a):len(a)], "-o", format)...)
				if out == "" {
					t.Fatalf("%s %s -o %s: no output: %s", name, c.version, format, errOut)
				}
				var v struct {
					Vault struct {
						Version, Source, Testing string
						Rules                    []string
					}
				}
				switch format {
				case "json":
					if err := json.Unmarshal([]byte(out), &v); err != nil {
						t.Fatalf("%s -o json: %v", name, err)
					}
				case "yaml":
					if err := yaml.Unmarshal([]byte(out), &v); err != nil {
						t.Fatalf("%s -o yaml: %v", name, err)
					}
				case "table":
					if !strings.Contains(out, "ACL rules of Vault "+c.want+" (") || !strings.Contains(out, c.rule) {
						t.Errorf("%s %s -o table: no rules of %s:\n%s", name, c.version, c.want, out)
					}
					continue
				case "markdown":
					if !strings.Contains(out, "ACL rules of Vault "+c.want+";") || !strings.Contains(out, "<summary>ACL rules of Vault "+c.want+" (") || !strings.Contains(out, c.rule) {
						t.Errorf("diff %s -o markdown: no rules of %s:\n%s", c.version, c.want, out)
					}
					continue
				}
				if v.Vault.Version != c.want || v.Vault.Source != c.source || v.Vault.Testing == "" || !containsPart(v.Vault.Rules, c.rule) {
					t.Errorf("%s %s -o %s: vault %+v", name, c.version, format, v.Vault)
				}
			}
		}
	}
}

func containsPart(list []string, part string) bool {
	for _, s := range list {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}

// An unreadable --vault-version is refused before anything is read.
func TestAuditRefusesAnUnreadableVersion(t *testing.T) {
	dir := copySamples(t)
	for _, v := range []string{"latest", "1.21", "1.x.4", ""} {
		code, out, errOut := runAudit(t, "who-can", "salt/data/roles/db", "-f", dir, "--vault-version", v)
		if code != 2 || out != "" || !strings.Contains(errOut, `--vault-version "`+v+`": not a Vault release such as `+vault.NewestTested()) {
			t.Errorf("--vault-version %q: exit %d, %q %q", v, code, out, errOut)
		}
	}
}
