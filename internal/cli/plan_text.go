package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

var actionSign = map[string]string{"create": "+", "update": "~", "delete": "-"}

// writePlanText prints the plan as a readable diff: one block per
// template and binding, and a summary line.
func writePlanText(w io.Writer, p *PlanResult) {
	for _, t := range p.Templates {
		fmt.Fprintf(w, "MinionTemplate %s", t.Name)
		writeBlock(w, t.Changes, t.Refused)
	}
	for _, b := range p.Bindings {
		fmt.Fprintf(w, "MinionBinding %s/%s (minion %s)", b.Namespace, b.Name, b.MinionID)
		writeBlock(w, b.Changes, b.Refused)
	}
	s := p.Summary
	fmt.Fprintf(w, "\nPlan: %d to create, %d to change, %d to delete", s.Create, s.Update, s.Delete)
	if s.Refused > 0 {
		fmt.Fprintf(w, "; %d refused", s.Refused)
	}
	fmt.Fprintln(w, ".")
}

func writeBlock(w io.Writer, changes []vault.Change, refused *Refusal) {
	switch {
	case refused != nil:
		fmt.Fprintf(w, ": refused, %s: %s\n", refused.Reason, refused.Message)
	case len(changes) == 0:
		fmt.Fprintln(w, ": no changes")
	default:
		fmt.Fprintln(w)
	}
	for _, c := range changes {
		fmt.Fprintf(w, "  %s %s %s\n", actionSign[c.Action], c.Kind, c.Path)
		for _, line := range changeLines(c) {
			fmt.Fprintf(w, "      %s\n", line)
		}
	}
}

// changeLines is the diff of one change: per key for roles, metadata and
// aliases, per line for policy text.
func changeLines(c vault.Change) []string {
	if before, ok := c.Before.(string); ok || c.Kind == "acl-policy" {
		after, _ := c.After.(string)
		return lineDiff(before, after)
	}
	return mapDiff(asMap(c.Before), asMap(c.After))
}

func asMap(v any) map[string]any {
	switch m := v.(type) {
	case map[string]any:
		return m
	case map[string]string:
		out := make(map[string]any, len(m))
		for k, s := range m {
			out[k] = s
		}
		return out
	}
	return nil
}

// mapDiff lists added (+), changed (~) and removed (-) keys, sorted.
func mapDiff(before, after map[string]any) []string {
	keys := make([]string, 0, len(before)+len(after))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		b, inBefore := before[k]
		a, inAfter := after[k]
		switch {
		case !inBefore:
			out = append(out, fmt.Sprintf("+ %s: %s", k, show(a)))
		case !inAfter:
			out = append(out, fmt.Sprintf("- %s: %s", k, show(b)))
		case show(a) != show(b):
			out = append(out, fmt.Sprintf("~ %s: %s -> %s", k, show(b), show(a)))
		}
	}
	return out
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// lineDiff is a minimal line diff (longest common subsequence): policy
// texts are a few dozen lines.
func lineDiff(before, after string) []string {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(strings.TrimRight(s, "\n"), "\n")
	}
	a, b := split(before), split(after)
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, "  "+a[i])
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "- "+a[i])
			i++
		default:
			out = append(out, "+ "+b[j])
			j++
		}
	}
	return out
}
