package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/minionvault/minion-vault-operator/internal/audit"
	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// Exit codes of audit diff and audit check.
const (
	auditClean    = 0 // no minion gains access; no rule is violated
	auditFindings = 1 // a minion gains access, or the head has a binding left out; a rule is violated
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
	// version applies otherwise; offline, the newest tested version).
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
	pf.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml (diff: also markdown, a pull-request comment)")
	pf.StringVar(&o.vaultVersion, "vault-version", vault.NewestTested(), "Vault version whose ACL rules apply (default: with --vault the server's own, else the newest version the project tests); the report names it and the rules it implies")
	pf.StringVar(&o.accessor, "approle-accessor", "auth_approle_offline", "mount accessor of the minions' AppRole mount, for {{identity.entity.aliases.<accessor>...}}")
	pf.BoolVar(&o.online, "vault", false, "read the fleet from Vault (VAULT_ADDR, VAULT_TOKEN; read rights only) instead of manifests: a minion is a role of --minion-mount")
	pf.StringVar(&o.minionMount, "minion-mount", "approle", "the minions' AppRole auth mount, with --vault")
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		o.versionSet = cmd.Flags().Changed("vault-version")
		if o.versionSet {
			return audit.ParseVaultVersion(o.vaultVersion)
		}
		return nil
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

// load reads the fleet of the manifests in paths, or with --vault Vault's:
// every role of the minion mount, or only those of minions when set (what-can
// reads the one it explains).
func (o *auditOptions) load(paths []string, minions ...string) (*audit.Fleet, error) {
	if o.online {
		return audit.LoadOnlineWith(context.Background(), audit.OnlineOptions{Mount: o.minionMount, Version: o.version(), Roles: minions})
	}
	if len(paths) == 0 {
		return nil, errors.New("no manifests: give -f FILE or folder")
	}
	f, err := audit.Load(paths, o.offline())
	if err != nil {
		return nil, err
	}
	return f, nil
}

// loadSome is load, refusing a fleet with no minion: an answer about
// nothing ("0 of 0 minions") must not pass for a clean one.
func (o *auditOptions) loadSome(paths []string) (*audit.Fleet, error) {
	f, err := o.load(paths)
	if err != nil {
		return nil, err
	}
	what := "the manifests " + strings.Join(paths, ", ")
	if o.online {
		what = "mount " + o.minionMount
	}
	if err := f.Empty(what); err != nil {
		return nil, err
	}
	return f, nil
}

// version is --vault-version when given, else "" (the default: the
// server's own version online, the newest tested one offline).
func (o *auditOptions) version() string {
	if o.versionSet {
		return o.vaultVersion
	}
	return ""
}

// offline is how the fleets of manifests are evaluated.
func (o *auditOptions) offline() audit.Options {
	return audit.Options{VaultVersion: o.version(), Accessor: o.accessor}
}

func newAuditWhoCanCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var capName, kvOp, kvMount string
	var kvVersion int
	var all, literal bool
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
			if err := audit.QueryPath(args[0], literal); err != nil {
				return err
			}
			q := audit.WhoCanQuery{Path: args[0], All: all}
			if capName != "" {
				c, ok := acl.ParseCap(capName)
				if !ok || c == acl.Deny {
					return fmt.Errorf("--cap: unknown capability %q", capName)
				}
				q.Want = c
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
				q.KV, q.Path, q.Logical, q.Operation = &req, req.Path, args[0], kvOp
			}
			f, err := o.loadSome(o.files)
			if err != nil {
				return err
			}
			return audit.Write(stdout, o.output, audit.WhoCan(f, q))
		},
	}
	cmd.Flags().StringVar(&capName, "cap", "", "only minions with this capability (read, list, create, update, delete, patch, sudo, ...)")
	cmd.Flags().BoolVar(&all, "all", false, "list the minions without access too")
	cmd.Flags().BoolVar(&literal, "literal", false, "take a \"*\" or \"+\" in PATH as a literal character, as sys/capabilities does")
	cmd.Flags().StringVar(&kvOp, "kv-op", "", "PATH is a logical KV secret path; ask about this operation ("+strings.Join(acl.KVOps, ", ")+")")
	cmd.Flags().StringVar(&kvMount, "kv-mount", "", "the KV mount of PATH for --kv-op (default: its first segment)")
	cmd.Flags().IntVar(&kvVersion, "kv-version", 2, "the KV version of the mount for --kv-op")
	return cmd
}

func newAuditWhatCanCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var extra []string
	var literal bool
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
			for _, p := range append(args[1:], extra...) {
				if err := audit.QueryPath(p, literal); err != nil {
					return err
				}
			}
			f, err := o.load(o.files, args[0])
			if err != nil {
				return err
			}
			m := f.Minion(args[0])
			if m == nil {
				if o.online {
					return fmt.Errorf("no role %q on the minion mount %s", args[0], o.minionMount)
				}
				return fmt.Errorf("no minion %q among the manifests", args[0])
			}
			return audit.Write(stdout, o.output, audit.WhatCan(f, m, append(args[1:], extra...)))
		},
	}
	cmd.Flags().StringArrayVar(&extra, "path", nil, "a path to answer for (repeatable; the same as PATH arguments)")
	cmd.Flags().BoolVar(&literal, "literal", false, "take a \"*\" or \"+\" in a PATH as a literal character, as sys/capabilities does")
	return cmd
}

func newAuditDiffCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var base, head []string
	var extra []string
	var literal bool
	cmd := &cobra.Command{
		Use:   "diff --base DIR --head DIR",
		Short: "Access gained and lost per minion between two sets of manifests (a pull-request gate)",
		Long: `Diff renders both sets of manifests and policy files and compares every
minion's capabilities on the paths the policies name (a glob's prefix and
one path under it, "+" segments filled in, templated paths as each minion
renders them) and on the --path probes.

The head's bindings that the operator would refuse (ConflictingPolicyBody,
DuplicateMinionID, ...) or leave waiting (a template not among the
manifests) are said first, and fail the gate: a change the operator would
reject is not a clean one. -o markdown is a pull-request comment: who gains
and who loses, grouped by role and policy with the deciding rule, details
collapsed, under 60 KB whatever the fleet (it says what it cut).

Exit status: 1 when any minion gains access or the head leaves a binding
out, 0 otherwise, 2 on an error (a head with no MinionBinding included).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "markdown" {
				if err := o.validate(); err != nil {
					return err
				}
			}
			if o.online {
				return errors.New("diff compares two sets of manifests: --vault does not apply")
			}
			if len(base) == 0 || len(head) == 0 {
				return errors.New("--base and --head are required")
			}
			for _, p := range extra {
				if err := audit.QueryPath(p, literal); err != nil {
					return fmt.Errorf("--path: %w", err)
				}
			}
			bf, hf, err := audit.LoadDiff(base, head, o.offline())
			if err != nil {
				return err
			}
			// The base may be empty (a fleet's first bindings: each one is
			// added, and gains); a head of nothing is a wrong folder more
			// often than a fleet deleted, and must not pass.
			if len(hf.Minions()) == 0 && len(hf.LeftOut()) == 0 {
				if err := hf.Empty("head " + strings.Join(head, ", ")); err != nil {
					return err
				}
			}
			r := audit.Diff(bf, hf, extra)
			if err := audit.Write(stdout, o.output, r); err != nil {
				return err
			}
			if r.Fails() {
				return exitError{auditFindings}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&base, "base", nil, "the manifests before the change (file or folder, repeatable)")
	cmd.Flags().StringArrayVar(&head, "head", nil, "the manifests after the change (file or folder, repeatable)")
	cmd.Flags().StringArrayVar(&extra, "path", nil, "a path to compare besides those the policies name (repeatable)")
	cmd.Flags().BoolVar(&literal, "literal", false, "take a \"*\" or \"+\" in a --path as a literal character, as sys/capabilities does")
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

A path is a Vault pattern: "+" is any one segment, a trailing "*" any
rest; a pattern covers the paths the policies name that it matches, plus
one more path made of it ("+" and "*" as "_"). A "*" elsewhere, or a "+"
inside a segment, is an error. Every violating path of every minion is
reported.

Exit status: 1 when a rule is violated, 0 otherwise, 2 on an error (no
rules, no minion included).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			data, err := os.ReadFile(rulesFile)
			if err != nil {
				return err
			}
			var rules audit.Rules
			dec := yaml.NewDecoder(bytes.NewReader(data))
			var node yaml.Node
			if err := dec.Decode(&node); err != nil {
				if errors.Is(err, io.EOF) {
					return fmt.Errorf("%s: empty file: no rules, nothing to check", rulesFile)
				}
				return fmt.Errorf("%s: %w", rulesFile, err)
			}
			if err := decodeStrict(&node, &rules); err != nil {
				return fmt.Errorf("%s: %w", rulesFile, err)
			}
			if len(rules.Rules) == 0 {
				return fmt.Errorf("%s: no rules: nothing to check", rulesFile)
			}
			f, err := o.loadSome(o.files)
			if err != nil {
				return err
			}
			r, err := audit.Check(f, rules)
			if err != nil {
				return fmt.Errorf("%s: %w", rulesFile, err)
			}
			if err := audit.Write(stdout, o.output, r); err != nil {
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
