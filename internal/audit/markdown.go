package audit

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// audit diff -o markdown: a pull-request comment. A reviewer reads its
// first lines in five seconds: does the gate fail, who gains and who
// loses, grouped, with the rule that decides; every change per minion is
// in a collapsed <details>. A fleet of 10,000 changes a template in one
// line and 30,000 paths; a comment holds 65,536 characters (GitHub), so
// the comment keeps to MarkdownLimit bytes and says what it cut.

// MarkdownLimit is the most bytes diff -o markdown writes.
const MarkdownLimit = 60_000

// The most rows of a grouped table, bindings left out, lines of a status
// group and warnings shown; minion IDs named per group.
const (
	mdMaxGroups   = 25
	mdMaxRefused  = 20
	mdMaxStatus   = 15
	mdMaxWarnings = 10
	mdNamed       = 4
	mdMaxCell     = 300
)

// changeGroup is the minions that change alike on some paths: the same
// change, decided by the same rule (a glob's paths are one group).
type changeGroup struct {
	paths       []string
	change, why string
	minions     []string
	roles       [][]string
}

// statusGroup is the bindings added, removed or left out for one reason.
type statusGroup struct {
	status, why string
	gained      bool
	minions     []string
	paths       int
}

func groupChanges(r DiffReport) (gains, losses []*changeGroup, statuses []*statusGroup) {
	byKey := map[[3]string]*changeGroup{}
	byStatus := map[[2]string]*statusGroup{}
	for _, m := range r.Minions {
		if m.Status != "" {
			k := [2]string{m.Status, m.Why}
			g := byStatus[k]
			if g == nil {
				g = &statusGroup{status: m.Status, why: m.Why}
				byStatus[k] = g
				statuses = append(statuses, g)
			}
			g.minions = append(g.minions, m.Minion)
			for _, c := range m.Changes {
				g.gained = g.gained || len(c.Gained) > 0
			}
			g.paths += len(m.Changes)
			continue
		}
		for _, c := range m.Changes {
			// A change both ways is listed with the gains: the gate
			// fails on it.
			k := [3]string{c.Path, change(c), c.Why}
			g := byKey[k]
			if g == nil {
				g = &changeGroup{paths: []string{c.Path}, change: k[1], why: c.Why}
				byKey[k] = g
				if len(c.Gained) > 0 {
					gains = append(gains, g)
				} else {
					losses = append(losses, g)
				}
			}
			g.minions = append(g.minions, m.Minion)
			g.roles = append(g.roles, m.Roles)
		}
	}
	order := func(a, b *changeGroup) int {
		if len(a.minions) != len(b.minions) {
			return len(b.minions) - len(a.minions)
		}
		return strings.Compare(a.paths[0]+a.change, b.paths[0]+b.change)
	}
	gains, losses = mergeGroups(gains), mergeGroups(losses)
	slices.SortStableFunc(gains, order)
	slices.SortStableFunc(losses, order)
	slices.SortStableFunc(statuses, func(a, b *statusGroup) int {
		if a.gained != b.gained {
			if a.gained {
				return -1
			}
			return 1
		}
		return len(b.minions) - len(a.minions)
	})
	return gains, losses, statuses
}

// mergeGroups makes one group of the groups whose minions change alike by
// the same rule on different paths (a glob's prefix and the path under
// it), in the order first seen.
func mergeGroups(gs []*changeGroup) []*changeGroup {
	byKey := map[string]*changeGroup{}
	var out []*changeGroup
	for _, g := range gs {
		k := g.change + "\x00" + g.why + "\x00" + strings.Join(g.minions, "\x00")
		if m, ok := byKey[k]; ok {
			m.paths = append(m.paths, g.paths...)
			continue
		}
		byKey[k] = g
		out = append(out, g)
	}
	return out
}

// pathList is a group's paths, the first few.
func pathList(paths []string) string {
	const shown = 3
	var b strings.Builder
	for i, p := range paths {
		if i == shown {
			fmt.Fprintf(&b, " and %d more", len(paths)-shown)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(code(p))
	}
	return b.String()
}

// distinct is how many minions the groups name.
func distinct(gs []*changeGroup) int {
	seen := map[string]bool{}
	for _, g := range gs {
		for _, m := range g.minions {
			seen[m] = true
		}
	}
	return len(seen)
}

// commonRoles are the roles every minion of a group has; when none is,
// the most frequent ones.
func commonRoles(roles [][]string) string {
	count := map[string]int{}
	for _, rs := range roles {
		for i, r := range rs {
			if !slices.Contains(rs[:i], r) { // [web, web] is one role
				count[r]++
			}
		}
	}
	var all, some []string
	for r, n := range count {
		if n == len(roles) {
			all = append(all, r)
		} else {
			some = append(some, r)
		}
	}
	slices.Sort(all)
	if len(all) > 0 {
		return strings.Join(all, ", ")
	}
	slices.SortFunc(some, func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return strings.Compare(a, b)
	})
	if len(some) > 3 {
		return strings.Join(some[:3], ", ") + ", …"
	}
	return strings.Join(some, ", ")
}

