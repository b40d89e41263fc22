package cli

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// What plan reads: the manifests, and how to reach Vault.

// readPlanInput reads every manifest of the files and folders.
func readPlanInput(paths []string) (*planInput, error) {
	return readPlanInputCached(paths, nil)
}

// manifestCache parses each distinct file content once: audit diff reads
// the same bindings on both sides, side by side. The documents are
// immutable once parsed; each side decodes its own objects from them.
type manifestCache struct {
	// readers is how many reads of a content there will be at most: the
	// cache lets go of it after the last.
	readers int
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*manifestEntry
}

type manifestEntry struct {
	once  sync.Once
	docs  []manifest.Document
	err   error
	reads int
}

func newManifestCache(readers int) *manifestCache {
	return &manifestCache{readers: readers, entries: map[[sha256.Size]byte]*manifestEntry{}}
}

// read is manifest.ReadFile, parsing a content seen before only once (a
// nil cache parses every time).
func (c *manifestCache) read(file string) ([]manifest.Document, error) {
	if c == nil {
		return manifest.ReadFile(file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256(data)
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		e = &manifestEntry{}
		c.entries[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.docs, e.err = manifest.Parse(data) })
	c.mu.Lock()
	if e.reads++; e.reads >= c.readers {
		delete(c.entries, key)
	}
	c.mu.Unlock()
	if e.err != nil {
		return nil, fmt.Errorf("%s: %w", file, e.err)
	}
	return e.docs, nil
}

// readPlanInputCached is readPlanInput with the files parsed through cache.
func readPlanInputCached(paths []string, cache *manifestCache) (*planInput, error) {
	in := &planInput{connections: map[string]*v1alpha1.VaultConnection{}, namespaces: map[string]map[string]string{}}
	type cmKey struct{ ns, name string }
	cms := map[cmKey]map[string]string{}
	files, err := manifestFiles(paths)
	if err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for _, file := range files {
		docs, err := cache.read(file)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			var meta struct {
				Metadata struct {
					Name, Namespace string
					Labels          map[string]string
				}
			}
			if err := json.Unmarshal(d.Value.AppendJSON(nil), &meta); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			m := meta.Metadata
			id := d.Kind + " " + m.Namespace + "/" + m.Name
			switch d.Kind {
			case "MinionTemplate", "MinionBinding", "VaultConnection", "ConfigMap", "Namespace":
				if prev, dup := seen[id]; dup {
					return nil, fmt.Errorf("%s: %s is also in %s", file, id, prev)
				}
				seen[id] = file
			}
			switch d.Kind {
			case "MinionTemplate":
				t := &v1alpha1.MinionTemplate{}
				if err := d.Decode(t); err != nil {
					return nil, fmt.Errorf("%s: %w", file, err)
				}
				in.templates = append(in.templates, templateDoc{obj: t, doc: d})
			case "MinionBinding":
				b := &v1alpha1.MinionBinding{}
				if err := d.Decode(b); err != nil {
					return nil, fmt.Errorf("%s: %w", file, err)
				}
				if b.Namespace == "" {
					b.Namespace = "default"
				}
				in.bindings = append(in.bindings, b)
			case "VaultConnection":
				c := &v1alpha1.VaultConnection{}
				if err := d.Decode(c); err != nil {
					return nil, fmt.Errorf("%s: %w", file, err)
				}
				in.connections[c.Name] = c
			case "ConfigMap":
				var cm struct{ Data map[string]string }
				if err := json.Unmarshal(d.Value.AppendJSON(nil), &cm); err != nil {
					return nil, fmt.Errorf("%s: %w", file, err)
				}
				cms[cmKey{m.Namespace, m.Name}] = cm.Data
			case "Namespace":
				lbls := map[string]string{"kubernetes.io/metadata.name": m.Name}
				for k, v := range m.Labels {
					lbls[k] = v
				}
				in.namespaces[m.Name] = lbls
			}
		}
	}
	slices.SortFunc(in.templates, func(a, b templateDoc) int { return strings.Compare(a.obj.Name, b.obj.Name) })
	slices.SortFunc(in.bindings, func(a, b *v1alpha1.MinionBinding) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	in.configMaps = func(ns, name string) (map[string]string, error) {
		if data, ok := cms[cmKey{ns, name}]; ok {
			return data, nil
		}
		return nil, errors.New("ConfigMap not among the manifests")
	}
	return in, nil
}

// manifestFiles expands folders (not recursively) into their YAML and
// JSON files, skipping kustomization files.
func manifestFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			name := e.Name()
			ext := filepath.Ext(name)
			if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") || strings.HasPrefix(name, "kustomization.") {
				continue
			}
			out = append(out, filepath.Join(p, name))
		}
	}
	return out, nil
}

