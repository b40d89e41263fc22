package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"
)

// The reports' printed forms: a table for people, JSON or YAML (the JSON
// keys, in the same order) for tools.

// Report is one of the audit's reports.
type Report interface {
	// table prints the report for people.
	table(w io.Writer)
}

func (r WhoCanReport) table(w io.Writer)  { whoCanTable(w, r) }
func (r WhatCanReport) table(w io.Writer) { whatCanTable(w, r) }
func (r DiffReport) table(w io.Writer)    { diffTable(w, r) }
func (r CheckReport) table(w io.Writer)   { checkTable(w, r) }
func (r DriftReport) table(w io.Writer)   { driftTable(w, r) }
func (r PillarReport) table(w io.Writer)  { pillarTable(w, r) }

// Write prints a report as a table, JSON or YAML (the format); a diff
// also as markdown, a pull-request comment.
func Write(w io.Writer, format string, r Report) error {
	if format == "table" {
		r.table(w)
		return nil
	}
	if format == "markdown" {
		d, ok := r.(DiffReport)
		if !ok {
			return fmt.Errorf("-o markdown is for audit diff only")
		}
		return diffMarkdown(w, d)
	}
	if d, ok := r.(DiffReport); ok && format == "json" {
		return writeDiffJSON(w, d)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if format == "json" {
		_, err = w.Write(append(data, '\n'))
		return err
	}
	var node yaml.Node
	if err := yaml.Unmarshal(data, &node); err != nil {
		return err
	}
	blockStyle(&node)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return err
	}
	return enc.Close()
}

// writeDiffJSON writes what json.MarshalIndent(r, "", "  ") would, one
// minion at a time: the diff of a fleet is megabytes, and the text is
// never held whole.
func writeDiffJSON(w io.Writer, r DiffReport) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	part := func(lead string, v any, prefix string) error {
		data, err := json.MarshalIndent(v, prefix, "  ")
		if err != nil {
			return err
		}
		bw.WriteString(lead)
		_, err = bw.Write(data)
		return err
	}
	if err := part("{\n  \"summary\": ", r.Summary, "  "); err != nil {
		return err
	}
	if len(r.Refused) > 0 {
		if err := part(",\n  \"refused\": ", r.Refused, "  "); err != nil {
			return err
		}
	}
	bw.WriteString(",\n  \"minions\": ")
	if r.Minions == nil {
		bw.WriteString("null")
	} else {
		bw.WriteString("[")
	}
	for i, m := range r.Minions {
		lead := ",\n    "
		if i == 0 {
			lead = "\n    "
		}
		if err := part(lead, m, "    "); err != nil {
			return err
		}
	}
	if len(r.Minions) > 0 {
		bw.WriteString("\n  ")
	}
	if r.Minions != nil {
		bw.WriteString("]")
	}
	if len(r.Warnings) > 0 {
		if err := part(",\n  \"warnings\": ", r.Warnings, "  "); err != nil {
			return err
		}
	}
	if err := part(",\n  \"vault\": ", r.Vault, "  "); err != nil {
		return err
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// blockStyle undoes the flow style and quotes that JSON text brings, so
// that the encoder writes ordinary block YAML.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

func caps(c []string, errText string) string {
	if errText != "" {
		return "error: " + errText
	}
	return strings.Join(c, ",")
}

func whoCanTable(w io.Writer, r WhoCanReport) {
	what := "any access to"
	if r.Capability != "" {
		what = r.Capability + " on"
	}
	fmt.Fprintf(w, "%d of %d minions have %s %s", r.Count.Matching, r.Count.Minions, what, r.Path)
	if r.Operation != "" {
		fmt.Fprintf(w, " (KV %s of %s)", r.Operation, r.Logical)
	}
	if r.Count.NoToken > 0 {
		fmt.Fprintf(w, "; %d more get nothing from Vault (listed, not counted)", r.Count.NoToken)
	}
	fmt.Fprintln(w)
	if len(r.Minions) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MINION\tCAPABILITIES\tPOLICIES\tPATTERN\tWHY")
		for _, m := range r.Minions {
			why := m.Rule
			if m.NotGranted != "" {
				why = "not counted: " + m.NotGranted
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Minion, caps(m.Capabilities, m.Error), strings.Join(m.Policies, ","), m.Pattern, why)
		}
		_ = tw.Flush()
	}
	for _, m := range r.Minions {
		for _, c := range m.Caveats {
			fmt.Fprintf(w, "  %s: %s\n", m.Minion, c)
		}
	}
	warnings(w, r.Warnings)
	r.Vault.table(w)
}

