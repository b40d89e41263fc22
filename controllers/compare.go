package controllers

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// The comparisons of desired and actual Vault state are small pure
// functions, each saying whether the two differ and why (the why goes into
// events and logs), in the manner of cert-manager's policy checks.

// roleDiffers compares the rendered AppRole parameters with what Vault
// returns for the role. Vault answers TTLs in seconds and keeps policy lists
// as written, so numbers compare by value and lists exactly.
func roleDiffers(desired []render.Param, actual map[string]any) (bool, string) {
	if actual == nil {
		return true, "role does not exist"
	}
	for _, p := range desired {
		got, ok := actual[p.Name]
		if !ok {
			return true, fmt.Sprintf("%s is missing", p.Name)
		}
		want := p.Value
		if cidrParams[p.Name] {
			want, got = canonicalCIDRs(want), canonicalCIDRs(got)
		}
		if !sameParam(want, got) {
			return true, fmt.Sprintf("%s is %v, want %v", p.Name, compact(got), compact(p.Value))
		}
	}
	return false, ""
}

// cidrParams are the role parameters Vault parses as CIDR blocks and
// answers in its own notation.
var cidrParams = map[string]bool{"token_bound_cidrs": true, "secret_id_bound_cidrs": true}

// canonicalCIDRs writes a list of CIDR blocks as Vault answers it
// (go-sockaddr's String): a single address without its /32 or /128, IPv6 in
// its compressed form, host bits kept; entries that are not addresses stay
// as they are. Applied to both sides, it is harmless where Vault keeps the
// text as written.
func canonicalCIDRs(v any) any {
	list, ok := stringList(v)
	if !ok {
		return v
	}
	out := make([]string, len(list))
	for i, s := range list {
		s = strings.TrimSpace(s)
		out[i] = s
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Bits() == p.Addr().BitLen() {
				out[i] = p.Addr().String()
			} else {
				out[i] = p.Addr().String() + "/" + strconv.Itoa(p.Bits())
			}
		} else if a, err := netip.ParseAddr(s); err == nil {
			out[i] = a.String()
		}
	}
	return out
}

func sameParam(want, got any) bool {
	switch w := want.(type) {
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	case int64:
		g, ok := number(got)
		return ok && g == float64(w)
	case string:
		switch g := got.(type) {
		case string:
			return g == w
		case nil:
			return w == ""
		}
		return false
	case []string:
		g, ok := stringList(got)
		if !ok {
			return false
		}
		// Vault returns an absent list as null or [].
		if len(w) == 0 {
			return len(g) == 0
		}
		return slices.Equal(g, w)
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}

func stringList(v any) ([]string, bool) {
	switch l := v.(type) {
	case nil:
		return nil, true
	case []string:
		return l, true
	case []any:
		out := make([]string, 0, len(l))
		for _, it := range l {
			s, ok := it.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	case string:
		// CIDR lists may come back comma-separated.
		if l == "" {
			return nil, true
		}
		return strings.Split(l, ","), true
	}
	return nil, false
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// roleParams turns the rendered parameters into the write payload.
func roleParams(ps []render.Param) map[string]any {
	out := make(map[string]any, len(ps))
	for _, p := range ps {
		out[p.Name] = p.Value
	}
	return out
}

// metadataDiffers compares two metadata maps.
func metadataDiffers(desired, actual map[string]string) (bool, string) {
	for k, v := range desired {
		got, ok := actual[k]
		if !ok {
			return true, fmt.Sprintf("metadata %q is missing", k)
		}
		if got != v {
			return true, fmt.Sprintf("metadata %q is %q, want %q", k, got, v)
		}
	}
	for k := range actual {
		if _, ok := desired[k]; !ok {
			return true, fmt.Sprintf("metadata %q is not rendered any more", k)
		}
	}
	return false, ""
}

// policyDiffers compares a desired policy text with Vault's, ignoring
// trailing whitespace differences Vault may introduce.
func policyDiffers(desired, actual string) bool {
	return strings.TrimSpace(desired) != strings.TrimSpace(actual)
}
