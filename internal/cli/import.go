package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/importer"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
	"github.com/minionvault/minion-vault-operator/internal/mastercheck"
)

type importOptions struct {
	configs              []string
	grains, pillar       string
	output               string
	masterDir            string
	opts                 importer.Options
	allGrains, allPillar bool
}

func newImportCmd(stdout, stderr io.Writer) *cobra.Command {
	o := importOptions{}
	cmd := &cobra.Command{
		Use:   "import --config master-vault.yaml [--grains grains.json] [--pillar pillar.json]",
		Short: "Convert a Salt master's vault: configuration and minion data to manifests",
		Long: `Import reads a Salt master's saltext-vault configuration (the whole master
config or just the vault: mapping, YAML or JSON; legacy shapes of Salt core's
vault modules included; the vault ext_pillar path= entries become pillarPaths)
and writes a VaultConnection, a MinionTemplate and, from the JSON of
"salt-run cache.grains --out=json" and "salt-run cache.pillar --out=json", one
MinionBinding per minion (sorted by minion ID), as one YAML stream.

--config may be repeated (master, then master.d files): mappings are merged,
later files win, as Salt merges them.

Grains kept: by default only "id" and the grains the template's patterns read
(--all-grains keeps all). Pillar kept: by default only the top-level keys the
template's patterns read, because the pillar often holds secrets that have no
business in a manifest (--all-pillar keeps all).

Credentials of the master (auth:token, auth:role_id, auth:secret_id, keys) are
never copied: the VaultConnection's auth is a placeholder to fill in. Settings
that are not converted are listed as warnings on stderr, as are minions the
operator could not render or would refuse (check with "minionvault render").

Binding names: a minion ID that is a valid Kubernetes name is used as is;
any other is lowercased, other characters become '-', and "-" plus 8 hex
digits of the ID's SHA-256 is appended (Web_01 -> web-01-92939705).
spec.minionID keeps the real ID. See docs/migration.md.

The master's side of running beside the operator is written next to the
manifests (the folder of -o, or --master-dir): salt-master-vault.conf, the
master's vault: and peer_run: settings that only issue credentials, and
salt-master-policy.hcl, its Vault policy; every setting of the master's
configuration that would fight the operator is a warning (the offline part
of "minionvault master-check"; docs/operations.md, "Running beside a Salt
master").

Exit status: 0 when the manifests were written (warnings or not), 2 when
the input could not be converted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runImport(o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.configs, "config", "c", nil, "Salt master configuration with the vault: key, or the vault mapping alone (YAML or JSON; repeatable)")
	f.StringVar(&o.grains, "grains", "", "minion grains: JSON file of \"salt-run cache.grains --out=json\"")
	f.StringVar(&o.pillar, "pillar", "", "minion pillar: JSON file of \"salt-run cache.pillar --out=json\"")
	f.StringVar(&o.opts.TemplateName, "template-name", importer.DefaultTemplateName, "name of the MinionTemplate")
	f.StringVarP(&o.opts.Namespace, "namespace", "n", importer.DefaultNamespace, "namespace of the MinionBindings")
	f.StringVar(&o.opts.Connection, "connection", importer.DefaultConnection, "name of the VaultConnection")
	f.BoolVar(&o.allGrains, "all-grains", false, "keep every grain (default: id and the grains the patterns read)")
	f.BoolVar(&o.allPillar, "all-pillar", false, "keep the whole pillar (default: the top-level keys the patterns read)")
	f.StringVarP(&o.output, "output", "o", "-", "output file, - for stdout")
	f.StringVar(&o.masterDir, "master-dir", "", "folder for the master's "+mastercheck.MasterConfigFile+" and "+mastercheck.MasterPolicyFile+" (default: the folder of --output; none with stdout)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

func runImport(o importOptions, stdout, stderr io.Writer) error {
	in := importer.Input{}
	for _, p := range o.configs {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		in.Config = append(in.Config, importer.File{Name: p, Data: data})
	}
	for _, src := range []struct {
		path string
		dst  **importer.File
	}{{o.grains, &in.Grains}, {o.pillar, &in.Pillar}} {
		if src.path == "" {
			continue
		}
		data, err := os.ReadFile(src.path)
		if err != nil {
			return err
		}
		*src.dst = &importer.File{Name: src.path, Data: data}
	}
	o.opts.AllGrains, o.opts.AllPillar = o.allGrains, o.allPillar
	out, err := importer.Import(in, o.opts)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := out.WriteYAML(&buf); err != nil {
		return err
	}
	warnings := out.Warnings
	rendered, err := importer.Check(buf.Bytes())
	if err != nil {
		return fmt.Errorf("reading the output back: %w", err)
	}
	warnings = append(warnings, importer.Problems(rendered)...)

	if o.output == "-" || o.output == "" {
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return err
		}
	} else {
		// The output's folder is made, as helm template --output-dir does.
		if err := os.MkdirAll(filepath.Dir(o.output), 0o755); err != nil {
			return err
		}
		// 0600: bindings carry pillar data.
		if err := os.WriteFile(o.output, buf.Bytes(), 0o600); err != nil {
			return err
		}
	}
	masterWarnings, err := writeMasterSide(o, in.Config, buf.Bytes())
	if err != nil {
		return err
	}
	warnings = append(warnings, masterWarnings...)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "minionvault import: warning: %s\n", oneLine(w))
	}
	return nil
}

// writeMasterSide writes the master's issue-only configuration and Vault
// policy for the imported template next to the manifests, and returns the
// master's settings that would fight the operator as warnings.
func writeMasterSide(o importOptions, config []importer.File, stream []byte) ([]string, error) {
	m, err := mastercheck.Parse(config...)
	if err != nil {
		return nil, err
	}
	docs, err := manifest.Parse(stream)
	if err != nil {
		return nil, err
	}
	var t *mastercheck.Template
	for _, d := range docs {
		if d.Kind != "MinionTemplate" {
			continue
		}
		var mt v1alpha1.MinionTemplate
		if err := d.Decode(&mt); err != nil {
			return nil, err
		}
		if t, err = mastercheck.FromTemplate(&mt); err != nil {
			return nil, err
		}
	}
	if t == nil {
		return nil, nil
	}
	_, findings, err := m.Check([]*mastercheck.Template{t})
	if err != nil {
		return nil, err
	}
	var warnings []string
	for _, f := range findings {
		if f.Severity == mastercheck.Fight {
			warnings = append(warnings, fmt.Sprintf("the master's %s %s (fix: %s)", f.Key, f.Problem, f.Fix))
		}
	}
	dir := o.masterDir
	if dir == "" && o.output != "-" && o.output != "" {
		dir = filepath.Dir(o.output)
	}
	if dir == "" {
		return append(warnings, "the master's "+mastercheck.MasterConfigFile+" and "+mastercheck.MasterPolicyFile+" were not written: the manifests went to stdout (set --master-dir)"), nil
	}
	masterConfig, err := mastercheck.Config(m, t)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{mastercheck.MasterConfigFile: masterConfig, mastercheck.MasterPolicyFile: mastercheck.Policy(t)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	return warnings, nil
}
