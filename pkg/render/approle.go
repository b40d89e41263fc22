package render

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// saltext's issue parameter defaults for AppRoles.
const (
	defaultSecretIDNumUses     = 1
	defaultSecretIDTTL         = 60
	defaultTokenExplicitMaxTTL = 60
	defaultTokenNumUses        = 10
)

var durationRE = regexp.MustCompile(`^(\d+(?:\.\d+)?)([smhd])$`)

// ParseTTL is saltext's timestring_map with an int cast: a number of
// seconds, or a number with one unit of s, m, h or d.
func ParseTTL(s string) (int64, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && f >= 0 {
		return int64(f), nil
	}
	m := durationRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid duration %q: want seconds or a number with s, m, h or d", s)
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	switch m[2] {
	case "m":
		f *= 60
	case "h":
		f *= 3600
	case "d":
		f *= 86400
	}
	if f > math.MaxInt32 {
		return 0, fmt.Errorf("duration %q is too long", s)
	}
	return int64(f), nil
}

// appRoleParams renders the role parameters in a fixed order.
func appRoleParams(a AppRole) ([]Param, error) {
	bind := true
	if a.BindSecretID != nil {
		bind = *a.BindSecretID
	}
	params := []Param{{"bind_secret_id", bind}}
	params = append(params, Param{"secret_id_num_uses", intOr(a.SecretIDNumUses, defaultSecretIDNumUses)})
	ttls := []struct {
		name, val string
		def       int64
	}{
		{"secret_id_ttl", a.SecretIDTTL, defaultSecretIDTTL},
		{"token_explicit_max_ttl", a.TokenExplicitMaxTTL, defaultTokenExplicitMaxTTL},
		{"token_ttl", a.TokenTTL, -1},
		{"token_max_ttl", a.TokenMaxTTL, -1},
		{"token_period", a.TokenPeriod, -1},
	}
	for _, t := range ttls {
		switch {
		case t.val != "":
			secs, err := ParseTTL(t.val)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			params = append(params, Param{t.name, secs})
		case t.def >= 0:
			params = append(params, Param{t.name, t.def})
		}
	}
	params = append(params, Param{"token_num_uses", intOr(a.TokenNumUses, defaultTokenNumUses)})
	if a.SecretIDBoundCIDRs != nil {
		params = append(params, Param{"secret_id_bound_cidrs", a.SecretIDBoundCIDRs})
	}
	if a.TokenBoundCIDRs != nil {
		params = append(params, Param{"token_bound_cidrs", a.TokenBoundCIDRs})
	}
	if a.TokenType != "" {
		params = append(params, Param{"token_type", a.TokenType})
	}
	return params, nil
}

func intOr(p *int64, def int64) int64 {
	if p != nil {
		return *p
	}
	return def
}
