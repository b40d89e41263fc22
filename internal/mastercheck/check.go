package mastercheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Check runs the offline checks against the template the master issues
// for: the one on the master's mount (or the only one). It returns that
// template and the findings.
func (m *Master) Check(templates []*Template) (*Template, []Finding, error) {
	if len(templates) == 0 {
		return nil, nil, errors.New("no MinionTemplate in the manifests")
	}
	mount := "salt-minions"
	if v, ok := m.lookup("issue:approle:mount"); ok && v.IsString() {
		mount = strings.Trim(v.Str(), "/")
	}
	t := templates[0]
	if on := templatesOn(templates, mount); len(on) > 0 {
		t = on[0]
	}
	out := m.issueChecks(t)
	out = append(out, m.peerRunChecks()...)
	params, err := m.paramChecks(t)
	if err != nil {
		return t, out, err
	}
	return t, append(out, params...), nil
}

// paramChecks compares the master's effective issue parameters with a
// role of the template as Vault answers it, as saltext does.
func (m *Master) paramChecks(t *Template) ([]Finding, error) {
	diffs, err := m.differences(t.Role)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, d := range diffs {
		out = append(out, Finding{Severity: Fight, Key: "vault:issue:approle:params:" + d.Param,
			Problem: fmt.Sprintf("differs from the template's roles as Vault answers them (%s): the master rewrites every role it issues for (token_policies from its own rendering included) at every refresh of its 1 h role cache, and the operator writes it back at its resync", d),
			Fix:     "set it to null (neither compared nor sent)"})
	}
	compared, err := m.comparedParams()
	if err != nil {
		return nil, err
	}
	for _, p := range compared {
		if !diffs.has(p) {
			out = append(out, Finding{Severity: Note, Key: "vault:issue:approle:params:" + p,
				Problem: "is compared with every role at each refresh of the master's role cache (saltext's default counts where the configuration omits it): equal to the template's today, but a change of the template's appRole makes the master rewrite every role until its configuration changes too",
				Fix:     "set it to null"})
		}
	}
	return out, nil
}

// normalizeRead turns a role read decoded with json.Number into the types
// Template.Role holds.
func normalizeRead(role map[string]any) map[string]any {
	out := make(map[string]any, len(role))
	for k, v := range role {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				v = i
			} else if f, err := n.Float64(); err == nil {
				v = f
			}
		}
		out[k] = v
	}
	return out
}