func whatCanTable(w io.Writer, r WhatCanReport) {
	fmt.Fprintf(w, "minion %s (role %s, binding %s)\npolicies: %s\n", r.Minion, r.Role, r.Binding, strings.Join(r.Policies, ", "))
	if len(r.Missing) > 0 {
		fmt.Fprintf(w, "absent policies (skipped): %s\n", strings.Join(r.Missing, ", "))
	}
	if r.Error != "" {
		fmt.Fprintf(w, "every request fails: %s\n", r.Error)
	}
	for _, x := range r.Explain {
		fmt.Fprintf(w, "%s: %s", x.Path, caps(x.Capabilities, x.Error))
		if x.Pattern != "" {
			fmt.Fprintf(w, " from %s %q (%s; %s)", strings.Join(x.Policies, ","), x.Pattern, x.Step, x.Rule)
		} else if x.Step != "" {
			fmt.Fprintf(w, " (%s)", x.Step)
		}
		fmt.Fprintln(w)
		for _, c := range x.Caveats {
			fmt.Fprintf(w, "  caveat: %s\n", c)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATTERN\tKIND\tCAPABILITIES\tPOLICIES")
	for _, p := range r.Patterns {
		var pols []string
		for _, s := range p.Sources {
			pols = append(pols, s.Policy)
		}
		c := strings.Join(p.Capabilities, ",")
		switch {
		case p.Constrained && p.ParametersNote != "":
			c += " (with parameter constraints; " + p.ParametersNote + ")"
		case p.Constrained:
			c += " (with parameter constraints)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Pattern, p.Kind, c, strings.Join(pols, ","))
	}
	_ = tw.Flush()
	for _, d := range r.Dropped {
		fmt.Fprintf(w, "dropped: %s %q: %s\n", d.Policy, d.Pattern, d.Reason)
	}
	warnings(w, r.Warnings)
	r.Vault.table(w)
}

func diffTable(w io.Writer, r DiffReport) {
	// A refusal first: the change fails whatever access it changes, and
	// the minions it leaves out only seem to lose access.
	refusedLines(w, r)
	fmt.Fprintf(w, "%d of %d minions gain access, %d lose access (%d paths compared)\n", r.Summary.Gaining, r.Summary.Minions, r.Summary.Losing, r.Summary.Paths)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.Minions) > 0 {
		fmt.Fprintln(tw, "MINION\tPATH\tBASE\tHEAD\tCHANGE\tWHY")
	}
	for _, m := range r.Minions {
		if m.Status != "" {
			// A binding added, removed or left out is one line, not
			// path by path.
			fmt.Fprintf(tw, "%s\t\t\t\t%s\t%s\n", m.Minion, statusChange(m), m.Why)
			continue
		}
		for _, c := range m.Changes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Minion, c.Path, strings.Join(c.Base, ","), strings.Join(c.Head, ","), change(c), c.Why)
		}
	}
	_ = tw.Flush()
	warnings(w, r.Warnings)
	r.Vault.table(w)
}

// change is a path's change as +gained -lost.
func change(c PathChange) string {
	var ch []string
	if len(c.Gained) > 0 {
		ch = append(ch, "+"+strings.Join(c.Gained, ",+"))
	}
	if len(c.Lost) > 0 {
		ch = append(ch, "-"+strings.Join(c.Lost, ",-"))
	}
	return strings.Join(ch, " ")
}

// statusChange is the one line of a minion added, removed or left out.
func statusChange(m MinionDiff) string {
	gained, lost := 0, 0
	for _, c := range m.Changes {
		if len(c.Gained) > 0 {
			gained++
		}
		if len(c.Lost) > 0 {
			lost++
		}
	}
	switch {
	case gained > 0:
		return fmt.Sprintf("%s: gains access on %d paths", m.Status, gained)
	case lost > 0:
		return fmt.Sprintf("%s: loses access on %d paths", m.Status, lost)
	}
	return m.Status
}

// refusedLines says the head's bindings left out, before anything else:
// first those the change leaves out (they fail the gate), then those the
// base left out already.
func refusedLines(w io.Writer, r DiffReport) {
	var what []string
	if n := r.Summary.Refused; n > 0 {
		what = append(what, fmt.Sprintf("refuse %d", n))
	}
	if n := r.Summary.Waiting; n > 0 {
		what = append(what, fmt.Sprintf("leave waiting %d", n))
	}
	if len(what) > 0 {
		fmt.Fprintf(w, "REFUSED: the operator would %s of the head's MinionBindings: the change fails the gate\n", strings.Join(what, " and "))
		for _, l := range r.Refused {
			if !l.OnBase {
				fmt.Fprintf(w, "  %s %s (minion %s): %s: %s\n", l.Kind, l.Binding, l.Minion, l.Reason, l.Message)
			}
		}
	}
	if n := r.Summary.AlreadyLeftOut; n > 0 {
		fmt.Fprintf(w, "ALREADY LEFT OUT: the base has %d of these MinionBindings left out too (not this change's: the gate does not fail on them)\n", n)
		for _, l := range r.Refused {
			if l.OnBase {
				fmt.Fprintf(w, "  %s %s (minion %s): %s: %s\n", l.Kind, l.Binding, l.Minion, l.Reason, l.Message)
			}
		}
	}
}

