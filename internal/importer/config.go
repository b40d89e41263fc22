package importer

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// File is one input file: its name (for messages) and its contents.
type File struct {
	Name string
	Data []byte
}

// KV is one metadata entry: a literal key and a value pattern.
type KV struct {
	Key     string
	Pattern string
}

// Config is what the import understood of a Salt master's vault
// configuration, after saltext-vault's translation of legacy shapes
// (saltext.vault.utils.vault.parse_config). It never holds a credential.
type Config struct {
	// ServerURL and ServerNamespace are vault:server:url and
	// vault:server:namespace (legacy: vault:url, vault:namespace).
	ServerURL       string
	ServerNamespace string
	// AuthMethod is the master's own login method (vault:auth:method),
	// reported only: the operator logs in with its own credentials.
	AuthMethod string
	// IssueType is vault:issue:type: token (saltext's default) or approle.
	IssueType string
	// Policies is vault:policies:assign (legacy: vault:policies as a list);
	// nil when not configured (saltext's default applies).
	Policies []string
	// EntityMetadata and SecretMetadata are vault:metadata:entity and
	// vault:metadata:secret as configured (saltext merges them into its
	// defaults, as the operator does); nil when not configured.
	EntityMetadata []KV
	SecretMetadata []KV
	// PillarPaths are the path= patterns of the vault ext_pillar entries.
	PillarPaths []string
	// AppRole holds vault:issue:approle:mount and the params saltext
	// sends to Vault; nil when nothing is configured.
	AppRole *v1alpha1.MinionAppRoleSpec
	// Warnings are things not converted, or converted with a caveat. They
	// name configuration keys, never secret values.
	Warnings []string

	urlSeen bool
}

func (c *Config) warnf(format string, args ...any) {
	c.Warnings = append(c.Warnings, fmt.Sprintf(format, args...))
}

// Limits of the CRDs (api/v1alpha1 markers), checked here so that the API
// server accepts what the import writes.
const (
	maxPolicies      = 64
	maxPatternLen    = 1024
	maxMetadataPairs = 64
	maxMetadataKey   = 128
	maxPillarPaths   = 64
	maxCIDRs         = 32
	maxCIDRLen       = 64
	maxNumUses       = 1000000
	maxMountLen      = 128
	maxNamespaceLen  = 255
	maxAddressLen    = 2048
)

