package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// Exit codes of audit drift beyond auditClean and auditFindings (a drift).
const (
	// auditVerifyDisagrees: --verify found an answer of the evaluator that
	// is not Vault's; the report cannot be trusted.
	auditVerifyDisagrees = 3
)

// DriftReport is the output of audit drift: per minion, what it can do in
// Vault now that the manifests do not give it (extra), and what the
// manifests give it that it cannot do in Vault (missing).
type DriftReport struct {
	Summary  DriftSummary  `json:"summary"`
	Minions  []MinionDrift `json:"minions"`
	Verify   *VerifyReport `json:"verify,omitempty"`
	Warnings []string      `json:"warnings,omitempty"`
}

// DriftSummary counts the minions with extra and with missing access.
type DriftSummary struct {
	Minions int `json:"minions"`
	Extra   int `json:"extra"`
	Missing int `json:"missing"`
	Paths   int `json:"paths"`
}

// MinionDrift is one minion's drift.
type MinionDrift struct {
	Minion  string `json:"minion"`
	Role    string `json:"role"`
	Binding string `json:"binding,omitempty"`
	// Status: "not in Vault" (a binding whose role the mount lacks), "not
	// in the manifests" (a role no binding renders).
	Status  string      `json:"status,omitempty"`
	Changes []PathDrift `json:"changes"`
}

// PathDrift is one path whose answer in Vault is not the manifests'.
type PathDrift struct {
	Path      string   `json:"path"`
	Manifests []string `json:"manifests"`
	Vault     []string `json:"vault"`
	Extra     []string `json:"extra,omitempty"`
	Missing   []string `json:"missing,omitempty"`
	// Why: the Vault side's deciding policies, pattern and step, for extra
	// access.
	Why string `json:"why,omitempty"`
}

// alignWithVault gives each minion of the manifests what only Vault
// chooses, from its role in Vault: the entity ID, the alias name (the role
// ID) and ID, and the operator's own metadata keys (the owner marker), so
// that they differ only by what the manifests decide.
func alignWithVault(offline, online *fleet) {
	for _, m := range offline.minions {
		o := online.byID[strings.ToLower(m.role)]
		if o == nil || m.subject.Entity == nil {
			continue
		}
		e := *m.subject.Entity
		e.Metadata = maps.Clone(e.Metadata)
		if o.live != nil {
			e.ID = o.live.ID
			for k, v := range o.live.Metadata {
				if strings.HasPrefix(k, ownership.ReservedKeyPrefix) {
					e.Metadata[k] = v
				}
			}
		}
		if len(e.Aliases) > 0 {
			al := e.Aliases[0]
			al.Name = o.roleID
			if o.live != nil {
				for _, a := range o.live.Aliases {
					if a.Name == o.roleID && a.MountAccessor == online.accessor {
						al.ID = a.ID
					}
				}
			}
			e.Aliases = append([]acl.Alias{al}, e.Aliases[1:]...)
		}
		m.subject.Entity = &e
		m.metadata = e.Metadata
		m.prep = offline.ev.Prepare(m.subject)
	}
}

// byRole is the fleet keyed by role name, each minion named by its role,
// as diffFleets pairs minions by name.
func byRole(f *fleet) *fleet {
	out := &fleet{byID: map[string]*fleetMinion{}, docs: f.docs, ev: f.ev}
	for _, m := range f.minions {
		c := *m
		c.id = m.role
		out.minions = append(out.minions, &c)
		out.byID[strings.ToLower(m.role)] = &c
	}
	return out
}

