package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minionvault/minion-vault-operator/internal/audit"
)

func newAuditPillarCmd(o *auditOptions, stdout io.Writer) *cobra.Command {
	var kv []string
	cmd := &cobra.Command{
		Use:   "pillar -f MANIFESTS [--kv MOUNT=VERSION]",
		Short: "Predicted pillar paths that their minion cannot read",
		Long: `Pillar checks, for every binding, each of its predicted pillar paths (the
template's pillarPaths rendered, status.pillarPaths): the Salt master's
Vault ext_pillar reads them with the minion's own token, so each must be
readable by the policies the minion's token gets (its token_policies with
"default", the entity metadata behind templated rules). A path is read as
saltext's kv.py does: on a KV v2 mount "data/" is inserted after the mount
unless the path has it already ("mount/metadata/..." is read as
"mount/data/..."). --kv says a mount's version (repeatable; a mount may
have several segments; every other mount is the path's first segment, KV
v2). Below the table, the caveats of each answer (an assigned policy that
does not exist, a templated rule dropped for a missing metadata key).

Exit status: 0 every path is readable, 1 some are not, 2 an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if o.online {
				return errors.New("audit pillar reads the manifests (the predicted pillar paths): it does not take --vault")
			}
			versions, err := kvVersions(kv)
			if err != nil {
				return err
			}
			f, err := o.loadSome(o.files)
			if err != nil {
				return err
			}
			r := audit.Pillar(f, versions)
			if err := audit.Write(stdout, o.output, r); err != nil {
				return err
			}
			if len(r.Unreadable) > 0 {
				return exitError{auditFindings}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&kv, "kv", nil, "MOUNT=VERSION: the KV version of a mount (1 or 2; default 2)")
	return cmd
}

func kvVersions(flags []string) (map[string]int, error) {
	out := map[string]int{}
	for _, f := range flags {
		mount, v, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || (n != 1 && n != 2) || strings.Trim(mount, "/") == "" {
			return nil, fmt.Errorf("--kv %q: want MOUNT=1 or MOUNT=2", f)
		}
		out[strings.Trim(mount, "/")] = n
	}
	return out, nil
}
