package audit

import (
	"maps"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// DriftReport is the output of audit drift: per minion, what it can do in
// Vault now that the manifests do not give it (extra), and what the
// manifests give it that it cannot do in Vault (missing).
type DriftReport struct {
	Summary  DriftSummary  `json:"summary"`
	Minions  []MinionDrift `json:"minions"`
	Verify   *VerifyReport `json:"verify,omitempty"`
	Warnings []string      `json:"warnings,omitempty"`
	Vault    VaultRules    `json:"vault"`
}

// DriftSummary counts the minions with extra and with missing access.
type DriftSummary struct {
	Minions int `json:"minions"`
	Extra   int `json:"extra"`
	Missing int `json:"missing"`
	Paths   int `json:"paths"`
}

// MinionDrift is one minion's drift.
type MinionDrift struct {
	Minion  string `json:"minion"`
	Role    string `json:"role"`
	Binding string `json:"binding,omitempty"`
	// Status: "not in Vault" (a binding whose role the mount lacks), "not
	// in the manifests" (a role no binding renders).
	Status  string      `json:"status,omitempty"`
	Changes []PathDrift `json:"changes"`
}

// PathDrift is one path whose answer in Vault is not the manifests'.
type PathDrift struct {
	Path      string   `json:"path"`
	Manifests []string `json:"manifests"`
	Vault     []string `json:"vault"`
	Extra     []string `json:"extra,omitempty"`
	Missing   []string `json:"missing,omitempty"`
	// Why: the Vault side's deciding policies, pattern and step, for extra
	// access.
	Why string `json:"why,omitempty"`
}

// alignWithVault gives each minion of the manifests what only Vault
// chooses, from its role in Vault: the entity ID, the alias name (the role
// ID) and ID, and the operator's own metadata keys (the owner marker), so
// that they differ only by what the manifests decide.
func alignWithVault(offline, online *Fleet) {
	for _, m := range offline.minions {
		o := online.byID[strings.ToLower(m.role)]
		if o == nil || m.subject.Entity == nil {
			continue
		}
		e := *m.subject.Entity
		e.Metadata = maps.Clone(e.Metadata)
		if o.live != nil {
			e.ID = o.live.ID
			for k, v := range o.live.Metadata {
				if strings.HasPrefix(k, ownership.ReservedKeyPrefix) {
					e.Metadata[k] = v
				}
			}
		}
		if len(e.Aliases) > 0 {
			al := e.Aliases[0]
			al.Name = o.roleID
			if o.live != nil {
				for _, a := range o.live.Aliases {
					if a.Name == o.roleID && a.MountAccessor == online.accessor {
						al.ID = a.ID
					}
				}
			}
			e.Aliases = append([]acl.Alias{al}, e.Aliases[1:]...)
		}
		m.subject.Entity = &e
		m.metadata = e.Metadata
		m.prep = offline.ev.Prepare(m.subject)
	}
}

// byRole is the fleet keyed by role name, each minion named by its role,
// as Diff pairs minions by name.
func byRole(f *Fleet) *Fleet {
	out := &Fleet{byID: map[string]*Minion{}, docs: f.docs, ev: f.ev}
	for _, m := range f.minions {
		c := *m
		c.id = m.role
		out.minions = append(out.minions, &c)
		out.byID[strings.ToLower(m.role)] = &c
	}
	return out
}

// Drift compares the manifests' fleet (LoadForDrift) with Vault's
// (LoadOnline), minion by role.
func Drift(offline, online *Fleet, extra []string) DriftReport {
	alignWithVault(offline, online)
	d := Diff(byRole(offline), online, extra)
	r := DriftReport{Minions: []MinionDrift{}, Vault: online.Rules(), Summary: DriftSummary{Minions: d.Summary.Minions, Extra: d.Summary.Gaining, Missing: d.Summary.Losing, Paths: d.Summary.Paths}}
	for _, w := range offline.warnings {
		r.Warnings = append(r.Warnings, "manifests: "+w)
	}
	for _, w := range online.warnings {
		r.Warnings = append(r.Warnings, "vault: "+w)
	}
	roles := map[string]*Minion{}
	for _, m := range offline.minions {
		roles[strings.ToLower(m.role)] = m
	}
	for _, md := range d.Minions {
		x := MinionDrift{Minion: md.Minion, Role: md.Role, Changes: []PathDrift{}}
		if m := roles[strings.ToLower(md.Role)]; m != nil {
			x.Minion, x.Binding = m.id, m.binding
		}
		switch md.Status {
		case "added":
			x.Status = "not in the manifests"
		case "removed":
			x.Status = "not in Vault"
		}
		for _, c := range md.Changes {
			x.Changes = append(x.Changes, PathDrift{Path: c.Path, Manifests: c.Base, Vault: c.Head, Extra: c.Gained, Missing: c.Lost, Why: c.Why})
		}
		r.Minions = append(r.Minions, x)
	}
	return r
}