// driftFleets compares the manifests' fleet with Vault's, minion by role.
func driftFleets(offline, online *fleet, extra []string) DriftReport {
	alignWithVault(offline, online)
	d := diffFleets(byRole(offline), online, extra)
	r := DriftReport{Minions: []MinionDrift{}, Summary: DriftSummary{Minions: d.Summary.Minions, Extra: d.Summary.Gaining, Missing: d.Summary.Losing, Paths: d.Summary.Paths}}
	for _, w := range offline.warnings {
		r.Warnings = append(r.Warnings, "manifests: "+w)
	}
	for _, w := range online.warnings {
		r.Warnings = append(r.Warnings, "vault: "+w)
	}
	roles := map[string]*fleetMinion{}
	for _, m := range offline.minions {
		roles[strings.ToLower(m.role)] = m
	}
	for _, md := range d.Minions {
		x := MinionDrift{Minion: md.Minion, Role: md.Role, Changes: []PathDrift{}}
		if m := roles[strings.ToLower(md.Role)]; m != nil {
			x.Minion, x.Binding = m.id, m.binding
		}
		switch md.Status {
		case "added":
			x.Status = "not in the manifests"
		case "removed":
			x.Status = "not in Vault"
		}
		for _, c := range md.Changes {
			x.Changes = append(x.Changes, PathDrift{Path: c.Path, Manifests: c.Base, Vault: c.Head, Extra: c.Gained, Missing: c.Lost, Why: c.Why})
		}
		r.Minions = append(r.Minions, x)
	}
	return r
}

func newAuditDriftCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var extra []string
	v := verifyOptions{}
	cmd := &cobra.Command{
		Use:   "drift -f DIR [--vault] --minion-mount MOUNT",
		Short: "Access in Vault now that the manifests do not give, and the reverse, per minion",
		Long: `Drift reads the fleet both from the manifests (-f, as the other commands)
and from Vault (as --vault does; drift always reads Vault), pairs the
minions by AppRole role name, and compares their capabilities on the paths
the policies of both sides name (and the --path probes): "extra" is what a
minion can do in Vault that the manifests do not give it, "missing" what
the manifests give it that Vault does not. A role no binding renders is
"not in the manifests", a binding whose role is absent "not in Vault".

Vault's rules are those of the server's version unless --vault-version
says otherwise. The manifests' side takes from Vault what only Vault
chooses: entity ID, role ID, the operator's minionvault-* metadata keys,
and the text of policies that are neither rendered nor a file.

--verify N also asks Vault's own sys/capabilities for N sampled minions
(among the roles with an entity),
through short-lived tokens of --verify-token-role bound to each minion's
entity (never a minion's token or secret ID), and reports where the
evaluator disagrees with Vault. See docs/audit.md for the Vault set-up.

Exit status: 0 no drift, 1 a minion has extra or missing access or is on
one side only, 2 an error, 3 --verify found a disagreement with Vault
(before 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if len(o.files) == 0 {
				return errors.New("no manifests: give -f FILE or folder")
			}
			if v.n < 0 {
				return errors.New("--verify must be 0 or more")
			}
			ctx := context.Background()
			version := ""
			if o.versionSet {
				version = o.vaultVersion
			}
			online, err := loadOnlineFleet(ctx, o.minionMount, version)
			if err != nil {
				return err
			}
			offline, err := loadFleet(o.files, fleetOptions{vaultVersion: online.version, accessor: online.accessor, vaultDocs: online.docs})
			if err != nil {
				return err
			}
			r := driftFleets(offline, online, extra)
			if v.n > 0 {
				vr, err := verifyFleet(ctx, online, v, driftPaths(r, offline, online, extra))
				if err != nil {
					return fmt.Errorf("--verify: %w", err)
				}
				r.Verify = vr
			}
			if err := writeAudit(stdout, o.output, r, func(w io.Writer) { driftTable(w, r) }); err != nil {
				return err
			}
			switch {
			case r.Verify != nil && len(r.Verify.Disagreements) > 0:
				return exitError{auditVerifyDisagrees}
			case r.Summary.Extra > 0 || r.Summary.Missing > 0:
				return exitError{auditFindings}
			}
			for _, m := range r.Minions {
				if m.Status != "" {
					return exitError{auditFindings}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&extra, "path", nil, "a path to compare besides those the policies name (repeatable)")
	cmd.Flags().IntVar(&v.n, "verify", 0, "ask Vault's sys/capabilities for this many sampled minions and compare (needs the set-up of docs/audit.md)")
	cmd.Flags().StringVar(&v.role, "verify-token-role", "minionvault-audit-verify", "the token role --verify creates its short-lived tokens with")
	cmd.Flags().Int64Var(&v.seed, "verify-seed", 0, "the seed of the --verify sample (0: a new one, printed)")
	return cmd
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
}
