package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/testing/samples"
	"github.com/minionvault/minion-vault-operator/pkg/template"
)

// audit diff prepares each minion only while it compares it, from the
// rendered parts it kept (one copy for both sides where they render
// alike): the report is the one of fleets prepared in full, as who-can
// loads them.
func TestAuditDiffUnpreparedSameAsPrepared(t *testing.T) {
	dir := t.TempDir()
	base, head := filepath.Join(dir, "base"), filepath.Join(dir, "head")
	samples.WriteFleet(t, base, 300, false)
	samples.WriteFleet(t, head, 300, true)
	o := Options{VaultVersion: "1.21.4", Accessor: "auth_approle_offline"}
	load := func(path string) *Fleet {
		t.Helper()
		f, err := Load([]string{path}, o)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	full := Diff(load(base), load(head), []string{"salt/data/env/prod"})
	bf, hf, err := LoadDiff([]string{base}, []string{head}, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range hf.minions {
		if m.prep != nil || m.unprepared == nil || m.subject.Entity != nil {
			t.Fatalf("minion %s: prepared or with a subject", m.id)
		}
		if bf.byID[m.id].unprepared != m.unprepared {
			t.Fatalf("minion %s: a copy per side", m.id)
		}
	}
	lean := Diff(bf, hf, []string{"salt/data/env/prod"})
	if !reflect.DeepEqual(lean, full) {
		t.Fatalf("unprepared %+v, prepared %+v", lean.Summary, full.Summary)
	}
	if full.Summary.Minions != 300 || full.Summary.Gaining != 300 || len(full.Warnings) == 0 {
		t.Fatalf("%+v %q", full.Summary, full.Warnings)
	}
	// m00001 has the roles db and web: the templated rules of
	// saltstack/minions render its metadata roles__0 and roles__1.
	gain := func(role string) PathChange {
		return PathChange{Path: "salt/data/roles/" + role, Base: []string{"list", "read"}, Head: []string{"list", "read", "update"},
			Gained: []string{"update"}, Why: "salt_role_" + role + ",saltstack/minions salt/data/roles/" + role + " (exact match)"}
	}
	want := MinionDiff{Minion: "m00001", Role: "m00001", Roles: []string{"db", "web"}, Changes: []PathChange{gain("db"), gain("web")}}
	if got := lean.Minions[1]; !reflect.DeepEqual(got, want) {
		t.Fatalf("m00001: %+v, want %+v", got, want)
	}
}

// The diff's JSON, written one minion at a time, is json.MarshalIndent's
// text: with and without minions, warnings, nil and empty lists.
func TestWriteDiffJSON(t *testing.T) {
	one := MinionDiff{Minion: "web01", Role: "web01", Changes: []PathChange{{Path: "a/b", Base: []string{"deny"}, Head: []string{"read"},
		Gained: []string{"read"}, Why: "p a/b (exact match)"}}}
	removed := MinionDiff{Minion: "db01", Role: "db01", Status: "removed", Changes: []PathChange{}}
	for _, r := range []DiffReport{
		{Minions: []MinionDiff{}},
		{Summary: DiffSummary{Minions: 2, Gaining: 1, Paths: 7}, Minions: []MinionDiff{one, removed}, Warnings: []string{"head: \"x\" <&>"}},
		{Minions: nil, Warnings: []string{}},
	} {
		want, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := Write(&got, "json", r); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want)+"\n" {
			t.Errorf("got\n%s\nwant\n%s", got.String(), want)
		}
	}
}

// A binding's parts are shared only where both sides render them alike,
// and the second side lets go of them.
func TestSharedMinions(t *testing.T) {
	s := newSharedMinions(2)
	b := &v1alpha1.MinionBinding{}
	md := []template.KV{{Key: "roles", Value: "web"}}
	first := &unpreparedMinion{tokenPolicies: []string{"default", "p"}, entityName: "e", entityMD: md}
	alike := &unpreparedMinion{tokenPolicies: []string{"default", "p"}, entityName: "e", entityMD: slices.Clone(md)}
	other := &unpreparedMinion{tokenPolicies: []string{"default", "p"}, entityName: "e", entityMD: []template.KV{{Key: "roles", Value: "db"}}}
	if s.share(b, "t", first) != first || s.share(b, "t", alike) != first {
		t.Fatal("alike parts are not shared")
	}
	if _, held := s.m.Load(sharedKey{b, "t"}); held {
		t.Fatal("held after the last reader")
	}
	if s.share(b, "u", first) != first || s.share(b, "u", other) != other {
		t.Fatal("different parts are shared")
	}
}

// A template change at 10,000 minions (every role policy gains a rule:
// 30,000 changed paths, a table of 30,000 lines) is a comment under
// MarkdownLimit, grouped by role and policy, that says what it cut.
func TestDiffMarkdown10k(t *testing.T) {
	base := benchAuditFleet(t, 10000, "")
	head := benchAuditFleet(t, 10000, "path \"salt/data/shared/ROLE/*\" {\n  capabilities = [\"read\"]\n}\n")
	r := Diff(base, head, nil)
	rows := 0
	for _, m := range r.Minions {
		rows += len(m.Changes)
	}
	var out bytes.Buffer
	if err := Write(&out, "markdown", r); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	if f := os.Getenv("AUDIT_MARKDOWN_OUT"); f != "" {
		_ = os.WriteFile(f, out.Bytes(), 0o644) // to look at it
	}
	if len(md) > MarkdownLimit || len(md) < MarkdownLimit*3/4 {
		t.Fatalf("%d bytes, want at most %d, the details filling it", len(md), MarkdownLimit)
	}
	lines := strings.Split(md, "\n")
	cut := fmt.Sprintf("of %s per-minion rows", thousands(rows))
	if lines[0] != "## ❌ Vault access: 10,000 minions gain access" || !strings.HasPrefix(lines[4], "> **Cut to fit a comment:** ") || !strings.Contains(lines[4], cut) {
		t.Fatalf("%d rows; head:\n%s", rows, strings.Join(lines[:6], "\n"))
	}
	// 30 roles, two probes of each new glob in one group: 30 groups, 25
	// shown, each the minions of one role, with the role and its
	// policy's rule.
	groups := 0
	for _, l := range lines {
		if strings.Contains(l, "| `+read` | `salt/data/shared/r") && strings.Contains(l, "/_`") {
			groups++
			role := l[strings.Index(l, "shared/")+len("shared/"):]
			role = role[:strings.IndexAny(role, "/`")]
			if !strings.Contains(l, " | "+role+" | ") || !strings.Contains(l, "| salt_role_"+role+" salt/data/shared/"+role+"/* (wildcard match) |") {
				t.Errorf("group %q: not of role %s and its policy", l, role)
			}
		}
	}
	if groups != mdMaxGroups || !strings.Contains(md, "| … 5 more groups") || !strings.Contains(lines[4], "5 of 30 groups of gained") {
		t.Errorf("%d groups shown, want %d and the rest said:\n%s", groups, mdMaxGroups, lines[4])
	}
	if !strings.Contains(md, fmt.Sprintf("<details><summary>Every change, per minion (%s rows)</summary>", thousands(rows))) || !strings.HasSuffix(md, "</details>\n") {
		t.Fatalf("details not collapsed:\n%s", md[len(md)-300:])
	}
}

// However long the names, paths and messages, the comment keeps to
// MarkdownLimit, whole runes, every <details> closed, the verdict first.
func TestDiffMarkdownLimit(t *testing.T) {
	long := func(i int, what string) string {
		return fmt.Sprintf("%s-%d-", what, i) + strings.Repeat("é|<x>`", 400)
	}
	r := DiffReport{Summary: DiffSummary{Minions: 400, Gaining: 200, Losing: 200, Paths: 400, Refused: 40}}
	for i := range 40 {
		r.Refused = append(r.Refused, LeftOut{Binding: long(i, "ns/b"), Minion: long(i, "m"), Kind: Refused, Reason: "ConflictingPolicyBody", Message: long(i, "msg")})
	}
	for i := range 400 {
		c := PathChange{Path: long(i, "salt/data"), Base: []string{"deny"}, Head: []string{"read"}, Gained: []string{"read"}, Why: long(i, "why")}
		status := ""
		if i%2 == 1 {
			c = PathChange{Path: long(i, "salt/data"), Base: []string{"read"}, Head: []string{"deny"}, Lost: []string{"read"}, Why: long(i, "why")}
		}
		if i%10 == 9 {
			status = "removed"
		}
		r.Minions = append(r.Minions, MinionDiff{Minion: long(i, "m"), Role: "r", Roles: []string{long(i, "role")}, Status: status, Why: long(i, "gone"), Changes: []PathChange{c}})
	}
	for i := range 50 {
		r.Warnings = append(r.Warnings, long(i, "warning"))
	}
	var out bytes.Buffer
	if err := Write(&out, "markdown", r); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	if len(md) > MarkdownLimit || !utf8.ValidString(md) || !strings.HasPrefix(md, "## ❌ Vault access: 40 bindings the operator would refuse, 200 minions gain access\n") {
		t.Fatalf("%d bytes (valid UTF-8: %v):\n%s", len(md), utf8.ValidString(md), md[:200])
	}
	if strings.Count(md, "<details>") != strings.Count(md, "</details>") || !strings.Contains(md, "Cut to fit a comment") {
		t.Fatalf("details unbalanced or the cut unsaid:\n%s", md[len(md)-400:])
	}
}
