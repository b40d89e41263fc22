package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/spf13/cobra"

	"github.com/minionvault/minion-vault-operator/internal/mastercheck"
)

type masterCheckOptions struct {
	configs         []string
	files           []string
	output          string
	vaultAddr       string
	masterAccessor  string
	masterTokenFile string
	timeout         time.Duration
}

// MasterCheckResult is the JSON output of master-check.
type MasterCheckResult struct {
	Files    []string              `json:"files"`
	Template string                `json:"template"`
	Findings []mastercheck.Finding `json:"findings"`
	Fights   int                   `json:"fights"`
}

func newMasterCheckCmd(stdout, stderr io.Writer) *cobra.Command {
	o := masterCheckOptions{}
	cmd := &cobra.Command{
		Use:   "master-check --config FILE|DIR -f MANIFESTS [--vault ADDR]",
		Short: "List what a Salt master would fight the operator over, with the fixes",
		Long: `Master-check reads a Salt master's configuration (its vault: and peer_run:
keys; --config may be repeated: the master file, then master.d, merged as
Salt merges them; a folder holding "master" is read with its master.d) and
the manifests (the MinionTemplate whose appRole.mount the master issues for,
and its MinionBindings), and lists every setting that would make the master
rewrite, create or delete what the operator owns, or fail to issue
credentials, each with its fix (docs/operations.md, "Running beside a Salt
master").

With --vault (and VAULT_TOKEN: a token that may read the roles) it also
reads each binding's AppRole role as the master would and says which the
master would create or rewrite and why, and asks Vault what the master's
token may do: --master-accessor (sys/capabilities-accessor, which the
checking token needs "update" on) or --master-token-file (sys/capabilities).
It never logs in as a minion and writes nothing.

Exit status: 0 no fight, 1 fights found, 2 the input could not be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			return runMasterCheck(ctx, o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.configs, "config", "c", nil, "Salt master configuration file or folder (repeatable, in the order Salt reads them)")
	f.StringArrayVarP(&o.files, "filename", "f", nil, "manifest files or folders (repeatable)")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.StringVar(&o.vaultAddr, "vault", "", "also read Vault at this address, as the master would (VAULT_TOKEN reads the roles)")
	f.StringVar(&o.masterAccessor, "master-accessor", "", "with --vault: the accessor of the master's Vault token, to ask what it may do")
	f.StringVar(&o.masterTokenFile, "master-token-file", "", "with --vault: a file holding the master's Vault token, to ask what it may do (sys/capabilities)")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	_ = cmd.MarkFlagRequired("config")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func runMasterCheck(ctx context.Context, o masterCheckOptions, stdout, _ io.Writer) error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("--output %q: want text or json", o.output)
	}
	if o.vaultAddr == "" && (o.masterAccessor != "" || o.masterTokenFile != "") {
		return errors.New("--master-accessor and --master-token-file need --vault")
	}
	files, err := mastercheck.ReadFiles(o.configs)
	if err != nil {
		return err
	}
	m, err := mastercheck.Parse(files...)
	if err != nil {
		return err
	}
	in, err := readPlanInput(o.files)
	if err != nil {
		return err
	}
	var templates []*mastercheck.Template
	for _, td := range in.Templates {
		t, err := mastercheck.FromTemplate(td.Obj)
		if err != nil {
			return err
		}
		templates = append(templates, t)
	}
	t, findings, err := m.Check(templates)
	if err != nil {
		return err
	}
	if o.vaultAddr != "" {
		var minions []string
		for _, b := range in.Bindings {
			if b.Spec.TemplateRef.Name == t.Name {
				minions = append(minions, b.Spec.MinionID)
			}
		}
		online, err := checkMasterOnline(ctx, o, m, t, minions)
		if err != nil {
			return err
		}
		findings = append(findings, online...)
	}
	res := MasterCheckResult{Files: m.Files, Template: t.Name, Findings: findings, Fights: mastercheck.Fights(findings)}
	if res.Findings == nil {
		res.Findings = []mastercheck.Finding{}
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		writeMasterCheckText(stdout, res)
	}
	if res.Fights > 0 {
		return exitError{1}
	}
	return nil
}

func writeMasterCheckText(w io.Writer, res MasterCheckResult) {
	for _, f := range res.Findings {
		fmt.Fprintf(w, "%s: %s %s\n    fix: %s\n", f.Severity, f.Key, f.Problem, f.Fix)
	}
	switch {
	case res.Fights > 0:
		fmt.Fprintf(w, "%d fights between the master (%s) and the operator (MinionTemplate %s)\n", res.Fights, strings.Join(res.Files, ", "), res.Template)
	default:
		fmt.Fprintf(w, "no fight between the master (%s) and the operator (MinionTemplate %s)\n", strings.Join(res.Files, ", "), res.Template)
	}
}

// checkMasterOnline reads the roles as the master would and asks what the
// master's token may do.
func checkMasterOnline(ctx context.Context, o masterCheckOptions, m *mastercheck.Master, t *mastercheck.Template, minions []string) ([]mastercheck.Finding, error) {
	cfg := vaultapi.DefaultConfig()
	cfg.Address = o.vaultAddr
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	v := &masterCheckVault{c: c, accessor: o.masterAccessor}
	if o.masterTokenFile != "" {
		tok, err := os.ReadFile(o.masterTokenFile)
		if err != nil {
			return nil, err
		}
		v.token = strings.TrimSpace(string(tok))
	}
	var findings []mastercheck.Finding
	rights := mastercheck.Rights{}
	if v.accessor != "" || v.token != "" {
		sample := "minion"
		if len(minions) > 0 {
			sample = minions[0]
		}
		var fs []mastercheck.Finding
		if rights, fs, err = mastercheck.CheckRights(ctx, v, t.Mount, sample); err != nil {
			return nil, err
		}
		findings = append(findings, fs...)
	}
	fs, err := m.CheckRoles(ctx, v, t, minions, rights)
	return append(findings, fs...), err
}

// masterCheckVault reads with the checking token and asks about the
// master's.
type masterCheckVault struct {
	c        *vaultapi.Client
	accessor string
	token    string
}

func (v *masterCheckVault) ReadRole(ctx context.Context, mount, name string) (map[string]any, error) {
	s, err := v.c.Logical().ReadWithContext(ctx, "auth/"+mount+"/role/"+name)
	if err != nil || s == nil {
		return nil, err
	}
	return s.Data, nil
}

func (v *masterCheckVault) MasterCapabilities(ctx context.Context, path string) ([]string, error) {
	if v.accessor != "" {
		return v.c.Sys().CapabilitiesAccessorWithContext(ctx, v.accessor, path)
	}
	return v.c.Sys().CapabilitiesWithContext(ctx, v.token, path)
}
