package saltmaster

import (
	"math"

	"github.com/minionvault/minion-vault-operator/internal/saltext"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// The configuration, the issue parameters and the Python-value helpers are
// internal/saltext's, the product code the master-check uses; these short
// names keep the port as close to the Python it cites as before the split.

func fromAny(x any) value.Value                         { return saltext.FromAny(x) }
func toAny(v value.Value) any                           { return saltext.ToAny(v) }
func toMap(v value.Value) map[string]any                { return saltext.ToMap(v) }
func str(s string) value.Value                          { return saltext.Str(s) }
func omap(kv ...any) value.Value                        { return saltext.OMap(kv...) }
func get(d value.Value, key string) (value.Value, bool) { return saltext.DictGet(d, key) }
func has(d value.Value, key string) bool                { return saltext.DictHas(d, key) }
func set(d value.Value, key string, val value.Value) value.Value {
	return saltext.DictSet(d, key, val)
}
func pyInt(f float64) (int64, error)                           { return saltext.PyInt(f) }
func pyFloatLiteral(t string) (string, bool)                   { return saltext.PyFloatLiteral(t) }
func pyIsSpace(r rune) bool                                    { return saltext.PyIsSpace(r) }
func pop(d value.Value, key string) (value.Value, value.Value) { return saltext.DictPop(d, key) }
func paramsMatch(current, issue value.Value) (bool, []saltext.Mismatch) {
	return saltext.ParamsMatchValue(current, issue)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// serverConfig is runners/vault.py:1311-1316 _get_server_config: url_alts
// is left out when it holds nothing but the url, for older minions.
func serverConfig(c *saltext.Config) value.Value {
	server := c.MustValueOf("server")
	if alts, ok := get(server, "url_alts"); ok {
		url, _ := get(server, "url")
		if !alts.Truthy() || value.Equal(alts, value.NewList([]value.Value{url})) {
			server, _ = pop(server, "url_alts")
		}
	}
	return server
}

// pyRoundTime is Python's round(time.time()) (leases.py:51, 59), which
// rounds half to even.
func pyRoundTime(ns int64) int64 {
	return int64(math.RoundToEven(float64(ns) / 1e9))
}
