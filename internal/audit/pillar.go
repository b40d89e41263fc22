package audit

import (
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// PillarReport is the output of audit pillar: each predicted pillar path
// its minion's token cannot read.
type PillarReport struct {
	Minions    int                `json:"minions"`
	Paths      int                `json:"paths"`
	Unreadable []UnreadablePillar `json:"unreadable"`
	Warnings   []string           `json:"warnings,omitempty"`
	Vault      VaultRules         `json:"vault"`
}

// UnreadablePillar is a pillar path the Salt master's ext_pillar reads as
// the minion and Vault would refuse.
type UnreadablePillar struct {
	// Pillar is the path as the template predicts it (status.pillarPaths),
	// Path the one Vault is asked for (KV v2: data/ after the mount).
	Pillar string `json:"pillar"`
	Path   string `json:"path"`
	MinionAccess
}

// pillarReadPath is the path saltext's ext_pillar reads for a pillar path.
// The mount is the longest --kv mount the path is under, else its first
// segment (kv.py asks sys/internal/ui/mounts, which offline we cannot).
// On a KV v2 mount _v2_the_path (kv.py:360-385, ported as v2ThePath in
// internal/testing/saltmaster) leaves "mount/data/..." as it is, turns
// "mount/metadata/..." into "mount/data/...", and inserts "data/" after the
// mount otherwise.
func pillarReadPath(pillar string, versions map[string]int) string {
	p := strings.Trim(pillar, "/")
	mount, _, _ := strings.Cut(p, "/")
	for m := range versions {
		if (p == m || strings.HasPrefix(p, m+"/")) && len(m) > len(mount) {
			mount = m
		}
	}
	if v, ok := versions[mount]; ok && v == 1 {
		return p
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(p, mount), "/")
	under := func(seg string) bool { return rest == seg || strings.HasPrefix(rest, seg+"/") }
	switch {
	case under("data"):
		return p
	case under("metadata"):
		return mount + "/data" + strings.TrimPrefix(rest, "metadata")
	}
	return mount + "/data/" + rest
}

// Pillar checks every minion's predicted pillar paths, each read as
// saltext's ext_pillar reads it (versions: the KV version of a mount,
// 2 unless said), against the minion's own token.
func Pillar(f *Fleet, versions map[string]int) PillarReport {
	r := PillarReport{Minions: len(f.minions), Unreadable: []UnreadablePillar{}, Warnings: f.warnings, Vault: f.Rules()}
	for _, m := range f.minions {
		for _, p := range m.pillarPaths {
			r.Paths++
			path := pillarReadPath(p, versions)
			if d := m.prep.Check(path); d.Err == nil && (d.Root || d.Caps.Allows(acl.Read)) {
				continue
			}
			r.Unreadable = append(r.Unreadable, UnreadablePillar{Pillar: p, Path: path, MinionAccess: access(m, path)})
		}
	}
	return r
}
