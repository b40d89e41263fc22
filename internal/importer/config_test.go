package importer

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// Secrets planted in the test configurations: none may reach the output.
var plantedSecrets = []string{
	"hvs.MASTER-TOKEN-SECRET", "ROLE-ID-SECRET", "SECRET-ID-SECRET",
	"UNSEAL-KEY-SECRET", "LEGACY-TOKEN-SECRET",
}

// modernConfig is saltext-vault's configuration structure.
var modernConfig = testdataString("modern.yaml")

// legacyCoreConfig is Salt core's vault configuration before 3007.
var legacyCoreConfig = testdataString("legacy.yaml")

// testdataString is a file of testdata/, which test/crd also imports and
// checks against the CRDs.
func testdataString(name string) string {
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(data)
}

func ptr[T any](v T) *T { return &v }

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  Config // Warnings: checked by wantWarnings
		// wantWarnings are substrings, each of which must occur in some warning.
		wantWarnings []string
	}{{
		name:  "modern",
		files: []string{modernConfig},
		want: Config{
			ServerURL: "https://vault.example.com:8200", ServerNamespace: "admin/salt",
			AuthMethod: "approle", IssueType: "approle",
			Policies:       []string{"saltstack/minions", "salt_role_{pillar[roles]}"},
			EntityMetadata: []KV{{"roles", "{pillar[roles]}"}, {"minion-id", "id:{minion}"}},
			SecretMetadata: []KV{{"job", "{jid}"}, {"by", "{user}"}},
			PillarPaths:    []string{"salt/data/minions/{minion}", "salt/data/roles/{pillar[roles]}", "salt/data/common"},
			AppRole: &v1alpha1.MinionAppRoleSpec{
				Mount:               "salt/minions",
				BindSecretID:        ptr(true),
				SecretIDNumUses:     ptr(int64(2)),
				SecretIDTTL:         ptr(intstr.FromString("90s")),
				TokenExplicitMaxTTL: ptr(intstr.FromInt32(7200)),
				TokenNumUses:        ptr(int64(0)),
				TokenTTL:            ptr(intstr.FromInt32(5400)),
				TokenMaxTTL:         ptr(intstr.FromString("1.5")),
				TokenBoundCIDRs:     []string{"10.0.0.0/8", "192.168.0.0/16"},
				SecretIDBoundCIDRs:  []string{"10.1.0.0/16"},
			},
		},
		wantWarnings: []string{
			"vault:auth:role_id: not copied", "vault:auth:secret_id: not copied", "vault:auth:token_lifecycle",
			"vault:keys: not converted", "vault:server:verify (a CA bundle)", "vault:issue:wrap",
			"vault:issue:allow_minion_override_params is set", "token_no_default_policy is true",
			"token_type: not converted", `duplicate "10.1.0.0/16"`, "vault:issue:token: not converted",
			"vault:policies:refresh_pillar", "vault:metadata:secret:job uses {jid}", "vault:metadata:secret:by uses {user}",
			"ext_pillar[1]:vault:nesting_key", "ext_pillar[3]:vault: no path=",
		},
	}, {
		name:  "legacy Salt core, token auth",
		files: []string{legacyCoreConfig},
		want: Config{
			ServerURL: "https://legacy.example.com:8200", ServerNamespace: "legacy-ns",
			AuthMethod: "token", IssueType: "token",
			Policies: []string{"saltstack/minions", "saltstack/{minion}", "salt_role_{pillar[roles]}"},
		},
		wantWarnings: []string{
			"vault:policies is a list (legacy shape)", "vault:url (legacy shape)", "vault:namespace (legacy shape)",
			"vault:verify (legacy shape)", "vault:verify is false", "vault:role_name (legacy shape",
			"vault:auth:token: not copied", "vault:auth:ttl (legacy shape", "vault:auth:uses (legacy shape",
			"vault:auth:allow_minion_override is set", "vault:auth:token_backend (legacy shape",
			"vault:issue:type is token",
		},
	}, {
		name: "legacy approle auth, bare vault mapping",
		files: []string{`
url: http://127.0.0.1:8200
auth: {method: approle, role_id: ROLE-ID-SECRET, secret_id: SECRET-ID-SECRET}
policies: ['saltstack/{minion}']
`},
		want: Config{ServerURL: "http://127.0.0.1:8200", AuthMethod: "approle", IssueType: "token", Policies: []string{"saltstack/{minion}"}},
	}, {
		name:  "JSON, defaults",
		files: []string{`{"vault": {"server": {"url": "https://v:8200"}, "issue": {"type": "approle"}}}`},
		want:  Config{ServerURL: "https://v:8200", IssueType: "approle"},
	}, {
		name: "legacy url wins over server:url, whatever the order; files merge",
		files: []string{
			"vault:\n  url: https://legacy:8200\n  server: {url: 'https://modern:8200', namespace: ns}\nother: 1\n",
			"vault:\n  issue: {type: approle, approle: {params: {secret_id_ttl: null, token_explicit_max_ttl: null, secret_id_num_uses: null, token_num_uses: null, token_ttl: null}}}\n",
			"ext_pillar:\n  - vault: path=a/{minion}\n",
		},
		want: Config{
			ServerURL: "https://legacy:8200", ServerNamespace: "ns", IssueType: "approle",
			PillarPaths: []string{"a/{minion}"},
			AppRole: &v1alpha1.MinionAppRoleSpec{
				SecretIDTTL: ptr(intstr.FromInt32(0)), TokenExplicitMaxTTL: ptr(intstr.FromInt32(0)),
				SecretIDNumUses: ptr(int64(0)), TokenNumUses: ptr(int64(0)),
			},
		},
		wantWarnings: []string{"secret_id_ttl is null", "token_num_uses is null"},
	}, {
		name:         "empty assign, no URL",
		files:        []string{"vault: {policies: {assign: []}, metadata: {entity: {}}}"},
		want:         Config{IssueType: "token", Policies: []string{}, EntityMetadata: []KV{}},
		wantWarnings: []string{"vault:server:url is not set"},
	}, {
		name:         "SDB URL",
		files:        []string{"vault: {server: {url: 'sdb://osenv/VAULT_ADDR'}}"},
		want:         Config{IssueType: "token"},
		wantWarnings: []string{"SDB reference"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var files []File
			for i, f := range tc.files {
				files = append(files, File{Name: "f" + string(rune('0'+i)), Data: []byte(f)})
			}
			got, err := ParseConfig(files...)
			if err != nil {
				t.Fatal(err)
			}
			warnings := got.Warnings
			got.Warnings, got.urlSeen = nil, false
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", *got, tc.want)
				if got.AppRole != nil && tc.want.AppRole != nil {
					t.Errorf("appRole got  %+v\nappRole want %+v", *got.AppRole, *tc.want.AppRole)
				}
			}
			all := strings.Join(warnings, "\n")
			for _, w := range tc.wantWarnings {
				if !strings.Contains(all, w) {
					t.Errorf("no warning %q in:\n%s", w, all)
				}
			}
			for _, s := range plantedSecrets {
				if strings.Contains(all, s) {
					t.Errorf("warnings contain the secret %q", s)
				}
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	for name, cfg := range map[string]string{
		"no vault":                 "interface: 0.0.0.0\n",
		"vault a list":             "vault: [a]\n",
		"not a mapping":            "- a\n",
		"not YAML":                 "vault: {a: [}\n",
		"policies a string":        "vault: {policies: 'saltstack/{minion}'}",
		"assign a string":          "vault: {policies: {assign: 'x'}}",
		"policy not a string":      "vault: {policies: {assign: [1]}}",
		"too many policies":        "vault: {policies: {assign: [" + strings.Repeat("p,", 65) + "p]}}",
		"metadata value int":       "vault: {metadata: {entity: {tier: 1}}}",
		"metadata a list":          "vault: {metadata: {entity: [a]}}",
		"metadata key too long":    "vault: {metadata: {entity: {" + strings.Repeat("k", 129) + ": v}}}",
		"bad issue type":           "vault: {issue: {type: jwt}}",
		"bad mount":                "vault: {issue: {approle: {mount: 'a b'}}}",
		"bad ttl":                  "vault: {issue: {approle: {params: {token_ttl: soon}}}}",
		"negative ttl":             "vault: {issue: {approle: {params: {token_ttl: -1}}}}",
		"bad num uses":             "vault: {issue: {approle: {params: {token_num_uses: -1}}}}",
		"num uses too big":         "vault: {issue: {approle: {params: {token_num_uses: 1000001}}}}",
		"bad bind_secret_id":       "vault: {issue: {approle: {params: {bind_secret_id: maybe}}}}",
		"cidrs a mapping":          "vault: {issue: {approle: {params: {token_bound_cidrs: {a: b}}}}}",
		"server a string":          "vault: {server: x}",
		"namespace not a string":   "vault: {server: {namespace: [a]}}",
		"too many pillar paths":    "vault: {}\next_pillar: [" + strings.Repeat("{vault: path=a},", 65) + "{vault: path=a}]",
		"pillar path too long":     "vault: {}\next_pillar: [{vault: path=" + strings.Repeat("a", 1025) + "}]",
		"policy pattern too long":  "vault: {policies: {assign: [" + strings.Repeat("a", 1025) + "]}}",
		"metadata pattern too big": "vault: {metadata: {secret: {k: " + strings.Repeat("a", 1025) + "}}}",
	} {
		t.Run(name, func(t *testing.T) {
			if c, err := ParseConfig(File{Name: "c.yaml", Data: []byte(cfg)}); err == nil {
				t.Errorf("no error; got %+v", c)
			}
		})
	}
}

// The sections share one refusal of a kind other than a mapping (asMapping);
// the wording is what a user reads, so it is pinned section by section.
func TestParseConfigNotAMapping(t *testing.T) {
	for cfg, want := range map[string]string{
		"vault: {server: x}":                       "vault:server must be a mapping, not a str",
		"vault: {auth: [a]}":                       "vault:auth must be a mapping, not a list",
		"vault: {issue: 1}":                        "vault:issue must be a mapping, not a int",
		"vault: {issue: {approle: x}}":             "vault:issue:approle must be a mapping, not a str",
		"vault: {issue: {approle: {params: [a]}}}": "vault:issue:approle:params must be a mapping, not a list",
		"vault: {policies: x}":                     "vault:policies must be a mapping (or, legacy, a list), not a str",
		"vault: {metadata: [a]}":                   "vault:metadata must be a mapping, not a list",
		"vault: {metadata: {entity: [a]}}":         "vault:metadata:entity must be a mapping of key to pattern, not a list",
	} {
		_, err := ParseConfig(File{Name: "c.yaml", Data: []byte(cfg)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", cfg, err, want)
		}
	}
}
