package mastercheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// Template is what the check needs of a MinionTemplate: where its roles
// are, and how Vault answers a read of a role the operator wrote.
type Template struct {
	Name         string
	Mount        string
	BindSecretID bool
	// Role is a role of the template as Vault 1.21 answers its read
	// (token_policies aside, which saltext does not compare): what the
	// master compares its issue parameters with, offline.
	Role map[string]any
}

// FromTemplate reads a MinionTemplate's AppRole settings.
func FromTemplate(tpl *v1alpha1.MinionTemplate) (*Template, error) {
	rt, err := convert.Template(tpl.Name, &tpl.Spec, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", tpl.Name, err)
	}
	c := render.Compile(rt)
	for _, p := range c.Problems() {
		if p.Field == "appRole" {
			return nil, fmt.Errorf("template %s: appRole: %s", tpl.Name, p.Message)
		}
	}
	t := &Template{Name: tpl.Name, Mount: rt.AppRole.Mount, BindSecretID: true, Role: roleDefaults()}
	if t.Mount == "" {
		t.Mount = render.DefaultAppRoleMount
	}
	for _, p := range c.AppRoleParams() {
		switch v := p.Value.(type) {
		case bool:
			if p.Name == "bind_secret_id" {
				t.BindSecretID = v
			}
			t.Role[p.Name] = v
		case int64:
			t.Role[p.Name] = v
		case []string:
			list := make([]any, len(v))
			for i, s := range v {
				// Vault keeps secret_id_bound_cidrs as written and answers
				// token_bound_cidrs in go-sockaddr's notation.
				if p.Name == "token_bound_cidrs" {
					s = vault.CanonicalCIDR(s)
				}
				list[i] = s
			}
			t.Role[p.Name] = list
		default:
			t.Role[p.Name] = v
		}
	}
	return t, nil
}

// roleDefaults is a role read of Vault 1.21 for what the operator does
// not set.
func roleDefaults() map[string]any { return normalizeRead(vault.RoleDefaults()) }

// templatesOn are the templates whose roles are on mount, by name.
func templatesOn(ts []*Template, mount string) []*Template {
	var out []*Template
	for _, t := range ts {
		if t.Mount == mount {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *Template) int { return strings.Compare(a.Name, b.Name) })
	return out
}