var (
	mountRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)*$`)
	durationRE = regexp.MustCompile(`^[0-9]+([.][0-9]+)?[smhd]?$`)
)

// vaultKeys are the top-level keys of a vault mapping, modern and legacy:
// a file holding some of them and no "vault" key is a bare vault mapping.
var vaultKeys = []string{
	"auth", "cache", "config_location", "issue", "issue_params", "keys",
	"metadata", "policies", "server",
	// legacy (Salt core's vault modules before 3007)
	"url", "namespace", "verify", "role_name",
}

// ParseConfig reads Salt master configuration files (YAML or JSON) in
// order, merging them as Salt merges master.d files (mappings recursively,
// later values win), and converts the vault: configuration and the vault
// ext_pillar entries. A file may also hold just the vault mapping.
func ParseConfig(files ...File) (*Config, error) {
	merged, err := MergeFiles(files...)
	if err != nil {
		return nil, err
	}
	vault, ok := merged.GetString("vault")
	if !ok || vault.IsNull() {
		return nil, errors.New("no vault configuration: expected a top-level vault: key, or a file holding the vault mapping")
	}
	if !vault.IsMap() {
		return nil, fmt.Errorf("vault: is a %s, not a mapping", vault.Kind().PyType())
	}
	c := &Config{}
	if err := c.parseVault(vault); err != nil {
		return nil, err
	}
	if ep, ok := merged.GetString("ext_pillar"); ok {
		if err := c.parseExtPillar(ep); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// MergeFiles reads Salt master configuration files (YAML or JSON) in order
// and merges them as Salt does (salt.config.master_config): the included
// files (master.d) one after the other with salt.utils.dictupdate.update
// and merge_lists (mappings recursively, lists extended by the items they
// lack, anything else replaced); when the first of several files is named
// "master", it is the main file, whose top-level keys the includes then
// replace whole (dict.update). A file holding just the vault mapping is
// read as the vault: key.
func MergeFiles(files ...File) (value.Value, error) {
	var main *value.Value
	merged := value.NewMap(nil)
	for i, f := range files {
		v, err := value.DecodeYAML(f.Data)
		if err != nil {
			return value.Value{}, fmt.Errorf("%s: %w", f.Name, err)
		}
		if v.IsNull() {
			v = value.NewMap(nil)
		}
		if !v.IsMap() {
			return value.Value{}, fmt.Errorf("%s: the configuration is a %s, not a mapping", f.Name, v.Kind().PyType())
		}
		if isBareVault(v) {
			v = value.NewMap([]value.Pair{{Key: value.NewString("vault"), Val: v}})
		}
		if i == 0 && len(files) > 1 && filepath.Base(f.Name) == "master" {
			main = &v
			continue
		}
		merged = mergeMaps(merged, v)
	}
	if main == nil {
		return merged, nil
	}
	out := *main
	for _, p := range merged.Pairs() {
		out = out.Set(p.Key, p.Val)
	}
	return out, nil
}

func isBareVault(m value.Value) bool {
	if _, ok := m.GetString("vault"); ok {
		return false
	}
	for _, k := range vaultKeys {
		if _, ok := m.GetString(k); ok {
			return true
		}
	}
	return false
}

// mergeMaps is salt.utils.dictupdate.update with merge_lists, as Salt's
// include_config calls it: mappings merge recursively, a list is extended
// by the items it lacks, anything else is replaced.
func mergeMaps(dst, src value.Value) value.Value {
	if dst.Len() == 0 {
		return src
	}
	for _, p := range src.Pairs() {
		old, ok := dst.Get(p.Key)
		switch {
		case ok && old.IsMap() && p.Val.IsMap():
			dst = dst.Set(p.Key, mergeMaps(old, p.Val))
		case ok && old.IsList() && p.Val.IsList():
			items := slices.Clone(old.Items())
			for _, it := range p.Val.Items() {
				if !slices.ContainsFunc(items, func(x value.Value) bool { return value.Equal(x, it) }) {
					items = append(items, it)
				}
			}
			dst = dst.Set(p.Key, value.NewList(items))
		default:
			dst = dst.Set(p.Key, p.Val)
		}
	}
	return dst
}

func keyName(k value.Value) string { return k.PyStr() }

// asMapping reads a section saltext expects to be a mapping. ok is false
// when there is nothing to read: a null section, which saltext leaves to its
// defaults, or (with err) a section of another kind, refused in one wording
// for every section; what names the shape expected.
func asMapping(v value.Value, path, what string) (pairs []value.Pair, ok bool, err error) {
	if v.IsNull() {
		return nil, false, nil
	}
	if !v.IsMap() {
		return nil, false, fmt.Errorf("%s must be %s, not a %s", path, what, v.Kind().PyType())
	}
	return v.Pairs(), true, nil
}

func (c *Config) parseVault(v value.Value) error {
	// Legacy: policies as a list is policies:assign.
	if p, ok := v.GetString("policies"); ok && p.IsList() {
		c.warnf("vault:policies is a list (legacy shape): read as vault:policies:assign")
		v = v.Set(value.NewString("policies"), value.NewMap([]value.Pair{{Key: value.NewString("assign"), Val: p}}))
	}
	var legacyServer []value.Pair
	for _, p := range v.Pairs() {
		key := keyName(p.Key)
		path := "vault:" + key
		var err error
		switch key {
		case "server":
			err = c.parseServer(p.Val, path)
		case "url", "namespace", "verify":
			// Legacy: parse_config moves these under server, where they
			// win over server's own keys: read them last.
			c.warnf("%s (legacy shape): read as vault:server:%s", path, key)
			legacyServer = append(legacyServer, p)
		case "auth":
			err = c.parseAuth(p.Val, path)
		case "issue":
			err = c.parseIssue(p.Val, path)
		case "policies":
			err = c.parsePolicies(p.Val, path)
		case "metadata":
			err = c.parseMetadata(p.Val, path)
		case "role_name":
			c.warnf("%s (legacy shape, vault:issue:token:role_name): not converted: the operator issues no tokens", path)
		case "cache":
			c.warnf("%s: not converted: the operator keeps no Salt cache", path)
		case "keys":
			c.warnf("%s: not converted (unseal keys; never copied)", path)
		case "config_location", "issue_params":
			c.warnf("%s: not converted: a minion-side setting", path)
		default:
			c.warnf("%s: unknown key, not converted", path)
		}
		if err != nil {
			return err
		}
	}
	if len(legacyServer) > 0 {
		if err := c.parseServer(value.NewMap(legacyServer), "vault"); err != nil {
			return err
		}
	}
	if c.IssueType == "" {
		c.IssueType = "token"
	}
	if c.IssueType == "token" {
		c.warnf("vault:issue:type is token (saltext's default): the master issues tokens; the operator manages per-minion AppRoles and entities instead, as issue:type approle does (switch the minions at cut-over, see docs/migration.md)")
	}
	if !c.urlSeen {
		c.warnf("vault:server:url is not set: no VaultConnection is written; create one yourself")
	}
	return nil
}

func (c *Config) parseServer(v value.Value, path string) error {
	pairs, ok, err := asMapping(v, path, "a mapping")
	if !ok {
		return err
	}
	for _, p := range pairs {
		key := keyName(p.Key)
		kp := path + ":" + key
		switch key {
		case "url":
			c.urlSeen = true
			if p.Val.IsNull() {
				c.warnf("%s is null: no VaultConnection is written", kp)
				c.ServerURL = ""
				continue
			}
			if !p.Val.IsString() {
				return fmt.Errorf("%s must be a string, not a %s", kp, p.Val.Kind().PyType())
			}
			u := strings.TrimSpace(p.Val.Str())
			if strings.HasPrefix(u, "sdb://") {
				c.warnf("%s is an SDB reference: not resolved; no VaultConnection is written", kp)
				c.ServerURL = ""
				continue
			}
			if !validAddress(u) {
				c.warnf("%s is not an absolute http or https URL: no VaultConnection is written", kp)
				c.ServerURL = ""
				continue
			}
			c.ServerURL = u
		case "namespace":
			if p.Val.IsNull() {
				c.ServerNamespace = ""
				continue
			}
			if !p.Val.IsString() {
				return fmt.Errorf("%s must be a string, not a %s", kp, p.Val.Kind().PyType())
			}
			if utf8.RuneCountInString(p.Val.Str()) > maxNamespaceLen {
				return fmt.Errorf("%s is longer than %d characters", kp, maxNamespaceLen)
			}
			c.ServerNamespace = p.Val.Str()
		case "verify":
			switch {
			case p.Val.IsNull():
			case p.Val.Kind() == value.Bool && p.Val.Bool():
			case p.Val.Kind() == value.Bool:
				c.warnf("%s is false: not converted; the VaultConnection verifies the server's certificate (set spec.tls yourself if you must)", kp)
			default:
				c.warnf("%s (a CA bundle): not converted; put the CA in a Secret and set the VaultConnection's spec.tls.caSecretRef", kp)
			}
		default:
			c.warnf("%s: unknown key, not converted", kp)
		}
	}
	return nil
}

func validAddress(s string) bool {
	if s == "" || len(s) > maxAddressLen {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// parseAuth reads only the method: every credential stays behind.
func (c *Config) parseAuth(v value.Value, path string) error {
	pairs, ok, err := asMapping(v, path, "a mapping")
	if !ok {
		return err
	}
	for _, p := range pairs {
		key := keyName(p.Key)
		kp := path + ":" + key
		switch key {
		case "method":
			if p.Val.IsString() {
				c.AuthMethod = p.Val.Str()
			}
		case "token", "role_id", "secret_id":
			c.warnf("%s: not copied (the master's own credential); fill in the VaultConnection's spec.auth", kp)
		case "approle_mount", "approle_name", "token_lifecycle":
			c.warnf("%s: not converted (the master's own login); fill in the VaultConnection's spec.auth", kp)
		case "ttl", "uses":
			c.warnf("%s (legacy shape, vault:issue:token:params): not converted: the operator issues no tokens", kp)
		case "token_backend":
			c.warnf("%s (legacy shape, vault:cache:backend): not converted: the operator keeps no Salt cache", kp)
		case "allow_minion_override":
			c.warnOverride(kp, p.Val)
		default:
			c.warnf("%s: unknown key, not converted", kp)
		}
	}
	return nil
}

func (c *Config) warnOverride(kp string, v value.Value) {
	if v.Truthy() {
		c.warnf("%s is set: not converted: minions cannot override AppRole parameters with the operator", kp)
	}
}

func (c *Config) parseIssue(v value.Value, path string) error {
	pairs, ok, err := asMapping(v, path, "a mapping")
	if !ok {
		return err
	}
	for _, p := range pairs {
		key := keyName(p.Key)
		kp := path + ":" + key
		switch key {
		case "type":
			if !p.Val.IsString() || (p.Val.Str() != "token" && p.Val.Str() != "approle") {
				return fmt.Errorf("%s must be token or approle", kp)
			}
			c.IssueType = p.Val.Str()
		case "approle":
			if err := c.parseIssueAppRole(p.Val, kp); err != nil {
				return err
			}
		case "token":
			if !p.Val.IsNull() {
				c.warnf("%s: not converted: the operator issues no tokens", kp)
			}
		case "allow_minion_override_params":
			c.warnOverride(kp, p.Val)
		case "wrap":
			c.warnf("%s: not converted: the operator hands nothing to minions (response wrapping does not apply)", kp)
		default:
			c.warnf("%s: unknown key, not converted", kp)
		}
	}
	return nil
}

func (c *Config) appRole() *v1alpha1.MinionAppRoleSpec {
	if c.AppRole == nil {
		c.AppRole = &v1alpha1.MinionAppRoleSpec{}
	}
	return c.AppRole
}

func (c *Config) parseIssueAppRole(v value.Value, path string) error {
	pairs, ok, err := asMapping(v, path, "a mapping")
	if !ok {
		return err
	}
	for _, p := range pairs {
		key := keyName(p.Key)
		kp := path + ":" + key
		switch key {
		case "mount":
			if p.Val.IsNull() {
				continue
			}
			if !p.Val.IsString() {
				return fmt.Errorf("%s must be a string, not a %s", kp, p.Val.Kind().PyType())
			}
			m := strings.Trim(p.Val.Str(), "/")
			if len(m) > maxMountLen || !mountRE.MatchString(m) {
				return fmt.Errorf("%s %q is not a Vault mount path (letters, digits, '_', '.', '-', segments separated by '/')", kp, p.Val.Str())
			}
			c.appRole().Mount = m
		case "params":
			if err := c.parseAppRoleParams(p.Val, kp); err != nil {
				return err
			}
		default:
			c.warnf("%s: unknown key, not converted", kp)
		}
	}
	return nil
}

// parseAppRoleParams maps saltext's approle params (VALID_PARAMS of the
// vault runner: the only ones it sends) to the appRole fields. saltext
// drops a null param, so Vault's own default applies: 0 for the counts and
// TTLs the operator would otherwise default.
func (c *Config) parseAppRoleParams(v value.Value, path string) error {
	pairs, ok, err := asMapping(v, path, "a mapping")
	if !ok {
		return err
	}
	a := c.appRole()
	zero := int64(0)
	zeroTTL := intstr.FromInt32(0)
	for _, p := range pairs {
		key := keyName(p.Key)
		kp := path + ":" + key
		val := p.Val
		var err error
		switch key {
		case "bind_secret_id":
			if val.IsNull() {
				continue // Vault's default is true, as the operator's
			}
			var b bool
			if b, err = boolParam(kp, val); err == nil {
				a.BindSecretID = &b
			}
		case "secret_id_num_uses", "token_num_uses":
			dst := &a.SecretIDNumUses
			if key == "token_num_uses" {
				dst = &a.TokenNumUses
			}
			if val.IsNull() {
				c.warnf("%s is null: saltext does not send it, so Vault's default 0 (unlimited) applies; written as 0", kp)
				*dst = &zero
				continue
			}
			var n int64
			if n, err = intParam(kp, val); err == nil {
				*dst = &n
			}
		case "secret_id_ttl", "token_explicit_max_ttl", "token_ttl", "token_max_ttl", "token_period":
			dst := map[string]**intstr.IntOrString{
				"secret_id_ttl":          &a.SecretIDTTL,
				"token_explicit_max_ttl": &a.TokenExplicitMaxTTL,
				"token_ttl":              &a.TokenTTL,
				"token_max_ttl":          &a.TokenMaxTTL,
				"token_period":           &a.TokenPeriod,
			}[key]
			if val.IsNull() {
				if key == "secret_id_ttl" || key == "token_explicit_max_ttl" {
					c.warnf("%s is null: saltext does not send it, so Vault's default 0 (no limit) applies; written as 0", kp)
					t := zeroTTL
					*dst = &t
				}
				continue
			}
			var t intstr.IntOrString
			if t, err = ttlParam(kp, val); err == nil {
				*dst = &t
			}
		case "secret_id_bound_cidrs", "token_bound_cidrs":
			dst := &a.SecretIDBoundCIDRs
			if key == "token_bound_cidrs" {
				dst = &a.TokenBoundCIDRs
			}
			if val.IsNull() {
				continue
			}
			*dst, err = c.cidrParam(kp, val)
		case "token_no_default_policy":
			if val.Truthy() {
				c.warnf("%s is true: not converted: the operator has no such setting; tokens also get Vault's default policy", kp)
			}
		case "token_type", "token_policies", "policies":
			c.warnf("%s: not converted: saltext does not send it to Vault", kp)
		default:
			c.warnf("%s: unknown AppRole parameter, not converted (saltext does not send it)", kp)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func boolParam(kp string, v value.Value) (bool, error) {
	switch v.Kind() {
	case value.Bool:
		return v.Bool(), nil
	case value.Int:
		if v.Int() == 0 || v.Int() == 1 {
			return v.Int() == 1, nil
		}
	case value.String:
		if b, err := strconv.ParseBool(v.Str()); err == nil {
			return b, nil
		}
	}
	return false, fmt.Errorf("%s must be true or false", kp)
}

func intParam(kp string, v value.Value) (int64, error) {
	var n int64
	switch v.Kind() {
	case value.Int:
		n = v.Int()
	case value.Float:
		f := v.Float()
		if f != math.Trunc(f) || f < 0 || f > maxNumUses {
			return 0, fmt.Errorf("%s must be a whole number from 0 to %d", kp, maxNumUses)
		}
		n = int64(f)
	case value.String:
		var err error
		if n, err = strconv.ParseInt(strings.TrimSpace(v.Str()), 10, 64); err != nil {
			return 0, fmt.Errorf("%s must be a whole number from 0 to %d", kp, maxNumUses)
		}
	default:
		return 0, fmt.Errorf("%s must be a whole number, not a %s", kp, v.Kind().PyType())
	}
	if n < 0 || n > maxNumUses {
		return 0, fmt.Errorf("%s must be from 0 to %d", kp, maxNumUses)
	}
	return n, nil
}

// ttlParam converts a TTL to what the CRD accepts: a non-negative integer,
// or a string of a number with an optional unit s, m, h or d. Go duration
// strings Vault also accepts ("1h30m") become whole seconds.
func ttlParam(kp string, v value.Value) (intstr.IntOrString, error) {
	switch v.Kind() {
	case value.Int:
		n := v.Int()
		if n < 0 {
			return intstr.IntOrString{}, fmt.Errorf("%s must not be negative", kp)
		}
		if n <= math.MaxInt32 {
			return intstr.FromInt32(int32(n)), nil
		}
		return intstr.FromString(strconv.FormatInt(n, 10)), nil
	case value.Float:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return intstr.IntOrString{}, fmt.Errorf("%s must be a non-negative number of seconds", kp)
		}
		if f == math.Trunc(f) && f <= math.MaxInt32 {
			return intstr.FromInt32(int32(f)), nil
		}
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !durationRE.MatchString(s) {
			return intstr.IntOrString{}, fmt.Errorf("%s is out of range", kp)
		}
		return intstr.FromString(s), nil
	case value.String:
		s := strings.TrimSpace(v.Str())
		if durationRE.MatchString(s) {
			return intstr.FromString(s), nil
		}
		if d, err := time.ParseDuration(s); err == nil && d >= 0 && d/time.Second <= math.MaxInt32 {
			return intstr.FromInt32(int32(d / time.Second)), nil
		}
		return intstr.IntOrString{}, fmt.Errorf("%s %q is not a duration (seconds, or a number with s, m, h or d)", kp, s)
	}
	return intstr.IntOrString{}, fmt.Errorf("%s must be a duration, not a %s", kp, v.Kind().PyType())
}

// cidrParam reads a list of CIDR blocks, or a comma-separated string as
// Vault also accepts. The CRD lists are sets: duplicates are dropped.
func (c *Config) cidrParam(kp string, v value.Value) ([]string, error) {
	var raw []string
	switch v.Kind() {
	case value.String:
		raw = strings.Split(v.Str(), ",")
	case value.List:
		for _, it := range v.Items() {
			if !it.IsString() {
				return nil, fmt.Errorf("%s must hold strings, not a %s", kp, it.Kind().PyType())
			}
			raw = append(raw, it.Str())
		}
	default:
		return nil, fmt.Errorf("%s must be a list of CIDR blocks, not a %s", kp, v.Kind().PyType())
	}
	out := []string{}
	for _, s := range raw {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if len(s) > maxCIDRLen {
			return nil, fmt.Errorf("%s: %q is longer than %d characters", kp, s, maxCIDRLen)
		}
		if slices.Contains(out, s) {
			c.warnf("%s: duplicate %q dropped", kp, s)
			continue
		}
		out = append(out, s)
	}
	if len(out) > maxCIDRs {
		return nil, fmt.Errorf("%s: more than %d CIDR blocks", kp, maxCIDRs)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func (c *Config) parsePolicies(v value.Value, path string) error {
	if v.IsNull() {
		c.warnf("%s is null: saltext's default policies apply", path)
		return nil
	}
	pairs, ok, err := asMapping(v, path, "a mapping (or, legacy, a list)")
	if !ok {
		return err
	}
	for _, p := range pairs {
		key := keyName(p.Key)
		kp := path + ":" + key
		switch key {
		case "assign":
			if p.Val.IsNull() {
				c.warnf("%s is null: saltext's default policies apply", kp)
				continue
			}
			if !p.Val.IsList() {
				return fmt.Errorf("%s must be a list of patterns, not a %s", kp, p.Val.Kind().PyType())
			}
			policies := []string{}
			for i, it := range p.Val.Items() {
				if !it.IsString() {
					return fmt.Errorf("%s[%d] must be a string, not a %s", kp, i, it.Kind().PyType())
				}
				s := it.Str()
				if s == "" {
					c.warnf("%s[%d] is empty: dropped", kp, i)
					continue
				}
				if utf8.RuneCountInString(s) > maxPatternLen {
					return fmt.Errorf("%s[%d] is longer than %d characters", kp, i, maxPatternLen)
				}
				policies = append(policies, s)
			}
			if len(policies) > maxPolicies {
				return fmt.Errorf("%s has %d patterns, more than the %d a MinionTemplate holds", kp, len(policies), maxPolicies)
			}
			c.Policies = policies
		case "cache_time", "refresh_pillar":
			c.warnf("%s: not converted: the operator renders from the binding's pillar, with no cache", kp)
		default:
			c.warnf("%s: unknown key, not converted", kp)
		}
	}
	return nil
}

func (c *Config) parseMetadata(v value.Value, path string) error {
	pairs, ok, err := asMapping(v, path, "a mapping")
	if !ok {
		return err
	}
	for _, p := range pairs {
		key := keyName(p.Key)
		kp := path + ":" + key
		switch key {
		case "entity", "secret":
			kvs, err := c.metadataKVs(p.Val, kp)
			if err != nil {
				return err
			}
			if key == "entity" {
				c.EntityMetadata = kvs
			} else {
				c.SecretMetadata = kvs
			}
		default:
			c.warnf("%s: unknown key, not converted", kp)
		}
	}
	return nil
}

func (c *Config) metadataKVs(v value.Value, path string) ([]KV, error) {
	if v.IsNull() {
		c.warnf("%s is null: saltext's default metadata apply", path)
		return nil, nil
	}
	pairs, ok, err := asMapping(v, path, "a mapping of key to pattern")
	if !ok {
		return nil, err
	}
	kvs := []KV{}
	for _, p := range pairs {
		key := keyName(p.Key)
		kp := path + ":" + key
		if !p.Val.IsString() {
			return nil, fmt.Errorf("%s must be a string pattern, not a %s", kp, p.Val.Kind().PyType())
		}
		if n := utf8.RuneCountInString(key); n < 1 || n > maxMetadataKey {
			return nil, fmt.Errorf("%s: metadata keys must be 1 to %d characters", kp, maxMetadataKey)
		}
		if utf8.RuneCountInString(p.Val.Str()) > maxPatternLen {
			return nil, fmt.Errorf("%s is longer than %d characters", kp, maxPatternLen)
		}
		kvs = append(kvs, KV{Key: key, Pattern: p.Val.Str()})
		fields := template.Compile(p.Val.Str()).Fields()
		for _, f := range fields {
			switch {
			case f == "jid" || f == "user":
				c.warnf("%s uses {%s}: the operator renders it as %q (Salt fills in the job's)", kp, f, map[string]string{"jid": template.DefaultJID, "user": template.DefaultUser}[f])
			case f == "grains" || strings.HasPrefix(f, "grains["):
				c.warnf("%s uses {%s}: grains are not visible in metadata (empty, as in Salt)", kp, f)
			}
		}
	}
	if len(kvs) > maxMetadataPairs {
		return nil, fmt.Errorf("%s has %d keys, more than the %d a MinionTemplate holds", path, len(kvs), maxMetadataPairs)
	}
	return kvs, nil
}

// parseExtPillar collects the path= patterns of vault ext_pillar entries:
// "- vault: path=..." (the conf string), "- vault: {conf: path=...}", or
// "- vault: [path=...]". saltext uses the first path= of a conf string.
func (c *Config) parseExtPillar(v value.Value) error {
	if v.IsNull() {
		return nil
	}
	if !v.IsList() {
		c.warnf("ext_pillar is a %s, not a list: not converted", v.Kind().PyType())
		return nil
	}
	for i, entry := range v.Items() {
		vault, ok := entry.GetString("vault")
		if !ok {
			continue
		}
		kp := fmt.Sprintf("ext_pillar[%d]:vault", i)
		var conf value.Value
		switch vault.Kind() {
		case value.String:
			conf = vault
		case value.List:
			if len(vault.Items()) > 0 {
				conf = vault.Items()[0]
			}
			if len(vault.Items()) > 1 {
				c.warnf("%s: arguments after conf not converted (nesting_key, merge settings)", kp)
			}
		case value.Map:
			for _, p := range vault.Pairs() {
				switch k := keyName(p.Key); k {
				case "conf":
					conf = p.Val
				default:
					c.warnf("%s:%s: not converted: the operator renders pillar paths, not the pillar itself", kp, k)
				}
			}
		}
		if !conf.IsString() {
			c.warnf("%s: no conf string with path=: not converted", kp)
			continue
		}
		var path string
		found := false
		for _, comp := range strings.Fields(conf.Str()) {
			if p, ok := strings.CutPrefix(comp, "path="); ok {
				path, found = p, true
				break
			}
		}
		switch {
		case !found:
			c.warnf("%s: no path= in the conf string: not converted (saltext ignores it too)", kp)
			continue
		case path == "":
			c.warnf("%s: empty path=: not converted", kp)
			continue
		case utf8.RuneCountInString(path) > maxPatternLen:
			return fmt.Errorf("%s: path longer than %d characters", kp, maxPatternLen)
		}
		c.PillarPaths = append(c.PillarPaths, path)
		if fs := template.Compile(path).Fields(); slices.ContainsFunc(fs, func(f string) bool { return f == "grains" || strings.HasPrefix(f, "grains[") }) {
			c.warnf("%s: {grains[...]} is not visible in pillar paths (the pattern yields nothing, as in Salt)", kp)
		}
	}
	if len(c.PillarPaths) > maxPillarPaths {
		return fmt.Errorf("ext_pillar: %d vault paths, more than the %d a MinionTemplate holds", len(c.PillarPaths), maxPillarPaths)
	}
	return nil
}