// planVaultConfig is the VaultConnection of the first template (when it is
// among the manifests), overridden by flags and the usual VAULT_*
// variables, with the credentials from flags or the environment.
func planVaultConfig(o planOptions, in *planInput) (vault.Config, error) {
	cfg := vault.Config{Timeout: 30 * time.Second}
	if conn, ok := in.connections[in.templates[0].obj.Spec.ConnectionRef.Name]; ok {
		cfg.Address, cfg.Namespace = conn.Spec.Address, conn.Spec.Namespace
		if t := conn.Spec.TLS; t != nil {
			cfg.ServerName, cfg.InsecureSkipVerify = t.ServerName, t.InsecureSkipVerify
		}
		if conn.Spec.Timeout != nil {
			cfg.Timeout = conn.Spec.Timeout.Duration
		}
	}
	override := func(dst *string, flag, env string) {
		if flag != "" {
			*dst = flag
		} else if v := os.Getenv(env); v != "" && *dst == "" {
			*dst = v
		}
	}
	override(&cfg.Address, o.address, "VAULT_ADDR")
	override(&cfg.Namespace, o.namespace, "VAULT_NAMESPACE")
	if o.serverName != "" {
		cfg.ServerName = o.serverName
	}
	cfg.InsecureSkipVerify = cfg.InsecureSkipVerify || o.skipVerify
	if cfg.Address == "" {
		return cfg, errors.New("no Vault address: set --address or VAULT_ADDR, or include the templates' VaultConnection")
	}
	caFile := o.caCert
	if caFile == "" {
		caFile = os.Getenv("VAULT_CACERT")
	}
	if caFile != "" {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return cfg, err
		}
		cfg.CACert = ca
	}
	secretFile := func(file, env string) (string, error) {
		if file == "" {
			return os.Getenv(env), nil
		}
		b, err := os.ReadFile(file)
		return strings.TrimSpace(string(b)), err
	}
	if o.roleID != "" {
		sid, err := secretFile(o.secretIDFile, "VAULT_SECRET_ID")
		if err != nil {
			return cfg, err
		}
		cfg.Auth.AppRole = &vault.AppRoleAuth{Mount: o.appRoleMount, RoleID: o.roleID, SecretID: sid}
		return cfg, nil
	}
	if o.k8sRole != "" {
		jwtFile := o.jwtFile
		cfg.Auth.Kubernetes = &vault.KubernetesAuth{Mount: o.k8sMount, Role: o.k8sRole, JWT: func(context.Context) (string, error) {
			b, err := os.ReadFile(jwtFile)
			return strings.TrimSpace(string(b)), err
		}}
		return cfg, nil
	}
	tok, err := secretFile(o.tokenFile, "VAULT_TOKEN")
	if err != nil {
		return cfg, err
	}
	if tok == "" {
		return cfg, errors.New("no Vault credentials: set VAULT_TOKEN or --token-file, --role-id with --secret-id-file, or --kubernetes-role")
	}
	cfg.Auth.Token = tok
	return cfg, nil
}
