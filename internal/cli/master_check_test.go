package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// stockMaster is a master as saltext's quickstart leaves it, plus the
// settings that fight: a CIDR string (never equal to Vault's list), the
// deprecated token runner. Its token_num_uses goes into the template.
const stockMaster = `vault:
  auth:
    method: approle
    role_id: master-role-id-1234
    secret_id: master-secret-5678
  server:
    url: https://vault.example.com:8200
  issue:
    type: approle
    approle:
      params:
        token_num_uses: 5
        token_bound_cidrs: 10.0.0.0/8
peer_run:
  .*:
    - vault.generate_token
    - vault.get_config
    - vault.generate_secret_id
`

// The import writes the master's side next to the manifests and warns
// about each fight; master-check finds the same fights in the stock
// configuration (exit 1, text and json) and none once the written
// configuration is installed in master.d (exit 0).
func TestImportThenMasterCheck(t *testing.T) {
	dir := t.TempDir()
	etc := filepath.Join(dir, "etc")
	if err := os.MkdirAll(filepath.Join(etc, "master.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	stock := filepath.Join(etc, "master.d", "vault.conf")
	if err := os.WriteFile(filepath.Join(etc, "master"), []byte("interface: 0.0.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stock, []byte(stockMaster), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "manifests", "minions.yaml")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runMain("import", "--config", stock, "-o", out)
	if code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	for _, want := range []string{"the master's peer_run minions matching .* may run vault.generate_token",
		"the master's vault:issue:approle:params:token_bound_cidrs"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("import warnings lack %q:\n%s", want, stderr)
		}
	}
	conf, err := os.ReadFile(filepath.Join(dir, "manifests", "salt-master-vault.conf"))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := os.ReadFile(filepath.Join(dir, "manifests", "salt-master-policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"master-role-id-1234", "master-secret-5678"} {
		if strings.Contains(string(conf), secret) {
			t.Errorf("the master configuration copies a credential:\n%s", conf)
		}
	}
	var caps []string
	for _, m := range regexp.MustCompile(`(?m)^path "([^"]+)" \{\n\s*capabilities = \[([^\]]*)\]`).FindAllStringSubmatch(string(policy), -1) {
		caps = append(caps, m[1]+" "+m[2])
	}
	if want := []string{`auth/salt-minions/role/+ "read"`, `auth/salt-minions/role/+/role-id "read"`, `auth/salt-minions/role/+/secret-id "update"`}; !slices.Equal(caps, want) {
		t.Errorf("policy grants %q, want %q", caps, want)
	}

	stdout, stderr, code := runMain("master-check", "--config", etc, "-f", out)
	if code != 1 || !strings.Contains(stdout, "2 fights") || !strings.Contains(stdout, "token_bound_cidrs '10.0.0.0/8' != ['10.0.0.0/8']") {
		t.Errorf("master-check of the stock master: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, _, code = runMain("master-check", "--config", etc, "-f", out, "-o", "json")
	var res MasterCheckResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 1 || res.Fights != 2 || res.Template != "salt-minions" {
		t.Errorf("json: exit %d, %+v, %v\n%s", code, res, err, stdout)
	}

	// Installed in place of the stock file (credentials filled in).
	filled := strings.ReplaceAll(string(conf), "'FILL-IN: the master''s own, not copied'", "s3cr3t")
	if err := os.WriteFile(stock, []byte(filled), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runMain("master-check", "--config", etc, "-f", out)
	if code != 0 || !strings.Contains(stdout, "no fight") {
		t.Errorf("master-check of the written configuration: exit %d\n%s%s", code, stdout, stderr)
	}

	if _, stderr, code := runMain("master-check", "--config", filepath.Join(dir, "missing"), "-f", out); code != 2 || stderr == "" {
		t.Errorf("a missing configuration: exit %d %q", code, stderr)
	}
	if _, stderr, code := runMain("master-check", "--config", etc, "-f", out, "--master-accessor", "x"); code != 2 || !strings.Contains(stderr, "need --vault") {
		t.Errorf("--master-accessor without --vault: exit %d %q", code, stderr)
	}
}
