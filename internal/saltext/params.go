package saltext

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// validParams is runners/vault.py:48-72 VALID_PARAMS, in order: the order
// in which _parse_issue_params builds its result.
var validParams = map[string][]string{
	"approle": {
		"bind_secret_id",
		"secret_id_bound_cidrs",
		"secret_id_num_uses",
		"secret_id_ttl",
		"token_ttl",
		"token_max_ttl",
		"token_explicit_max_ttl",
		"token_num_uses",
		"token_no_default_policy",
		"token_period",
		"token_bound_cidrs",
	},
	"token": {"ttl", "period", "explicit_max_ttl", "num_uses", "no_default_policy", "renewable"},
}

// noOverrideParams is runners/vault.py:74-87 NO_OVERRIDE_PARAMS.
var noOverrideParams = map[string][]string{
	"approle": {"bind_secret_id", "token_policies", "policies"},
	"token":   {"role_name", "policies", "meta"},
}

// comparedParams is the set _approle_params_match loops over
// (runners/vault.py:464): VALID_PARAMS minus NO_OVERRIDE_PARAMS for
// approle. saltext iterates a set; the result does not depend on the order,
// and mismatches are reported in VALID_PARAMS order.
var comparedParams = func() []string {
	var out []string
	for _, p := range validParams["approle"] {
		if !contains(noOverrideParams["approle"], p) {
			out = append(out, p)
		}
	}
	return out
}()

