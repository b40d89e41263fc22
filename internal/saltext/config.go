package saltext

import (
	"fmt"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Config is a Salt master's `vault:` configuration after saltext merged
// its defaults in (utils/vault/factory.py:1128-1297 parse_config).
type Config struct {
	v value.Value
	// invalid is parse_config's validation error (no auth token, no
	// server:url): every runner call fails with it, as saltext's _config
	// raises it, but the issuing settings can still be read.
	invalid error
}

// defaultConfig is factory.py:1138-1217 default_config, in its order, with
// the client defaults of client.py:63-76. JSON keeps the float/int
// distinction of the Python literals (9.2, 10.0 and 30 print as written).
const defaultConfig = `{
 "auth": {"approle_mount": "approle", "approle_name": "salt-master", "method": "token", "secret_id": null,
  "token_lifecycle": {"minimum_ttl": 10, "renew_increment": null}},
 "cache": {"backend": "session", "clear_attempt_revocation": 60, "clear_on_unauthorized": true, "config": 3600,
  "expire_events": false, "kv_metadata": "connection", "secret": "ttl"},
 "client": {"connect_timeout": 9.2, "read_timeout": 30, "max_retries": 5, "backoff_factor": 0.1, "backoff_max": 10.0,
  "backoff_jitter": 0.2, "retry_post": false, "retry_status": [412, 500, 502, 503, 504], "respect_retry_after": true,
  "retry_after_max": 60},
 "issue": {"allow_minion_override_params": false, "block_minion_requests": false, "type": "token",
  "approle": {"mount": "salt-minions", "params": {"bind_secret_id": true, "secret_id_num_uses": 1, "secret_id_ttl": 60,
   "token_explicit_max_ttl": 60, "token_num_uses": 10}},
  "token": {"role_name": null, "params": {"explicit_max_ttl": null, "num_uses": 1}},
  "wrap": "30s"},
 "issue_params": {},
 "metadata": {"entity": {"minion-id": "{minion}"},
  "secret": {"saltstack-jid": "{jid}", "saltstack-minion": "{minion}", "saltstack-user": "{user}"}},
 "policies": {"assign": ["saltstack/minions", "saltstack/{minion}"], "cache_time": 60, "refresh_pillar": null},
 "server": {"url_alts": [], "namespace": null, "verify": null}
}`

var defaults = func() value.Value {
	v, err := value.DecodeJSON([]byte(defaultConfig))
	if err != nil {
		panic(err)
	}
	return v
}()

// NewConfig builds the configuration from the master's `vault:` mapping as
// decoded from YAML into Go maps. Go maps have no order, so their keys are
// taken sorted; the order of metadata:entity and metadata:secret decides
// the order of keys in what the master sends, so callers that need it byte
// for byte use NewConfigValue or NewConfigFromMasterYAML.
func NewConfig(vault map[string]any) (*Config, error) {
	return NewConfigValue(fromAny(vault))
}

// NewConfigFromMasterYAML reads a Salt master configuration file and builds
// the configuration from its `vault:` key, keeping the file's key order.
func NewConfigFromMasterYAML(data []byte) (*Config, error) {
	doc, err := value.DecodeYAML(data)
	if err != nil {
		return nil, fmt.Errorf("parsing the master configuration: %w", err)
	}
	vault, ok := get(doc, "vault")
	if !ok {
		// __opts__.get("vault", {})
		vault = value.NewMap(nil)
	}
	return NewConfigValue(vault)
}

// NewConfigValue builds the configuration from the `vault:` mapping. It
// fails only when there is nothing to merge (not a mapping); a
// configuration the master could not connect with is kept, and Validate
// says why.
func NewConfigValue(vault value.Value) (*Config, error) {
	v, err := parseConfig(vault)
	if err != nil {
		return nil, err
	}
	return &Config{v: v, invalid: validateConfig(v)}, nil
}

// Validate is parse_config's check of the connection settings
// (factory.py:1283-1296): the error every runner call fails with.
func (c *Config) Validate() error { return c.invalid }

// Value returns the merged configuration.
func (c *Config) Value() value.Value { return c.v }

// Get is the runner's _config(key) (runners/vault.py:938-948): a
// colon-separated path into the merged configuration.
func (c *Config) Get(key string) (any, bool) {
	v, ok := c.lookup(key)
	return toAny(v), ok
}

// lookup is salt.utils.data.traverse_dict: only mappings are walked.
func (c *Config) lookup(key string) (value.Value, bool) {
	ptr := c.v
	for _, each := range strings.Split(key, ":") {
		next, ok := get(ptr, each)
		if !ok {
			return value.Value{}, false
		}
		ptr = next
	}
	return ptr, true
}

// get is _config(key): it fails as parse_config does for a configuration
// without connection settings, and for a missing key.
func (c *Config) get(key string) (value.Value, error) {
	if c.invalid != nil {
		return value.Value{}, c.invalid
	}
	v, ok := c.lookup(key)
	if !ok {
		return v, saltErr("VaultException", "Requested configuration value %s does not exist.", key)
	}
	return v, nil
}

// mustGet is get for keys the defaults always hold.
func (c *Config) mustGet(key string) value.Value {
	v, _ := c.lookup(key)
	return v
}

// IssueType is issue:type ("token", "approle").
func (c *Config) IssueType() string { return c.mustGet("issue:type").PyStr() }

// Mount is issue:approle:mount, the minions' AppRole mount.
func (c *Config) Mount() string { return c.mustGet("issue:approle:mount").PyStr() }

// parseConfig is factory.py:1128-1281 parse_config for the master up to
// its validation (opts is None there, so the minion's local overrides of
// 1250-1276 do not apply).
func parseConfig(config value.Value) (value.Value, error) {
	if !config.IsMap() {
		// config.get(...) on a non-dict
		return value.Value{}, saltErr("AttributeError", "'%s' object has no attribute 'get'", config.Kind().PyType())
	}
	// 1219-1220: an old-style policies list becomes policies:assign.
	if pol, ok := get(config, "policies"); ok && pol.IsList() {
		config, pol = pop(config, "policies")
		config = set(config, "policies", omap("assign", pol))
	}
	// 1221-1226: salt.utils.dictupdate.merge, strategy "smart" (recurse),
	// merge_lists False: a null, a scalar or a list replaces the default.
	merged := dictUpdate(defaults, config)

	var err error
	auth, _ := get(merged, "auth")
	if !auth.IsMap() {
		return value.Value{}, saltErr("TypeError", "argument of type '%s' is not iterable", auth.Kind().PyType())
	}
	// 1229-1236: auth:ttl and auth:uses were token issue parameters.
	for _, m := range [][2]string{{"ttl", "explicit_max_ttl"}, {"uses", "num_uses"}} {
		if has(auth, m[0]) {
			var val value.Value
			auth, val = pop(auth, m[0])
			merged = set(merged, "auth", auth)
			if merged, err = setIn(merged, []string{"issue", "token", "params", m[1]}, val); err != nil {
				return value.Value{}, err
			}
			if merged, err = setIn(merged, []string{"issue_params", m[1]}, val); err != nil {
				return value.Value{}, err
			}
		}
	}
	// 1239-1241: namespace, url, verify at the top level.
	for _, k := range []string{"namespace", "url", "verify"} {
		if has(merged, k) {
			var val value.Value
			merged, val = pop(merged, k)
			if merged, err = setIn(merged, []string{"server", k}, val); err != nil {
				return value.Value{}, err
			}
		}
	}
	// 1242-1249: role_name, auth:token_backend, auth:allow_minion_override.
	moves := []struct {
		from, key string
		to        []string
	}{
		{"", "role_name", []string{"issue", "token", "role_name"}},
		{"auth", "token_backend", []string{"cache", "backend"}},
		{"auth", "allow_minion_override", []string{"issue", "allow_minion_override_params"}},
	}
	for _, mv := range moves {
		src := merged
		if mv.from != "" {
			src, _ = get(merged, mv.from)
		}
		if !has(src, mv.key) {
			continue
		}
		src, val := pop(src, mv.key)
		if mv.from != "" {
			merged = set(merged, mv.from, src)
		} else {
			merged = src
		}
		if merged, err = setIn(merged, mv.to, val); err != nil {
			return value.Value{}, err
		}
	}
	// 1278-1279: the url is always one of url_alts.
	server, _ := get(merged, "server")
	if url, ok := get(server, "url"); ok {
		alts, _ := get(server, "url_alts")
		if !containsValue(alts, url) {
			if !alts.IsList() {
				return value.Value{}, saltErr("TypeError", "can only concatenate list (not \"%s\") to list", alts.Kind().PyType())
			}
			items := append([]value.Value{url}, alts.Items()...)
			merged, _ = setIn(merged, []string{"server", "url_alts"}, value.NewList(items))
		}
	}
	return merged, nil
}

// validateConfig is factory.py:1283-1296.
func validateConfig(merged value.Value) error {
	invalid := func(format string, args ...any) error {
		return saltErr("InvalidConfigError", "Invalid vault configuration: "+format, args...)
	}
	auth, _ := get(merged, "auth")
	method, _ := get(auth, "method")
	switch {
	case value.Equal(method, str("approle")):
		if !has(auth, "role_id") {
			return invalid("auth:role_id is required for approle auth")
		}
	case value.Equal(method, str("token")), value.Equal(method, str("wrapped_token")):
		if !has(auth, "token") {
			return invalid("auth:token is required for token auth")
		}
	default:
		return invalid("`%s` is not a valid auth method.", method.PyStr())
	}
	server, _ := get(merged, "server")
	if !has(server, "url") {
		return invalid("server:url is required")
	}
	return nil
}

// dictUpdate is salt/utils/dictupdate.py update(dest, upd) with
// merge_lists False, on a copy of dest: mappings merge recursively, every
// other value of upd replaces dest's, new keys go to the end.
func dictUpdate(dest, upd value.Value) value.Value {
	for _, p := range upd.Pairs() {
		if cur, ok := dest.Get(p.Key); ok && cur.IsMap() && p.Val.IsMap() {
			dest = dest.Set(p.Key, dictUpdate(cur, p.Val))
			continue
		}
		dest = dest.Set(p.Key, p.Val)
	}
	return dest
}

// containsValue is Python's `x in list` (for a non-list: false).
func containsValue(list, x value.Value) bool {
	for _, it := range list.Items() {
		if value.Equal(it, x) {
			return true
		}
	}
	return false
}
