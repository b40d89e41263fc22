// Package vault embeds the operator's Vault ACL policy, so that
// `minionvault dev` can give its local operator exactly that policy.
package vault

import _ "embed"

// OperatorPolicy is operator-policy.hcl: the least-privilege ACL policy of
// the operator's own Vault token.
//
//go:embed operator-policy.hcl
var OperatorPolicy string
