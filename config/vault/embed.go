// Package vault embeds the Vault ACL policies the project ships: the
// operator's, so that `minionvault dev` can give its local operator exactly
// that policy, and a Salt master's beside it, which `minionvault import`
// writes for the imported mount.
package vault

import (
	_ "embed"
	"strings"
)

// OperatorPolicy is operator-policy.hcl: the least-privilege ACL policy of
// the operator's own Vault token.
//
//go:embed operator-policy.hcl
var OperatorPolicy string

// SaltMasterPolicy is salt-master-policy.hcl: the ACL policy of a Salt
// master that only issues credentials (role IDs and secret IDs) for the
// AppRole roles the operator owns, on the mount "salt-minions".
//
//go:embed salt-master-policy.hcl
var SaltMasterPolicy string

// SaltMasterPolicyFor is SaltMasterPolicy for the minions' AppRole mount.
func SaltMasterPolicyFor(mount string) string {
	return strings.ReplaceAll(SaltMasterPolicy, "salt-minions", mount)
}
