package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
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
	configMaps, err := readConfigMaps(o.configMaps)
	if err != nil {
		return err
	}
	res, violations, err := renderDocuments(o, tdoc, bdoc, configMaps)
	if err != nil {
		return err
	}
	out := resultValue(res, violations)
	if err := write(stdout, out, o.output); err != nil {
		return err
	}
	if o.strict && len(violations) > 0 {
		return exitError{1}
	}
	return nil
}

// renderDocuments is render without files: decode, convert, compile,
// render, validate (FuzzRender drives it with arbitrary manifests).
func renderDocuments(o renderOptions, tdoc, bdoc manifest.Document, configMaps convert.ConfigMapData) (*render.Result, []render.Violation, error) {
	var mt v1alpha1.MinionTemplate
	if err := tdoc.Decode(&mt); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.template, err)
	}
	var mb v1alpha1.MinionBinding
	if err := bdoc.Decode(&mb); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.binding, err)
	}
	rt, err := convert.Template(mt.Name, &mt.Spec, configMaps, tdoc.MetadataOrder())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.template, err)
	}
	rb, err := convert.Binding(&mb.Spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.binding, err)
	}
	c := render.Compile(rt)
	res, err := c.Render(rb, render.Options{JID: o.jid, User: o.user})
	if err != nil {
		return nil, nil, err
	}
	violations := c.Validate(res)
	if ref := mb.Spec.TemplateRef.Name; ref != mt.Name {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the binding refers to template %q, rendered with %q", ref, mt.Name))
	}
	return res, violations, nil
}

func readConfigMaps(paths []string) (convert.ConfigMapData, error) {
	type key struct{ ns, name string }
	maps := map[key]map[string]string{}
	for _, p := range paths {
		docs, err := manifest.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if d.Kind != "ConfigMap" {
				continue
			}
			var cm struct {
				Metadata struct{ Name, Namespace string }
				Data     map[string]string
			}
			if err := json.Unmarshal(d.Value.AppendJSON(nil), &cm); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			maps[key{cm.Metadata.Namespace, cm.Metadata.Name}] = cm.Data
		}
	}
	return func(ns, name string) (map[string]string, error) {
		if data, ok := maps[key{ns, name}]; ok {
			return data, nil
		}
		return nil, fmt.Errorf("not found among --configmap files")
	}, nil
}

// resultValue is the output object, in the documented key order.
func resultValue(r *render.Result, violations []render.Violation) value.Value {
	docs := make([]value.Value, 0, len(r.PolicyDocuments))
	for _, d := range r.PolicyDocuments {
		docs = append(docs, value.NewStringMap("name", d.Name, "hcl", d.HCL))
	}
	params := make([]value.Pair, 0, len(r.AppRole.Params))
	for _, p := range r.AppRole.Params {
		params = append(params, value.Pair{Key: value.NewString(p.Name), Val: goValue(p.Value)})
	}
	vs := make([]value.Value, 0, len(violations))
	for _, v := range violations {
		vs = append(vs, value.NewString(v.String()))
	}
	return value.NewMap([]value.Pair{
		pair("minion", value.NewString(r.Minion)),
		pair("policies", stringList(r.Policies)),
		pair("metadata", value.NewMap([]value.Pair{
			pair("entity", kvs(r.EntityMetadata)),
			pair("secret", kvs(r.SecretMetadata)),
		})),
		pair("pillarPaths", stringList(r.PillarPaths)),
		pair("mapdata", r.Mapdata),
		pair("policyDocuments", value.NewList(docs)),
		pair("entityName", value.NewString(r.EntityName)),
		pair("appRole", value.NewMap([]value.Pair{
			pair("mount", value.NewString(r.AppRole.Mount)),
			pair("name", value.NewString(r.AppRole.RoleName)),
			pair("params", value.NewMap(params)),
		})),
		pair("violations", value.NewList(vs)),
		pair("warnings", stringList(r.Warnings)),
	})
}

func pair(k string, v value.Value) value.Pair { return value.Pair{Key: value.NewString(k), Val: v} }

func stringList(ss []string) value.Value {
	items := make([]value.Value, len(ss))
	for i, s := range ss {
		items[i] = value.NewString(s)
	}
	return value.NewList(items)
}

func kvs(kvs []template.KV) value.Value {
	pairs := make([]value.Pair, len(kvs))
	for i, kv := range kvs {
		pairs[i] = pair(kv.Key, value.NewString(kv.Value))
	}
	return value.NewMap(pairs)
}

func goValue(v any) value.Value {
	switch x := v.(type) {
	case bool:
		return value.NewBool(x)
	case int64:
		return value.NewInt(x)
	case string:
		return value.NewString(x)
	case []string:
		return stringList(x)
	}
	return value.NewString(fmt.Sprint(v))
}

func write(w io.Writer, v value.Value, format string) error {
	if format == "yaml" {
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(v.ToYAMLNode()); err != nil {
			return err
		}
		return enc.Close()
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, v.AppendJSON(nil), "", "  "); err != nil {
		// NaN and infinities are not JSON; print them as Python's json does.
		buf.Reset()
		buf.Write(v.AppendJSON(nil))
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
