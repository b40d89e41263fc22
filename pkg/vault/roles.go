package vault

import "encoding/json"

// Role parameters Vault 1.21 reads as durations and as counts
// (pkg/vault/vaulttest's fake lists them the same).
var (
	roleDurations = []string{"secret_id_ttl", "token_explicit_max_ttl", "token_max_ttl", "token_period", "token_ttl"}
	roleInts      = []string{"secret_id_num_uses", "token_num_uses"}
)

// RoleDefaults is the read of a role written with no parameters, as Vault
// 1.21 answers it (path_role.go; numbers as json.Number): what a role has
// where its writer set nothing.
func RoleDefaults() map[string]any {
	m := map[string]any{
		"bind_secret_id":          true,
		"local_secret_ids":        false,
		"secret_id_bound_cidrs":   nil,
		"token_bound_cidrs":       []any{},
		"token_no_default_policy": false,
		"token_policies":          []any{},
		"token_type":              "default",
	}
	for _, k := range roleDurations {
		m[k] = json.Number("0")
	}
	for _, k := range roleInts {
		m[k] = json.Number("0")
	}
	return m
}
