package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/minionvault/minion-vault-operator/internal/audit"
)

// Exit codes of audit drift beyond auditClean and auditFindings (a drift).
const (
	// auditVerifyDisagrees: --verify found an answer of the evaluator that
	// is not Vault's; the report cannot be trusted.
	auditVerifyDisagrees = 3
)

func newAuditDriftCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var extra []string
	v := audit.VerifyOptions{}
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
			if v.N < 0 {
				return errors.New("--verify must be 0 or more")
			}
			ctx := context.Background()
			online, err := audit.LoadOnline(ctx, o.minionMount, o.version())
			if err != nil {
				return err
			}
			offline, err := audit.LoadForDrift(o.files, online)
			if err != nil {
				return err
			}
			r := audit.Drift(offline, online, extra)
			if v.N > 0 {
				vr, err := audit.Verify(ctx, offline, online, v, extra)
				if err != nil {
					return fmt.Errorf("--verify: %w", err)
				}
				r.Verify = vr
			}
			if err := audit.Write(stdout, o.output, r); err != nil {
				return err
			}
			return driftExit(r)
		},
	}
	cmd.Flags().StringArrayVar(&extra, "path", nil, "a path to compare besides those the policies name (repeatable)")
	cmd.Flags().IntVar(&v.N, "verify", 0, "ask Vault's sys/capabilities for this many sampled minions and compare (needs the set-up of docs/audit.md)")
	cmd.Flags().StringVar(&v.Role, "verify-token-role", "minionvault-audit-verify", "the token role --verify creates its short-lived tokens with")
	cmd.Flags().Int64Var(&v.Seed, "verify-seed", 0, "the seed of the --verify sample (0: a new one, printed)")
	return cmd
}

// driftExit is the exit status of a drift report: a disagreement of
// --verify first (the report cannot be trusted), then any drift.
func driftExit(r audit.DriftReport) error {
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
}
