package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// Exit codes of audit diff and audit check.
const (
	auditClean    = 0 // no minion gains access; no rule is violated
	auditFindings = 1 // a minion gains access; a rule is violated
	// An error exits with 2, Main's default.
)

type auditOptions struct {
	files        []string
	output       string
	vaultVersion string
	accessor     string
	online       bool
	minionMount  string
	// versionSet: --vault-version was given (online, the server's own
	// version applies otherwise).
	versionSet bool
}

func newAuditCmd(stdout io.Writer) *cobra.Command {
	o := &auditOptions{}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Who can reach a Vault path, and what a change does to access (offline, from manifests)",
		Long: `Audit evaluates Vault's ACL rules offline, exactly as Vault's
sys/capabilities answers for a minion's token after its next login: the
token policies its template renders (with "default"), the entity metadata,
and the policy documents the templates render plus the *.hcl policy files
among the manifests (a file is named by its name without .hcl, or by a
first line "# policy: NAME"). Policies that are neither are absent, as
Vault skips unknown policies; the report says so.

With --vault the fleet is read from Vault instead (VAULT_ADDR, VAULT_TOKEN,
read rights only): the ACL policies, the roles of --minion-mount, and each
role's entity (its alias is the role ID on the mount) with its groups. A
minion is then a role, and its answer is what a fresh login of the role
would get now. Nothing is written, no minion is logged in.

Drift compares the two: per minion, what it can do in Vault now that the
manifests do not give it, and the reverse (--verify N asks Vault's own
sys/capabilities about N minions through a token role; it writes a
short-lived alias and token).

Offline it does not see other auth methods, identity groups, Enterprise
Sentinel policies or control groups. See docs/audit.md.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringArrayVarP(&o.files, "filename", "f", nil, "manifest or policy file, or folder (repeatable; folders: *.yaml, *.yml, *.json, *.hcl)")
	pf.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	pf.StringVar(&o.vaultVersion, "vault-version", "1.21.4", "Vault version whose rules apply (1.21.6 and later drop templated values with * or +)")
	pf.StringVar(&o.accessor, "approle-accessor", "auth_approle_offline", "mount accessor of the minions' AppRole mount, for {{identity.entity.aliases.<accessor>...}}")
	pf.BoolVar(&o.online, "vault", false, "read the fleet from Vault (VAULT_ADDR, VAULT_TOKEN; read rights only) instead of manifests: a minion is a role of --minion-mount")
	pf.StringVar(&o.minionMount, "minion-mount", "approle", "the minions' AppRole auth mount, with --vault")
	cmd.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		o.versionSet = cmd.Flags().Changed("vault-version")
	}
	cmd.AddCommand(newAuditWhoCanCmd(o, stdout), newAuditWhatCanCmd(o, stdout), newAuditDiffCmd(o, stdout), newAuditCheckCmd(o, stdout), newAuditDriftCmd(o, stdout), newAuditPillarCmd(o, stdout))
	return cmd
}

func (o *auditOptions) validate() error {
	switch o.output {
	case "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output must be table, json or yaml, not %q", o.output)
}

func (o *auditOptions) load(paths []string) (*fleet, error) {
	if o.online {
		version := ""
		if o.versionSet {
			version = o.vaultVersion
		}
		return loadOnlineFleet(context.Background(), o.minionMount, version)
	}
	return o.loadOffline(paths, fleetOptions{})
}

// loadOffline reads the fleet of the manifests in paths; fo brings audit
// diff's manifest cache and unprepared minions.
func (o *auditOptions) loadOffline(paths []string, fo fleetOptions) (*fleet, error) {
	if len(paths) == 0 {
		return nil, errors.New("no manifests: give -f FILE or folder")
	}
	fo.vaultVersion, fo.accessor = o.vaultVersion, o.accessor
	return loadFleet(paths, fo)
}

func newAuditWhoCanCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var capName, kvOp, kvMount string
	var kvVersion int
	var all bool
	cmd := &cobra.Command{
		Use:   "who-can PATH",
		Short: "Every minion with access to PATH, with the policy, pattern and rule that decide",
		Long: `Who-can prints a count line, then every minion with access to PATH (with
--cap, with that capability): its capabilities as sys/capabilities gives
them, the deciding policy and pattern, which priority rule made the pattern
win and over what, and the caveats (a deny that lost, a templated rule
dropped for a missing key, a rendered value that became a glob, parameter
constraints that capabilities do not show).

With --kv-op, PATH is a logical KV secret path (mount/path, as the pillar
names it): who-can asks about the physical path the operation uses (KV v2:
mount/data/path for read and write, mount/metadata/path/ for list, ...) and
the capability it needs.

Exit status: 0, or 2 on an error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			q := whoCanQuery{path: args[0], all: all}
			if capName != "" {
				c, ok := acl.ParseCap(capName)
				if !ok || c == acl.Deny {
					return fmt.Errorf("--cap: unknown capability %q", capName)
				}
				q.want = c
			}
			if kvOp != "" {
				if capName != "" {
					return errors.New("--cap and --kv-op exclude each other: the operation says which capability")
				}
				mount := kvMount
				if mount == "" {
					mount, _, _ = strings.Cut(strings.TrimLeft(args[0], "/"), "/")
				}
				req, err := acl.KVPath(mount, args[0], kvVersion, kvOp)
				if err != nil {
					return err
				}
				q.kv, q.path, q.logical, q.operation = &req, req.Path, args[0], kvOp
			}
			f, err := o.load(o.files)
			if err != nil {
				return err
			}
			r := whoCan(f, q)
			return writeAudit(stdout, o.output, r, func(w io.Writer) { whoCanTable(w, r) })
		},
	}
	cmd.Flags().StringVar(&capName, "cap", "", "only minions with this capability (read, list, create, update, delete, patch, sudo, ...)")
	cmd.Flags().BoolVar(&all, "all", false, "list the minions without access too")
	cmd.Flags().StringVar(&kvOp, "kv-op", "", "PATH is a logical KV secret path; ask about this operation ("+strings.Join(acl.KVOps, ", ")+")")
	cmd.Flags().StringVar(&kvMount, "kv-mount", "", "the KV mount of PATH for --kv-op (default: its first segment)")
	cmd.Flags().IntVar(&kvVersion, "kv-version", 2, "the KV version of the mount for --kv-op")
	return cmd
}

func newAuditWhatCanCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var extra []string
	cmd := &cobra.Command{
		Use:   "what-can MINION [PATH...]",
		Short: "A minion's policies and patterns after templating, and its capabilities on PATHs",
		Long: `What-can prints a minion's policies, its patterns after Vault's identity
templating (with the rules dropped for this minion and why), and for each
PATH its capabilities with the explanation. MINION is a minion ID, a
MinionBinding namespace/name or an AppRole role name.

Exit status: 0, or 2 on an error (an unknown minion).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			f, err := o.load(o.files)
			if err != nil {
				return err
			}
			m := f.minion(args[0])
			if m == nil {
				return fmt.Errorf("no minion %q among the manifests", args[0])
			}
			r := whatCan(f, m, append(args[1:], extra...))
			return writeAudit(stdout, o.output, r, func(w io.Writer) { whatCanTable(w, r) })
		},
	}
	cmd.Flags().StringArrayVar(&extra, "path", nil, "a path to answer for (repeatable; the same as PATH arguments)")
	return cmd
}

func newAuditDiffCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var base, head []string
	var extra []string
	cmd := &cobra.Command{
		Use:   "diff --base DIR --head DIR",
		Short: "Access gained and lost per minion between two sets of manifests (a pull-request gate)",
		Long: `Diff renders both sets of manifests and policy files and compares every
minion's capabilities on the paths the policies name (a glob's prefix and
one path under it, "+" segments filled in, templated paths as each minion
renders them) and on the --path probes.

Exit status: 1 when any minion gains access, 0 otherwise, 2 on an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if o.online {
				return errors.New("diff compares two sets of manifests: --vault does not apply")
			}
			if len(base) == 0 || len(head) == 0 {
				return errors.New("--base and --head are required")
			}
			// The two sides are read side by side; a file the same on both
			// is parsed once. The minions are prepared one at a time while
			// they are compared (diffFleets), never all at once.
			fo := fleetOptions{manifests: newManifestCache(2), unprepared: true, shared: newSharedMinions(2)}
			var bf *fleet
			var berr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				bf, berr = o.loadOffline(base, fo)
			}()
			hf, herr := o.loadOffline(head, fo)
			<-done
			if berr != nil {
				return fmt.Errorf("base: %w", berr)
			}
			if herr != nil {
				return fmt.Errorf("head: %w", herr)
			}
			r := diffFleets(bf, hf, extra)
			if err := writeAudit(stdout, o.output, r, func(w io.Writer) { diffTable(w, r) }); err != nil {
				return err
			}
			if r.Summary.Gaining > 0 {
				return exitError{auditFindings}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&base, "base", nil, "the manifests before the change (file or folder, repeatable)")
	cmd.Flags().StringArrayVar(&head, "head", nil, "the manifests after the change (file or folder, repeatable)")
	cmd.Flags().StringArrayVar(&extra, "path", nil, "a path to compare besides those the policies name (repeatable)")
	return cmd
}

func newAuditCheckCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var rulesFile string
	cmd := &cobra.Command{
		Use:   "check --rules FILE",
		Short: "Check declared access invariants against every minion",
		Long: `Check reads invariants from a YAML file and reports every minion that
holds what a rule forbids:

  rules:
    - name: only db minions read the db secrets
      paths: ["salt/data/roles/db", "salt/data/db/*"]
      capability: read
      allow:
        roles: [db]          # entity metadata "roles"
    - name: nobody gets sudo under sys/
      paths: ["sys/*"]
      capability: sudo       # allow omitted: nobody

A path ending in "*" covers the paths the policies name under it, plus one
more path under it.

Exit status: 1 when a rule is violated, 0 otherwise, 2 on an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			data, err := os.ReadFile(rulesFile)
			if err != nil {
				return err
			}
			var rules AuditRules
			dec := yaml.NewDecoder(bytes.NewReader(data))
			var node yaml.Node
			if err := dec.Decode(&node); err != nil {
				return fmt.Errorf("%s: %w", rulesFile, err)
			}
			if err := decodeStrict(&node, &rules); err != nil {
				return fmt.Errorf("%s: %w", rulesFile, err)
			}
			f, err := o.load(o.files)
			if err != nil {
				return err
			}
			r, err := checkRules(f, rules)
			if err != nil {
				return fmt.Errorf("%s: %w", rulesFile, err)
			}
			if err := writeAudit(stdout, o.output, r, func(w io.Writer) { checkTable(w, r) }); err != nil {
				return err
			}
			if len(r.Violations) > 0 {
				return exitError{auditFindings}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&rulesFile, "rules", "", "YAML file of invariants")
	_ = cmd.MarkFlagRequired("rules")
	return cmd
}

// decodeStrict decodes YAML through JSON, so that the json tags apply and
// unknown keys are errors.
func decodeStrict(node *yaml.Node, out any) error {
	var v any
	if err := node.Decode(&v); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

// writeAudit prints a report as a table, JSON or YAML (the JSON keys, in
// the same order).
func writeAudit(w io.Writer, format string, v any, table func(io.Writer)) error {
	if format == "table" {
		table(w)
		return nil
	}
	if r, ok := v.(DiffReport); ok && format == "json" {
		return writeDiffJSON(w, r)
	}
	data, err := json.MarshalIndent(v, "", "  ")
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
	fmt.Fprintln(w)
	if len(r.Minions) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MINION\tCAPABILITIES\tPOLICIES\tPATTERN\tWHY")
		for _, m := range r.Minions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Minion, caps(m.Capabilities, m.Error), strings.Join(m.Policies, ","), m.Pattern, m.Rule)
		}
		_ = tw.Flush()
	}
	for _, m := range r.Minions {
		for _, c := range m.Caveats {
			fmt.Fprintf(w, "  %s: %s\n", m.Minion, c)
		}
	}
	warnings(w, r.Warnings)
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
		if p.Constrained {
			c += " (with parameter constraints)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Pattern, p.Kind, c, strings.Join(pols, ","))
	}
	_ = tw.Flush()
	for _, d := range r.Dropped {
		fmt.Fprintf(w, "dropped: %s %q: %s\n", d.Policy, d.Pattern, d.Reason)
	}
	warnings(w, r.Warnings)
}

func diffTable(w io.Writer, r DiffReport) {
	fmt.Fprintf(w, "%d of %d minions gain access, %d lose access (%d paths compared)\n", r.Summary.Gaining, r.Summary.Minions, r.Summary.Losing, r.Summary.Paths)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.Minions) > 0 {
		fmt.Fprintln(tw, "MINION\tPATH\tBASE\tHEAD\tCHANGE")
	}
	for _, m := range r.Minions {
		if m.Status != "" && len(m.Changes) == 0 {
			fmt.Fprintf(tw, "%s\t\t\t\t%s\n", m.Minion, m.Status)
		}
		for _, c := range m.Changes {
			var ch []string
			if len(c.Gained) > 0 {
				ch = append(ch, "+"+strings.Join(c.Gained, ",+"))
			}
			if len(c.Lost) > 0 {
				ch = append(ch, "-"+strings.Join(c.Lost, ",-"))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Minion, c.Path, strings.Join(c.Base, ","), strings.Join(c.Head, ","), strings.Join(ch, " "))
		}
	}
	_ = tw.Flush()
	warnings(w, r.Warnings)
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
}

func warnings(w io.Writer, ws []string) {
	for _, s := range ws {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}
