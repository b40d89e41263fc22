package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// PillarReport is the output of audit pillar: each predicted pillar path
// its minion's token cannot read.
type PillarReport struct {
	Minions    int                `json:"minions"`
	Paths      int                `json:"paths"`
	Unreadable []UnreadablePillar `json:"unreadable"`
	Warnings   []string           `json:"warnings,omitempty"`
}

// UnreadablePillar is a pillar path the Salt master's ext_pillar reads as
// the minion and Vault would refuse.
type UnreadablePillar struct {
	// Pillar is the path as the template predicts it (status.pillarPaths),
	// Path the one Vault is asked for (KV v2: data/ after the mount).
	Pillar string `json:"pillar"`
	Path   string `json:"path"`
	MinionAccess
}

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
			f, err := o.load(o.files)
			if err != nil {
				return err
			}
			r := pillarReport(f, versions)
			if err := writeAudit(stdout, o.output, r, func(w io.Writer) { pillarTable(w, r) }); err != nil {
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

// pillarReadPath is the path saltext's ext_pillar reads for a pillar path.
// The mount is the longest --kv mount the path is under, else its first
// segment (kv.py asks sys/internal/ui/mounts, which offline we cannot).
// On a KV v2 mount _v2_the_path (kv.py:360-385, ported as
// saltmaster.v2ThePath) leaves "mount/data/..." as it is, turns
// "mount/metadata/..." into "mount/data/...", and inserts "data/" after the
// mount otherwise.
func pillarReadPath(pillar string, versions map[string]int) string {
	p := strings.Trim(pillar, "/")
	mount, _, _ := strings.Cut(p, "/")
	for m := range versions {
		if (p == m || strings.HasPrefix(p, m+"/")) && len(m) > len(mount) {
			mount = m
		}
	}
	if v, ok := versions[mount]; ok && v == 1 {
		return p
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(p, mount), "/")
	under := func(seg string) bool { return rest == seg || strings.HasPrefix(rest, seg+"/") }
	switch {
	case under("data"):
		return p
	case under("metadata"):
		return mount + "/data" + strings.TrimPrefix(rest, "metadata")
	}
	return mount + "/data/" + rest
}

func pillarReport(f *fleet, versions map[string]int) PillarReport {
	r := PillarReport{Minions: len(f.minions), Unreadable: []UnreadablePillar{}, Warnings: f.warnings}
	for _, m := range f.minions {
		for _, p := range m.pillarPaths {
			r.Paths++
			path := pillarReadPath(p, versions)
			if d := m.prep.Check(path); d.Err == nil && (d.Root || d.Caps.Allows(acl.Read)) {
				continue
			}
			r.Unreadable = append(r.Unreadable, UnreadablePillar{Pillar: p, Path: path, MinionAccess: access(m, path)})
		}
	}
	return r
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
}