func checkTable(w io.Writer, r CheckReport) {
	fmt.Fprintf(w, "%d violations of %d rules\n", len(r.Violations), r.Rules)
	if len(r.Violations) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RULE\tMINION\tPATH\tCAPABILITIES\tPOLICIES\tPATTERN")
		for _, v := range r.Violations {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Rule, v.Minion, v.Path, strings.Join(v.Capabilities, ","), strings.Join(v.Policies, ","), v.Pattern)
		}
		_ = tw.Flush()
	}
	warnings(w, r.Warnings)
	r.Vault.table(w)
}

func warnings(w io.Writer, ws []string) {
	for _, s := range ws {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}

func driftTable(w io.Writer, r DriftReport) {
	fmt.Fprintf(w, "%d of %d minions have access in Vault the manifests do not give, %d lack access the manifests give (%d paths compared)\n",
		r.Summary.Extra, r.Summary.Minions, r.Summary.Missing, r.Summary.Paths)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.Minions) > 0 {
		fmt.Fprintln(tw, "MINION\tROLE\tPATH\tMANIFESTS\tVAULT\tDRIFT\tWHY")
	}
	for _, m := range r.Minions {
		if m.Status != "" {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t%s\t\n", m.Minion, m.Role, m.Status)
		}
		for _, c := range m.Changes {
			var ch []string
			if len(c.Extra) > 0 {
				ch = append(ch, "+"+strings.Join(c.Extra, ",+"))
			}
			if len(c.Missing) > 0 {
				ch = append(ch, "-"+strings.Join(c.Missing, ",-"))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Minion, m.Role, c.Path, strings.Join(c.Manifests, ","), strings.Join(c.Vault, ","), strings.Join(ch, " "), c.Why)
		}
	}
	_ = tw.Flush()
	if v := r.Verify; v != nil {
		verifyTable(w, v)
	}
	warnings(w, r.Warnings)
	r.Vault.table(w)
}

func pillarTable(w io.Writer, r PillarReport) {
	fmt.Fprintf(w, "%d of %d predicted pillar paths of %d minions cannot be read by their minion\n", len(r.Unreadable), r.Paths, r.Minions)
	if len(r.Unreadable) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MINION\tPILLAR PATH\tREAD AS\tCAPABILITIES\tWHY")
		for _, u := range r.Unreadable {
			why := u.Step
			if u.Pattern != "" {
				why = fmt.Sprintf("%s %q (%s)", strings.Join(u.Policies, ","), u.Pattern, u.Step)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Minion, u.Pillar, u.Path, caps(u.Capabilities, u.Error), why)
		}
		_ = tw.Flush()
	}
	// The caveats often are the cause: an assigned policy that does not
	// exist, a templated rule dropped for a missing metadata key.
	for _, u := range r.Unreadable {
		for _, c := range u.Caveats {
			fmt.Fprintf(w, "  %s %s: %s\n", u.Minion, u.Path, c)
		}
	}
	warnings(w, r.Warnings)
	r.Vault.table(w)
}

func verifyTable(w io.Writer, v *VerifyReport) {
	fmt.Fprintf(w, "verify (seed %d, token role %s): %d answers agree with Vault's sys/capabilities, %d disagree\n", v.Seed, v.TokenRole, v.Agreed, len(v.Disagreements))
	for _, m := range v.Minions {
		switch {
		case m.Skipped != "":
			fmt.Fprintf(w, "  %s: not verified: %s\n", m.Role, m.Skipped)
		case m.Note != "":
			fmt.Fprintf(w, "  %s: %d paths; %s\n", m.Role, m.Paths, m.Note)
		default:
			fmt.Fprintf(w, "  %s: %d paths\n", m.Role, m.Paths)
		}
	}
	if len(v.Disagreements) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ROLE\tPATH\tEVALUATOR\tVAULT")
		for _, d := range v.Disagreements {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Role, d.Path, strings.Join(d.Evaluator, ","), strings.Join(d.Vault, ","))
		}
		_ = tw.Flush()
	}
}
