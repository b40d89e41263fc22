package binding

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The comparisons of desired and actual Vault state are small pure
// functions, each saying whether the two differ and why (the why goes into
// events and logs), in the manner of cert-manager's policy checks.

// roleDiffers compares the rendered AppRole parameters with what Vault
// returns for the role. Vault answers TTLs in seconds and keeps policy lists
// as written, so numbers compare by value and lists exactly. The why names
// every parameter that differs, in the template's order, so that a
// rewrite by someone else (a Salt master's, with its own token_policies)
// shows whole, not only its first field.
func roleDiffers(desired []render.Param, actual map[string]any) (bool, string) {
	if actual == nil {
		return true, "role does not exist"
	}
	var diffs []string
	for _, p := range desired {
		got, ok := actual[p.Name]
		if !ok {
			diffs = append(diffs, p.Name+" is missing")
			continue
		}
		want := p.Value
		if cidrParams[p.Name] {
			want, got = canonicalCIDRs(want), canonicalCIDRs(got)
		}
		if !sameParam(want, got) {
			diffs = append(diffs, paramDiff(p.Name, got, p.Value))
		}
	}
	return len(diffs) > 0, strings.Join(diffs, "; ")
}

// paramDiff says how a parameter differs: for a list of names (policies),
// which were added and which removed, or that only the order differs.
func paramDiff(name string, got, want any) string {
	g, gok := stringList(got)
	w, wok := want.([]string)
	if !gok || !wok {
		return fmt.Sprintf("%s is %v, want %v", name, compact(got), compact(want))
	}
	var parts []string
	if extra := missingFrom(g, w); len(extra) > 0 {
		parts = append(parts, "has "+strings.Join(extra, ", ")+" extra")
	}
	if lacking := missingFrom(w, g); len(lacking) > 0 {
		parts = append(parts, "lacks "+strings.Join(lacking, ", "))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%s is %v, want %v (order or repeats)", name, compact(got), compact(want))
	}
	return name + " " + strings.Join(parts, " and ")
}

// missingFrom lists the elements of a that are not in b, once each, in
// a's order.
func missingFrom(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// cidrParams are the role parameters Vault parses as CIDR blocks and
// answers in its own notation.
var cidrParams = map[string]bool{"token_bound_cidrs": true, "secret_id_bound_cidrs": true}

// canonicalCIDRs writes a list of CIDR blocks as Vault answers it
// (vault.CanonicalCIDR). Applied to both sides, it is harmless where Vault
// keeps the text as written.
func canonicalCIDRs(v any) any {
	list, ok := stringList(v)
	if !ok {
		return v
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = vault.CanonicalCIDR(s)
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

// metadataDiffers compares two metadata maps. The why names every key
// that differs, in key order (the same for the same difference, whatever
// the maps' iteration order): changed, missing, then not rendered any more,
// at most metadataDiffsShown of each and how many more.
func metadataDiffers(desired, actual map[string]string) (bool, string) {
	var changed, missing, extra []string
	for _, k := range slices.Sorted(maps.Keys(desired)) {
		got, ok := actual[k]
		switch {
		case !ok:
			missing = append(missing, strconv.Quote(k))
		case got != desired[k]:
			changed = append(changed, fmt.Sprintf("%q is %q, want %q", k, got, desired[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(actual)) {
		if _, ok := desired[k]; !ok {
			extra = append(extra, strconv.Quote(k))
		}
	}
	var parts []string
	parts = append(parts, outcome.FirstN(changed, metadataDiffsShown)...)
	if len(missing) > 0 {
		parts = append(parts, strings.Join(outcome.FirstN(missing, metadataDiffsShown), ", ")+" missing")
	}
	if len(extra) > 0 {
		parts = append(parts, strings.Join(outcome.FirstN(extra, metadataDiffsShown), ", ")+" not rendered any more")
	}
	if len(parts) == 0 {
		return false, ""
	}
	return true, "metadata " + strings.Join(parts, "; ")
}

// metadataDiffsShown bounds how many keys one message names of each kind
// of difference (a map replaced whole differs in every key).
const metadataDiffsShown = 8