// ComparedParams are the AppRole parameters the master compares with a
// role and rewrites it over, in VALID_PARAMS order.
func ComparedParams() []string { return append([]string(nil), comparedParams...) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ParseIssueParams is what the master issues a minion's AppRole with
// (runners/vault.py:1141-1168 _parse_issue_params): issue:approle:params
// after saltext's defaults (a null drops a key), the minion's issue_params
// on top when issue:allow_minion_override_params is true, TTLs and
// token_period as int seconds (helpers.timestring_map). minionOverrides is
// the minion's vault:issue_params; nil for none. The connection settings
// are not needed: a configuration that fails Validate still parses.
func ParseIssueParams(cfg *Config, minionOverrides map[string]any) (map[string]any, error) {
	var overrides value.Value
	if minionOverrides != nil {
		overrides = fromAny(minionOverrides)
	}
	issueOnly := &Config{v: cfg.v}
	v, err := issueOnly.parseIssueParams(overrides, "")
	if err != nil {
		return nil, err
	}
	return toMap(v), nil
}

// parseIssueParams is runners/vault.py:1141-1168. issueType "" means
// issue:type.
func (c *Config) parseIssueParams(params value.Value, issueType string) (value.Value, error) {
	allow, err := c.get("issue:allow_minion_override_params")
	if err != nil {
		return value.Value{}, err
	}
	if !allow.Truthy() || !params.IsMap() {
		params = value.NewMap(nil)
	}
	typ := str(issueType)
	if issueType == "" {
		if typ, err = c.get("issue:type"); err != nil {
			return value.Value{}, err
		}
	}
	valid, ok := validParams[typ.Str()]
	if !typ.IsString() || !ok {
		return value.Value{}, saltErr("SaltRunnerError", "Invalid configuration for minion Vault authentication issuance.")
	}
	configured, err := c.get("issue:" + typ.Str() + ":params")
	if err != nil {
		return value.Value{}, err
	}
	ret := value.NewMap(nil)
	for _, p := range valid {
		v, in, err := pyIn(configured, p)
		if err != nil {
			return value.Value{}, err
		}
		if in && !v.IsNull() {
			ret = set(ret, p, v)
		}
		if v, ok := get(params, p); ok && !contains(noOverrideParams[typ.Str()], p) && !v.IsNull() {
			ret = set(ret, p, v)
		}
	}
	for _, p := range ret.Pairs() {
		name := p.Key.Str()
		if !strings.HasSuffix(name, "_ttl") && name != "token_period" {
			continue
		}
		f, err := timestringMap(p.Val)
		if err != nil {
			return value.Value{}, err
		}
		i, err := pyInt(f)
		if err != nil {
			return value.Value{}, err
		}
		ret = set(ret, name, value.NewInt(i))
	}
	return ret, nil
}

// pyIn is `key in d and d[key]` for whatever d the configuration holds:
// a mapping works, anything else fails as Python does.
func pyIn(d value.Value, key string) (value.Value, bool, error) {
	switch d.Kind() {
	case value.Map:
		v, ok := get(d, key)
		return v, ok, nil
	case value.List:
		if containsValue(d, str(key)) {
			return value.Value{}, false, saltErr("TypeError", "list indices must be integers or slices, not str")
		}
		return value.Value{}, false, nil
	case value.String:
		if strings.Contains(d.Str(), key) {
			return value.Value{}, false, saltErr("TypeError", "string indices must be integers, not 'str'")
		}
		return value.Value{}, false, nil
	}
	return value.Value{}, false, saltErr("TypeError", "argument of type '%s' is not iterable", d.Kind().PyType())
}

// Mismatch is one parameter the master compares and finds different: the
// master would rewrite the role.
type Mismatch struct {
	Param string
	// Master is the master's value (after ParseIssueParams).
	Master any
	// Vault is the role's value; InVault is false when the role read has
	// no such key (saltext compares with NOT_SET then: always different).
	Vault   any
	InVault bool
}

func (m Mismatch) String() string {
	if !m.InVault {
		return fmt.Sprintf("%s %s != <unset>", m.Param, fromAny(m.Master).PyRepr())
	}
	return fmt.Sprintf("%s %s != %s", m.Param, fromAny(m.Master).PyRepr(), fromAny(m.Vault).PyRepr())
}

// ParamsMatch is runners/vault.py:460-467 _approle_params_match: every
// minion-overridable parameter the master issues must equal the role's,
// with Python's plain != (no CIDR canonicalisation, a string is never a
// list, 1 == 1.0 == True). current is the role read (the "data" of GET
// auth/<mount>/role/<minion>), issueParams the result of ParseIssueParams.
// bind_secret_id, token_policies and token_type are never compared. The
// mismatches come in VALID_PARAMS order.
func ParamsMatch(current map[string]any, issueParams map[string]any) (bool, []Mismatch) {
	return paramsMatch(fromAny(current), fromAny(issueParams))
}

func paramsMatch(current, issue value.Value) (bool, []Mismatch) {
	var out []Mismatch
	for _, p := range comparedParams {
		want, ok := get(issue, p)
		if !ok {
			continue
		}
		have, in := get(current, p)
		if in && value.Equal(want, have) {
			continue
		}
		m := Mismatch{Param: p, Master: toAny(want), InVault: in}
		if in {
			m.Vault = toAny(have)
		}
		out = append(out, m)
	}
	return len(out) == 0, out
}

// timestringMap is helpers.py:195-225 timestring_map with its default
// float cast: a number, a string Python's float() accepts, or
// N[.N](s|m|h|d).
func timestringMap(v value.Value) (float64, error) {
	switch v.Kind() {
	case value.Bool:
		if v.Bool() {
			return 1, nil
		}
		return 0, nil
	case value.Int:
		return float64(v.Int()), nil
	case value.Float:
		return v.Float(), nil
	case value.String:
	default:
		// float(val) raises TypeError before the isinstance check
		return 0, saltErr("TypeError", "float() argument must be a string or a real number, not '%s'", v.Kind().PyType())
	}
	s := v.Str()
	if f, ok := pyFloat(s); ok {
		return f, nil
	}
	// re.match(r"^\d+(?:\.\d+)?[smhd]$", val): $ also matches before a
	// final newline, and val[-1] is then that newline.
	body := strings.TrimSuffix(s, "\n")
	if !isTimeString(body) {
		return 0, saltErr("SaltInvocationError", "Invalid time string format: %s", s)
	}
	numPart, unit := s[:len(s)-1], s[len(s)-1]
	raw, ok := pyFloat(numPart)
	if !ok {
		return 0, saltErr("ValueError", "could not convert string to float: %s", str(numPart).PyRepr())
	}
	switch unit {
	case 's':
		return raw, nil
	case 'm':
		return raw * 60, nil
	case 'h':
		return raw * 60 * 60, nil
	}
	return raw * 60 * 60 * 24, nil
}

// isTimeString is \d+(?:\.\d+)?[smhd] over the whole string, \d being any
// Unicode decimal digit as in Python's re.
func isTimeString(s string) bool {
	if s == "" || !strings.ContainsRune("smhd", rune(s[len(s)-1])) {
		return false
	}
	s = s[:len(s)-1]
	digits := func(s string) int {
		n := 0
		for n < len(s) {
			r, size := utf8.DecodeRuneInString(s[n:])
			if !unicode.Is(unicode.Nd, r) {
				break
			}
			n += size
		}
		return n
	}
	n := digits(s)
	if n == 0 {
		return false
	}
	s = s[n:]
	if s == "" {
		return true
	}
	if s[0] != '.' {
		return false
	}
	s = s[1:]
	n = digits(s)
	return n > 0 && n == len(s)
}

// pyInt is int() of a float: truncation, with Python's errors for inf and
// NaN. Python's ints are unbounded; beyond int64 this reports an overflow.
func pyInt(f float64) (int64, error) {
	switch {
	case math.IsNaN(f):
		return 0, saltErr("ValueError", "cannot convert float NaN to integer")
	case math.IsInf(f, 0):
		return 0, saltErr("OverflowError", "cannot convert float infinity to integer")
	case f >= 9.223372036854775808e18 || f < -9.223372036854775808e18:
		return 0, saltErr("OverflowError", "%s does not fit a 64-bit integer", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return int64(f), nil
}

// pyFloat is Python's float(str): surrounding whitespace, a sign, digits
// with single underscores between them (any Unicode decimal digit), an
// optional fraction and exponent, or inf/infinity/nan in any case.
func pyFloat(s string) (float64, bool) {
	s = strings.TrimFunc(s, pyIsSpace)
	var b strings.Builder
	for _, r := range s {
		if r >= utf8.RuneSelf {
			if d, ok := decimalValue(r); ok {
				b.WriteByte(byte('0' + d))
				continue
			}
			return 0, false
		}
		b.WriteRune(r)
	}
	t := b.String()
	sign := ""
	if t != "" && (t[0] == '+' || t[0] == '-') {
		sign, t = t[:1], t[1:]
	}
	switch strings.ToLower(t) {
	case "inf", "infinity":
		return math.Inf(map[string]int{"": 1, "+": 1, "-": -1}[sign]), true
	case "nan":
		return math.NaN(), true
	}
	clean, ok := pyFloatLiteral(t)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(sign+clean, 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// pyFloatLiteral checks digitpart ["." [digitpart]] [exponent] (or
// "." digitpart ...) and drops the underscores.
func pyFloatLiteral(t string) (string, bool) {
	var out strings.Builder
	i := 0
	digitpart := func() bool {
		start := i
		for i < len(t) {
			c := t[i]
			if c >= '0' && c <= '9' {
				out.WriteByte(c)
				i++
				continue
			}
			if c == '_' && i > start && i+1 < len(t) && t[i+1] >= '0' && t[i+1] <= '9' {
				i++
				continue
			}
			break
		}
		return i > start
	}
	intPart := digitpart()
	frac := false
	if i < len(t) && t[i] == '.' {
		out.WriteByte('.')
		i++
		frac = digitpart()
	}
	if !intPart && !frac {
		return "", false
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		out.WriteByte('e')
		i++
		if i < len(t) && (t[i] == '+' || t[i] == '-') {
			out.WriteByte(t[i])
			i++
		}
		if !digitpart() {
			return "", false
		}
	}
	return out.String(), i == len(t)
}

// pyIsSpace is str.isspace for one character.
func pyIsSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85:
		return true
	}
	return r >= utf8.RuneSelf && unicode.In(r, unicode.White_Space, unicode.Zs, unicode.Zl, unicode.Zp)
}

// decimalValue is the value of a Unicode decimal digit (category Nd, whose
// digits come in runs of ten starting at zero).
func decimalValue(r rune) (int, bool) {
	if !unicode.Is(unicode.Nd, r) {
		return 0, false
	}
	for _, rg := range unicode.Nd.R16 {
		if rune(rg.Lo) <= r && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10, true
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if rune(rg.Lo) <= r && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10, true
		}
	}
	return 0, false
}