// named is a count of minions and the first few IDs.
func named(ids []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (", thousands(len(ids)))
	for i, id := range ids {
		if i == mdNamed {
			b.WriteString(", …")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(code(id))
	}
	b.WriteString(")")
	return b.String()
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// text makes s safe in a table cell and outside code: no "|", no line
// break, no HTML, at most mdMaxCell bytes.
func text(s string) string {
	s = strings.NewReplacer("|", "\\|", "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;", "`", "'").Replace(s)
	return clip(s, mdMaxCell)
}

// clip cuts s to at most n bytes and a whole rune, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// code is s as inline code in a table cell.
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + clip(strings.NewReplacer("`", "'", "|", "\\|", "\n", " ").Replace(s), mdMaxCell) + "`"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}

// diffMarkdown writes r as a pull-request comment of at most
// MarkdownLimit bytes.
func diffMarkdown(w io.Writer, r DiffReport) error {
	gains, losses, statuses := groupChanges(r)
	var cut []string
	var body strings.Builder

	leftOut := func(onBase bool) []LeftOut {
		var out []LeftOut
		for _, l := range r.Refused {
			if l.OnBase == onBase {
				out = append(out, l)
			}
		}
		return out
	}
	refusedList := func(ls []LeftOut) {
		for i, l := range ls {
			if i == mdMaxRefused {
				cut = append(cut, fmt.Sprintf("%d of %d bindings left out", len(ls)-i, len(ls)))
				fmt.Fprintf(&body, "- … and %d more\n", len(ls)-i)
				break
			}
			fmt.Fprintf(&body, "- %s %s (minion %s): **%s**: %s\n", l.Kind, code(l.Binding), code(l.Minion), text(l.Reason), text(l.Message))
		}
	}
	if ls := leftOut(false); len(ls) > 0 {
		fmt.Fprintf(&body, "\n### ⛔ The operator would refuse %s of the head\n\n", plural(len(ls), "binding", "bindings"))
		body.WriteString("Their minions get no token from them; the change fails the gate whatever access it changes.\n\n")
		refusedList(ls)
	}
	if ls := leftOut(true); len(ls) > 0 {
		fmt.Fprintf(&body, "\n### Already left out on the base (%s)\n\n", plural(len(ls), "binding", "bindings"))
		body.WriteString("Not this change's doing: the gate does not fail on them.\n\n")
		refusedList(ls)
	}
	groupTable := func(title string, gs []*changeGroup, minions int) {
		if len(gs) == 0 {
			return
		}
		fmt.Fprintf(&body, "\n### %s (%s)\n\n", title, plural(minions, "minion", "minions"))
		body.WriteString("| minions | roles | change | paths | deciding rule |\n|---|---|---|---|---|\n")
		for i, g := range gs {
			if i == mdMaxGroups {
				rest := 0
				for _, h := range gs[i:] {
					rest += len(h.minions)
				}
				cut = append(cut, fmt.Sprintf("%d of %d groups of %s (%s changes)", len(gs)-i, len(gs), strings.ToLower(title), thousands(rest)))
				fmt.Fprintf(&body, "| … %d more groups, %s minion changes | | | | |\n", len(gs)-i, thousands(rest))
				break
			}
			fmt.Fprintf(&body, "| %s | %s | %s | %s | %s |\n", named(g.minions), text(commonRoles(g.roles)), code(g.change), pathList(g.paths), text(g.why))
		}
	}
	groupTable("Gained", gains, distinct(gains))
	groupTable("Lost", losses, distinct(losses))
	if len(statuses) > 0 {
		body.WriteString("\n### Bindings added, removed or left out\n\n")
		for i, s := range statuses {
			if i == mdMaxStatus {
				cut = append(cut, fmt.Sprintf("%d of %d groups of bindings", len(statuses)-i, len(statuses)))
				fmt.Fprintf(&body, "- … and %d more groups\n", len(statuses)-i)
				break
			}
			what := "loses access"
			if s.gained {
				what = "gains access"
			}
			if s.paths == 0 {
				what = "no access changes"
			}
			fmt.Fprintf(&body, "- **%s** %s: %s (%s)\n", s.status, named(s.minions), what, text(s.why))
		}
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintf(&body, "\n<details><summary>%s</summary>\n\n", plural(len(r.Warnings), "warning", "warnings"))
		for i, s := range r.Warnings {
			if i == mdMaxWarnings {
				cut = append(cut, fmt.Sprintf("%d of %d warnings", len(r.Warnings)-i, len(r.Warnings)))
				fmt.Fprintf(&body, "- … and %d more\n", len(r.Warnings)-i)
				break
			}
			fmt.Fprintf(&body, "- %s\n", text(s))
		}
		body.WriteString("\n</details>\n")
	}

	// The rules of the version, collapsed: what a reviewer of a version
	// upgrade needs, nobody else.
	fmt.Fprintf(&body, "\n<details><summary>%s</summary>\n\n", text(r.Vault.Title()))
	for _, rule := range r.Vault.Rules {
		fmt.Fprintf(&body, "- %s\n", text(rule))
	}
	body.WriteString("\n</details>\n")

	// The details take what is left, row by row; the head and the cut
	// note are written last but counted first.
	head := headline(r)
	const reserve = 1500 // the cut note and the closing lines
	var details strings.Builder
	rows, shown := 0, 0
	budget := MarkdownLimit - len(head) - body.Len() - reserve
	for _, m := range r.Minions {
		if m.Status != "" {
			rows++
		} else {
			rows += len(m.Changes)
		}
	}
	if rows > 0 && budget > 0 {
		fmt.Fprintf(&details, "\n<details><summary>Every change, per minion (%s)</summary>\n\n| minion | path | base | head | change | why |\n|---|---|---|---|---|---|\n", plural(rows, "row", "rows"))
		full := false
		row := func(line string) {
			if full || details.Len()+len(line) > budget {
				full = true
				return
			}
			details.WriteString(line)
			shown++
		}
		for _, m := range r.Minions {
			if m.Status != "" {
				row(fmt.Sprintf("| %s | | | | %s | %s |\n", code(m.Minion), text(statusChange(m)), text(m.Why)))
				continue
			}
			for _, c := range m.Changes {
				row(fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", code(m.Minion), code(c.Path), text(strings.Join(c.Base, ",")),
					text(strings.Join(c.Head, ",")), code(change(c)), text(c.Why)))
			}
		}
		details.WriteString("\n</details>\n")
	}
	if shown < rows {
		cut = append(cut, fmt.Sprintf("%s of %s per-minion rows", thousands(rows-shown), thousands(rows)))
	}

	var out strings.Builder
	out.WriteString(head)
	if len(cut) > 0 {
		note := "\n> **Cut to fit a comment:** " + strings.Join(cut, "; ") + ". `minionvault audit diff -o json` has everything.\n"
		if len(note) > reserve-100 {
			note = note[:reserve-100] + "…\n"
		}
		out.WriteString(note)
	}
	out.WriteString(body.String())
	out.WriteString(details.String())
	_, err := io.WriteString(w, capMarkdown(out.String()))
	return err
}

// capMarkdown is the last guard of the limit: the groups and lists are
// bounded in rows and each cell in bytes, but a fleet of long names and
// messages could still pass MarkdownLimit before the details. The text is
// then cut at a line, any <details> left open is closed, and the cut said.
func capMarkdown(s string) string {
	const note = "\n> **Cut here to fit a comment** (60,000 bytes). `minionvault audit diff -o json` has everything.\n"
	if len(s) <= MarkdownLimit {
		return s
	}
	s = s[:strings.LastIndex(s[:MarkdownLimit-len(note)-len("\n</details>\n")], "\n")+1]
	s += note
	if strings.Count(s, "<details>") > strings.Count(s, "</details>") {
		s += "\n</details>\n"
	}
	return s
}

// headline is the first lines: the gate's verdict and the counts.
func headline(r DiffReport) string {
	s := r.Summary
	var b strings.Builder
	var why []string
	if s.Refused > 0 {
		why = append(why, plural(s.Refused, "binding", "bindings")+" the operator would refuse")
	}
	if s.Waiting > 0 {
		why = append(why, plural(s.Waiting, "binding", "bindings")+" left waiting")
	}
	if s.Gaining > 0 {
		why = append(why, plural(s.Gaining, "minion gains", "minions gain")+" access")
	}
	if len(why) > 0 {
		fmt.Fprintf(&b, "## ❌ Vault access: %s\n\n", strings.Join(why, ", "))
	} else {
		b.WriteString("## ✅ Vault access: no minion gains access\n\n")
	}
	fmt.Fprintf(&b, "**%s of %s minions gain access, %s lose access** (%s paths compared; ACL rules of Vault %s; `minionvault audit diff`).\n",
		thousands(s.Gaining), thousands(s.Minions), thousands(s.Losing), thousands(s.Paths), text(r.Vault.Version))
	return b.String()
}
