// Package cli is the minionvault command line.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minionvault/minion-vault-operator/internal/version"
)

// exitError carries an exit code without a message of its own.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs the command line and returns the process exit code. Failures
// print one line, "minionvault <command>: reason", on stderr.
func Main(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "minionvault",
		Short:         "Salt minions' Vault policies, entities and AppRoles, managed from Kubernetes",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.AddCommand(newRenderCmd(stdout), newOperatorCmd(), newPlanCmd(stdout, stderr))
	root.AddCommand(newDevCmd(stdout))
	root.AddCommand(newImportCmd(stdout, stderr), newMasterCheckCmd(stdout, stderr))
	root.AddCommand(newAuditCmd(stdout))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	name := "minionvault"
	if cmd != nil && cmd != root {
		name += " " + cmd.Name()
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err.Error()))
	return 2
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
