// Package mastercheck tells what a Salt master running saltext-vault
// would do to the Vault objects the operator owns, from the master's
// configuration and the manifests (and, optionally, Vault as the master
// reads it), and writes the master's side of running beside the operator:
// its issue-only configuration and Vault policy. The saltext logic it
// relies on is internal/saltext's port.
package mastercheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/minionvault/minion-vault-operator/internal/importer"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Master is what the check reads of a master's configuration: its vault:
// and peer_run: keys, merged as Salt merges master.d files.
type Master struct {
	// Files are the configuration files read, in order.
	Files []string
	// Vault is the vault: mapping (null when the files have none).
	Vault value.Value
	// PeerRun is the peer_run: mapping (null when not configured).
	PeerRun value.Value
}

// ReadFiles reads each path: a file, or a folder. A folder holding a
// "master" file is a Salt configuration folder (master, then
// master.d/*.conf); any other folder is a master.d (its *.conf files).
// Files are read in the order Salt reads them: the names sorted.
func ReadFiles(paths []string) ([]importer.File, error) {
	var names []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			names = append(names, p)
			continue
		}
		dropins := p
		if _, err := os.Stat(filepath.Join(p, "master")); err == nil {
			names = append(names, filepath.Join(p, "master"))
			dropins = filepath.Join(p, "master.d")
		}
		confs, err := filepath.Glob(filepath.Join(dropins, "*.conf"))
		if err != nil {
			return nil, err
		}
		slices.Sort(confs)
		names = append(names, confs...)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no master configuration found in %v", paths)
	}
	files := make([]importer.File, 0, len(names))
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		files = append(files, importer.File{Name: n, Data: data})
	}
	return files, nil
}

// Parse merges the configuration files as Salt does and keeps the keys
// the check reads.
func Parse(files ...importer.File) (*Master, error) {
	merged, err := importer.MergeFiles(files...)
	if err != nil {
		return nil, err
	}
	m := &Master{}
	for _, f := range files {
		m.Files = append(m.Files, f.Name)
	}
	m.Vault, _ = merged.GetString("vault")
	m.PeerRun, _ = merged.GetString("peer_run")
	if !m.Vault.IsNull() && !m.Vault.IsMap() {
		return nil, fmt.Errorf("vault: is a %s, not a mapping", m.Vault.Kind().PyType())
	}
	if !m.PeerRun.IsNull() && !m.PeerRun.IsMap() {
		return nil, fmt.Errorf("peer_run: is a %s, not a mapping", m.PeerRun.Kind().PyType())
	}
	return m, nil
}
