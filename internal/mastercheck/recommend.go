package mastercheck

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	vaultpolicy "github.com/minionvault/minion-vault-operator/config/vault"
	"github.com/minionvault/minion-vault-operator/internal/saltext"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// File names of the master's side, written next to the imported manifests.
const (
	MasterConfigFile = "salt-master-vault.conf"
	MasterPolicyFile = "salt-master-policy.hcl"
)

// comparedParams are the AppRole parameters saltext compares with the
// role and rewrites it over (runners/vault.py _approle_params_match).
var comparedParams = saltext.ComparedParams()

// credentialKeys are vault:auth keys that hold the master's credentials:
// never copied.
var credentialKeys = []string{"token", "role_id", "secret_id"}

// credentialPlaceholder stands for a credential the file does not copy.
const credentialPlaceholder = "FILL-IN: the master's own, not copied"

// Config is the master's vault: and peer_run: settings beside the operator
// (issue only): approle issuing on the template's mount, every compared
// parameter null so that the master never rewrites a role, bind_secret_id
// as the template's, minion overrides off, and only the two issuing
// runners for minions. It is the whole vault: mapping, the master's other
// settings kept (Salt's master.d replaces a top-level key of the master
// file whole), with its credentials left out: vault:auth's token, role_id
// and secret_id are placeholders (an sdb:// reference is kept), and
// vault:keys (unseal keys) is dropped.
func Config(m *Master, t *Template) ([]byte, error) {
	vault := m.Vault
	if !vault.IsMap() {
		vault = value.NewMap(nil)
	}
	vault = vault.Delete(value.NewString("keys"))
	if auth, ok := vault.GetString("auth"); ok && auth.IsMap() {
		for _, k := range credentialKeys {
			if v, ok := auth.GetString(k); ok && !(v.IsString() && strings.HasPrefix(v.Str(), "sdb://")) && !v.IsNull() {
				auth = auth.Set(value.NewString(k), value.NewString(credentialPlaceholder))
			}
		}
		vault = vault.Set(value.NewString("auth"), auth)
	}
	vault = vault.Set(value.NewString("issue"), issueOnly(m, t))
	doc := value.NewMap([]value.Pair{
		{Key: value.NewString("vault"), Val: vault},
		{Key: value.NewString("peer_run"), Val: value.NewMap([]value.Pair{{Key: value.NewString(".*"),
			Val: value.NewList([]value.Value{value.NewString(issueRunners[0]), value.NewString(issueRunners[1])})}})},
	})
	root := doc.ToYAMLNode()
	comment(root, []string{"vault", "issue", "allow_minion_override_params"}, "minions must not force role rewrites with their vault:issue_params")
	comment(root, []string{"vault", "issue", "approle", "params", "bind_secret_id"},
		"not compared, but minions are told from it whether to fetch secret IDs: the template's bindSecretID, never null")
	comment(root, []string{"vault", "issue", "approle", "params", comparedParams[0]},
		"null: neither compared with the roles nor sent, so the master never rewrites a role the operator wrote\n(saltext's defaults count where the configuration omits a parameter)")
	comment(root, []string{"peer_run"}, "only the issuing runners: not vault.generate_token or vault.generate_new_token")
	var b bytes.Buffer
	fmt.Fprintf(&b, `# The Salt master beside minion-vault-operator: issue credentials only.
# Written by "minionvault import" for MinionTemplate %s (AppRole mount %s);
# see docs/operations.md#running-beside-a-salt-master.
#
# This is the master's whole vault: mapping, its other settings kept: put it
# in master.d in place of the file that holds vault: now (a master.d file
# replaces the master file's vault: key whole). The master's credentials are
# not copied: fill in vault:auth. Salt extends peer_run lists across master.d
# files: remove vault.generate_token and vault.generate_new_token from other
# entries. Then check with:
#   minionvault master-check --config /etc/salt -f <manifests>
`, t.Name, t.Mount)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// issueOnly is the vault:issue mapping of a master that only issues, its
// issue:wrap and block_minion_requests kept.
func issueOnly(m *Master, t *Template) value.Value {
	str := value.NewString
	issue := []value.Pair{
		{Key: str("type"), Val: str("approle")},
		{Key: str("allow_minion_override_params"), Val: value.NewBool(false)},
	}
	for _, k := range []string{"wrap", "block_minion_requests"} {
		if v, ok := m.lookup("issue:" + k); ok {
			issue = append(issue, value.Pair{Key: str(k), Val: v})
		}
	}
	params := []value.Pair{{Key: str("bind_secret_id"), Val: value.NewBool(t.BindSecretID)}}
	for _, p := range comparedParams {
		params = append(params, value.Pair{Key: str(p), Val: value.NewNull()})
	}
	issue = append(issue, value.Pair{Key: str("approle"), Val: value.NewMap([]value.Pair{
		{Key: str("mount"), Val: str(t.Mount)},
		{Key: str("params"), Val: value.NewMap(params)},
	})})
	return value.NewMap(issue)
}

// comment sets the head comment of the key at path in a mapping node.
func comment(n *yaml.Node, path []string, text string) {
	for i, k := range path {
		found := false
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == k {
				if i == len(path)-1 {
					n.Content[j].HeadComment = "# " + strings.ReplaceAll(text, "\n", "\n# ")
					return
				}
				n, found = n.Content[j+1], true
				break
			}
		}
		if !found {
			return
		}
	}
}

// Policy is config/vault/salt-master-policy.hcl for the template's mount.
func Policy(t *Template) []byte {
	return []byte(vaultpolicy.SaltMasterPolicyFor(t.Mount))
}
