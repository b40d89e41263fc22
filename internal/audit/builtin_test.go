package audit

import (
	"strings"
	"testing"
)

// A built-in policy the minions carry (Vault 2's default-ceiling) is
// never reported as someone else's ("neither rendered by a template nor
// among the policy files"): offline it is a text the audit lacks, in a
// drift it is Vault's text, said as the server's own.
func TestBuiltinPoliciesAreNotForeign(t *testing.T) {
	docs := map[string]string{"p": "path \"salt/common\" {\n  capabilities = [\"read\"]\n}\n"}
	tests := []struct {
		name      string
		policies  []string
		vaultDocs map[string]string
		want      []string // substrings, one warning each
		foreign   []string // names said to be neither rendered nor files
	}{
		{name: "offline, a built-in and someone else's",
			policies: []string{"p", "default-ceiling", "someone_elses"},
			want:     []string{`policy "default-ceiling" is the built-in policy of Vault 2.0 and later, whose text the offline audit does not ship`},
			foreign:  []string{"someone_elses"}},
		{name: "offline, built-ins only",
			policies: []string{"p", "Default-Ceiling"},
			want:     []string{`policy "default-ceiling" is the built-in policy of Vault 2.0 and later`}},
		{name: "drift, Vault's text of a built-in",
			policies:  []string{"p", "default-ceiling", "someone_elses"},
			vaultDocs: map[string]string{"default-ceiling": "path \"policy/default-ceiling\" {\n  capabilities = [\"read\"]\n}\n", "someone_elses": docs["p"]},
			want:      []string{`policy "default-ceiling" is the built-in policy of Vault 2.0 and later: Vault's text is used on both sides`},
			foreign:   []string{"someone_elses"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testFleet(t, docs, map[string]map[string]string{"web01": {}}, tt.policies)
			f.docs = map[string]string{"p": docs["p"]}
			if tt.vaultDocs != nil {
				// Vault's side: a fleet whose texts are all known, so
				// policyText never asks a client.
				if err := f.addVaultDocs(&Fleet{docs: tt.vaultDocs}); err != nil {
					t.Fatal(err)
				}
			} else {
				f.prepare()
			}
			all := strings.Join(f.warnings, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("warnings lack %q:\n%s", w, all)
				}
			}
			for _, w := range f.warnings {
				if strings.Contains(w, "neither rendered") && strings.Contains(w, "default-ceiling") {
					t.Errorf("a built-in reported as someone else's: %s", w)
				}
			}
			for _, n := range tt.foreign {
				if !strings.Contains(all, `policy "`+n+`" is neither rendered`) {
					t.Errorf("%s not reported:\n%s", n, all)
				}
			}
		})
	}
}
