package saltext

import "github.com/minionvault/minion-vault-operator/pkg/value"

// What the Salt master replayer (internal/testing/saltmaster, test support)
// shares with this package, so that the master it replays parses its
// configuration and issue parameters, and handles Python values, with the
// very code the master-check uses. Nothing else needs these.

// ValueOf is get: _config(key), failing as parse_config does for a
// configuration without connection settings, and for a missing key.
func (c *Config) ValueOf(key string) (value.Value, error) { return c.get(key) }

// MustValueOf is mustGet: ValueOf for keys the defaults always hold.
func (c *Config) MustValueOf(key string) value.Value { return c.mustGet(key) }

// ParseIssueParamsValue is _parse_issue_params on Python values (see
// ParseIssueParams); issueType "" is the configured issue type.
func (c *Config) ParseIssueParamsValue(params value.Value, issueType string) (value.Value, error) {
	return c.parseIssueParams(params, issueType)
}

// ParamsMatchValue is ParamsMatch on Python values.
func ParamsMatchValue(current, issue value.Value) (bool, []Mismatch) {
	return paramsMatch(current, issue)
}

// PyInt is pyInt, int() of a float.
func PyInt(f float64) (int64, error) { return pyInt(f) }

// PyFloatLiteral is pyFloatLiteral: digitpart ["." [digitpart]] [exponent]
// checked, the underscores dropped.
func PyFloatLiteral(t string) (string, bool) { return pyFloatLiteral(t) }

// PyIsSpace is pyIsSpace, str.isspace for one character.
func PyIsSpace(r rune) bool { return pyIsSpace(r) }

// The Python-value helpers (see pyvalue.go).

// FromAny is fromAny: decoded Go data as a Value.
func FromAny(x any) value.Value { return fromAny(x) }

// ToAny is toAny: a Value as plain Go data.
func ToAny(v value.Value) any { return toAny(v) }

// ToMap is toMap, toAny for a mapping.
func ToMap(v value.Value) map[string]any { return toMap(v) }

// Str is str, a Value holding a string.
func Str(s string) value.Value { return str(s) }

// OMap is omap, an ordered mapping from key, value pairs.
func OMap(kv ...any) value.Value { return omap(kv...) }

// DictGet is get, d[key] for a string key.
func DictGet(d value.Value, key string) (value.Value, bool) { return get(d, key) }

// DictHas is has, `key in d` for a mapping.
func DictHas(d value.Value, key string) bool { return has(d, key) }

// DictSet is set, d[key] = val.
func DictSet(d value.Value, key string, val value.Value) value.Value { return set(d, key, val) }

// DictPop is pop, d.pop(key).
func DictPop(d value.Value, key string) (value.Value, value.Value) { return pop(d, key) }
