package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/minionvault/minion-vault-operator/internal/manifest"
	"github.com/minionvault/minion-vault-operator/internal/rendercmd"
	"github.com/minionvault/minion-vault-operator/pkg/template"
)

type renderOptions struct {
	template, binding string
	jid, user         string
	output            string
	strict            bool
	configMaps        []string
}

func newRenderCmd(stdout io.Writer) *cobra.Command {
	o := renderOptions{}
	cmd := &cobra.Command{
		Use:   "render --template T.yaml --binding B.yaml",
		Short: "Render a MinionBinding with its MinionTemplate offline, as the operator would",
		Long: `Render prints what the operator would write to Vault for one binding:
policies, entity and secret metadata, pillar paths, mapdata, policy documents,
the entity name and the AppRole, plus guard-rail violations and warnings.

Exit status: 0 when rendering succeeds (violations are printed; with --strict
they make the exit status 1), 2 when rendering fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRender(o, stdout)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.template, "template", "t", "", "MinionTemplate manifest (YAML)")
	f.StringVarP(&o.binding, "binding", "b", "", "MinionBinding manifest (YAML)")
	f.StringVar(&o.jid, "jid", template.DefaultJID, "Salt job ID for {jid} in metadata")
	f.StringVar(&o.user, "user", template.DefaultUser, "user for {user} in metadata")
	f.StringVarP(&o.output, "output", "o", "json", "output format: json or yaml")
	f.BoolVar(&o.strict, "strict", false, "exit 1 when there are violations")
	f.StringArrayVar(&o.configMaps, "configmap", nil, "ConfigMap manifest providing parameter files (repeatable)")
	_ = cmd.MarkFlagRequired("template")
	_ = cmd.MarkFlagRequired("binding")
	return cmd
}

func runRender(o renderOptions, stdout io.Writer) error {
	if o.output != "json" && o.output != "yaml" {
		return fmt.Errorf("--output must be json or yaml, not %q", o.output)
	}
	tdoc, err := manifest.Find(o.template, "MinionTemplate")
	if err != nil {
		return err
	}
	bdoc, err := manifest.Find(o.binding, "MinionBinding")
	if err != nil {
		return err
	}
	configMaps, err := rendercmd.ReadConfigMaps(o.configMaps)
	if err != nil {
		return err
	}
	res, violations, err := rendercmd.Render(rendercmd.Options{Template: o.template, Binding: o.binding, JID: o.jid, User: o.user}, tdoc, bdoc, configMaps)
	if err != nil {
		return err
	}
	if err := rendercmd.Write(stdout, rendercmd.Output(res, violations), o.output); err != nil {
		return err
	}
	if o.strict && len(violations) > 0 {
		return exitError{1}
	}
	return nil
}
