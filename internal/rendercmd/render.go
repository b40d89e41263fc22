// Package rendercmd is `minionvault render`'s core: one binding rendered
// with its template from manifests alone, with no cluster and no Vault,
// and its printed form for review (Render, Output, Write).
//
// It is kept apart from the CLI's commands so that what fuzzing compiles
// with coverage instrumentation is the render path alone, not the client
// libraries the other commands link (deps_test.go).
package rendercmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Options names the manifests in errors and fills {jid} and {user}.
type Options struct {
	Template, Binding string
	JID, User         string
}

// Render decodes, converts, compiles, renders and validates (FuzzRender
// drives it with arbitrary manifests).
func Render(o Options, tdoc, bdoc manifest.Document, configMaps convert.ConfigMapData) (*render.Result, []render.Violation, error) {
	var mt v1alpha1.MinionTemplate
	if err := tdoc.Decode(&mt); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.Template, err)
	}
	var mb v1alpha1.MinionBinding
	if err := bdoc.Decode(&mb); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.Binding, err)
	}
	rt, err := convert.Template(mt.Name, &mt.Spec, configMaps, tdoc.MetadataOrder())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.Template, err)
	}
	rb, err := convert.Binding(&mb.Spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.Binding, err)
	}
	c := render.Compile(rt)
	res, err := c.Render(rb, render.Options{JID: o.JID, User: o.User})
	if err != nil {
		return nil, nil, err
	}
	violations := c.Validate(res)
	if ref := mb.Spec.TemplateRef.Name; ref != mt.Name {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the binding refers to template %q, rendered with %q", ref, mt.Name))
	}
	return res, violations, nil
}

// ReadConfigMaps reads the ConfigMaps of manifest files, for the
// templates' parameter files.
func ReadConfigMaps(paths []string) (convert.ConfigMapData, error) {
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

// Output is the printed object, in the documented key order.
func Output(r *render.Result, violations []render.Violation) value.Value {
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

// Write prints v as json or yaml.
func Write(w io.Writer, v value.Value, format string) error {
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
