package importer

import (
	"errors"
	"fmt"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Rendered is one binding of an imported stream, rendered as
// `minionvault render` renders it.
type Rendered struct {
	MinionID   string
	Binding    string
	Result     *render.Result // nil when Err is set
	Violations []render.Violation
	Err        error
}

// Check reads a YAML stream written by WriteYAML back the way `minionvault
// render` reads manifests (internal/manifest, internal/convert, pkg/render:
// key order and int/float kept) and renders every MinionBinding with the
// stream's MinionTemplate.
func Check(stream []byte) ([]Rendered, error) {
	docs, err := manifest.Parse(stream)
	if err != nil {
		return nil, err
	}
	var tdoc *manifest.Document
	for i := range docs {
		if docs[i].Kind == "MinionTemplate" {
			if tdoc != nil {
				return nil, errors.New("more than one MinionTemplate")
			}
			tdoc = &docs[i]
		}
	}
	if tdoc == nil {
		return nil, errors.New("no MinionTemplate")
	}
	var mt v1alpha1.MinionTemplate
	if err := tdoc.Decode(&mt); err != nil {
		return nil, err
	}
	rt, err := convert.Template(mt.Name, &mt.Spec, nil, tdoc.MetadataOrder())
	if err != nil {
		return nil, fmt.Errorf("MinionTemplate %s: %w", mt.Name, err)
	}
	c := render.Compile(rt)
	var out []Rendered
	for _, d := range docs {
		if d.Kind != "MinionBinding" {
			continue
		}
		var mb v1alpha1.MinionBinding
		if err := d.Decode(&mb); err != nil {
			return nil, err
		}
		r := Rendered{MinionID: mb.Spec.MinionID, Binding: mb.Name}
		rb, err := convert.Binding(&mb.Spec)
		if err == nil {
			r.Result, err = c.Render(rb, render.Options{})
		}
		if err != nil {
			r.Err = err
		} else {
			r.Violations = c.Validate(r.Result)
		}
		out = append(out, r)
	}
	return out, nil
}

// Problems turns render failures and guard-rail violations into warnings,
// one per distinct problem with the minions that have it.
func Problems(rs []Rendered) []string {
	var order []string
	minions := map[string][]string{}
	add := func(problem, id string) {
		if _, ok := minions[problem]; !ok {
			order = append(order, problem)
		}
		minions[problem] = append(minions[problem], id)
	}
	for _, r := range rs {
		if r.Err != nil {
			add("the operator cannot render it: "+r.Err.Error(), r.MinionID)
			continue
		}
		for _, v := range r.Violations {
			add("the operator would refuse it: "+v.String(), r.MinionID)
		}
	}
	ws := make([]string, 0, len(order))
	for _, p := range order {
		ids := minions[p]
		who := fmt.Sprintf("minion %q", ids[0])
		if len(ids) > 1 {
			who = fmt.Sprintf("%d minions (%q, ...)", len(ids), ids[0])
		}
		ws = append(ws, who+": "+p)
	}
	return ws
}
