package render

import (
	"fmt"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Render renders one binding. An error means the template cannot be
// rendered at all for this minion (a malformed pattern, a parameter stack
// that fails); guard-rail problems are not errors, Validate reports them.
func (c *Compiled) Render(b Binding, opts Options) (*Result, error) {
	if c.err != nil {
		return nil, c.err
	}
	mapdata := value.NewMap(nil)
	if c.stack != nil {
		// parameters.Stack's mapdata, shared between bindings whose stacks
		// read the same things.
		stacked, err := c.stack.Mapdata(b.Grains, b.Pillar, b.Config)
		if err != nil {
			return nil, fmt.Errorf("parameter stack: %w", err)
		}
		mapdata = stacked
	}
	d := &template.Data{
		Minion: b.MinionID, Grains: b.Grains, Pillar: b.Pillar, Mapdata: mapdata,
		JID: opts.JID, User: opts.User,
	}
	out, err := c.places.Render(d)
	if err != nil {
		return nil, err
	}
	r := &Result{
		Minion:         b.MinionID,
		Policies:       out.Policies,
		EntityMetadata: out.Entity,
		SecretMetadata: out.Secret,
		PillarPaths:    out.PillarPaths,
		Mapdata:        mapdata,
		Warnings:       out.Warnings,
	}
	if id, ok := b.Grains.GetString("id"); ok {
		s := id.PyStr()
		r.grainsID = &s
	}

	names, warnings, err := template.Expand(c.entityName, d, template.PolicyVars, false)
	if err != nil {
		return nil, fmt.Errorf("entity name: %w", err)
	}
	r.Warnings = append(r.Warnings, warnings...)
	if len(names) != 1 {
		return nil, fmt.Errorf("entity name: pattern %q must render exactly one name, got %d", c.entityName, len(names))
	}
	r.EntityName = names[0]

	if err := c.renderDocuments(d, r); err != nil {
		return nil, err
	}

	mount := c.t.AppRole.Mount
	if mount == "" {
		mount = DefaultAppRoleMount
	}
	params := append(c.appRole[:len(c.appRole):len(c.appRole)], Param{"token_policies", r.Policies})
	r.AppRole = AppRolePayload{Mount: mount, RoleName: b.MinionID, Params: params}
	return r, nil
}

// Render compiles t and renders b: for one-off use such as the CLI.
func Render(t Template, b Binding, opts Options) (*Result, error) {
	return Compile(t).Render(b, opts)
}

func (c *Compiled) renderDocuments(d *template.Data, r *Result) error {
	seen := map[string]int{} // name -> index in r.PolicyDocuments
	for i, doc := range c.docs {
		results, warnings, err := template.ExpandFields(doc.joint, d, template.PolicyVars, false)
		if err != nil {
			return fmt.Errorf("policyDocuments[%d]: %w", i, err)
		}
		r.Warnings = append(r.Warnings, warnings...)
		for _, res := range results {
			parts := strings.Split(res.Text, docSep)
			if len(parts) != doc.rules+1 {
				return fmt.Errorf("policyDocuments[%d]: a substituted value contains a NUL character", i)
			}
			// Vault lowercases policy names; so does policies.assign.
			name := value.Lower(parts[0])
			for _, f := range res.Fields {
				r.docFields = append(r.docFields, docField{doc: i, name: name, value: f})
			}
			rules := c.t.PolicyDocuments[i].Rules
			rendered := doc.bodies.get(res.Text, func() string { return policyHCL(rules, parts[1:]) })
			body := rendered.hcl
			if k, ok := seen[name]; ok {
				if r.PolicyDocuments[k].HCL != body {
					r.docFields = append(r.docFields, docField{doc: i, name: name, conflict: true})
				}
				continue
			}
			if rendered.refusal != "" {
				r.docFields = append(r.docFields, docField{doc: i, name: name, refusal: rendered.refusal})
			}
			seen[name] = len(r.PolicyDocuments)
			r.PolicyDocuments = append(r.PolicyDocuments, RenderedPolicy{Name: name, HCL: body})
		}
	}
	return nil
}
