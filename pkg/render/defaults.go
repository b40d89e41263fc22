package render

import "github.com/minionvault/minion-vault-operator/pkg/template"

// saltext-vault's defaults (templating spec §8).
var (
	DefaultPolicies       = []string{"saltstack/minions", "saltstack/{minion}"}
	DefaultEntityMetadata = []template.KV{{Key: "minion-id", Value: "{minion}"}}
	DefaultSecretMetadata = []template.KV{
		{Key: "saltstack-jid", Value: "{jid}"},
		{Key: "saltstack-minion", Value: "{minion}"},
		{Key: "saltstack-user", Value: "{user}"},
	}
)

// Operator defaults where saltext has none.
const (
	DefaultEntityName   = "salt_minion_{minion}"
	DefaultAppRoleMount = "salt-minions"
)

// mergeMetadata is a Python dict update: a user key overrides the default
// in place, a new key is appended.
func mergeMetadata(defaults, user []template.KV) []template.KV {
	out := make([]template.KV, len(defaults), len(defaults)+len(user))
	copy(out, defaults)
	for _, kv := range user {
		replaced := false
		for i := range out {
			if out[i].Key == kv.Key {
				out[i].Value = kv.Value
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}
