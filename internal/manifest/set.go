package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Set is what a set of manifest files holds: what `minionvault
// plan`, `master check` and `audit` read.
type Set struct {
	Templates   []Template                // by name
	Bindings    []*v1alpha1.MinionBinding // by namespace/name
	Connections map[string]*v1alpha1.VaultConnection
	Namespaces  map[string]map[string]string // name -> labels
	ConfigMaps  convert.ConfigMapData
}

// Template is the MinionTemplate of that name among the manifests (nil:
// none).
func (s *Set) Template(name string) *Template {
	for i := range s.Templates {
		if s.Templates[i].Obj.Name == name {
			return &s.Templates[i]
		}
	}
	return nil
}

// Template is a MinionTemplate with its document, whose key order the
// metadata keeps (convert.Template).
type Template struct {
	Obj *v1alpha1.MinionTemplate
	Doc Document
}

// Cache parses each distinct file content once: audit diff reads
// the same bindings on both sides, side by side. A nil cache parses every
// time. The documents are
// immutable once parsed; each side decodes its own objects from them.
type Cache struct {
	// readers is how many reads of a content there will be at most: the
	// cache lets go of it after the last.
	readers int
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*manifestEntry
	// converted: *v1alpha1.MinionBinding to *convertedBinding.
	converted sync.Map
}

type manifestEntry struct {
	once  sync.Once
	docs  []parsedDoc
	err   error
	reads int
}

// parsedDoc is a document with what every reader decodes from it first:
// its metadata, and for a MinionBinding the object (errors are kept to be
// returned where the reader reaches the document). A binding decoded once
// is shared by the readers and never changed.
type parsedDoc struct {
	Document
	meta    docMeta
	metaErr error
	binding *v1alpha1.MinionBinding
	decErr  error
}

type docMeta struct {
	Name, Namespace string
	Labels          map[string]string
}

// parseManifest parses data (the file's contents). A large file is parsed
// in pieces side by side, cut at document markers ("---" lines: YAML
// documents share no anchors); should a piece fail, the whole file is
// parsed again in one go, for the error as it stands.
func parseManifest(data []byte) ([]parsedDoc, error) {
	pieces := splitDocuments(data, runtime.GOMAXPROCS(0))
	if len(pieces) <= 1 {
		return parseManifestPiece(data)
	}
	outs := make([][]parsedDoc, len(pieces))
	errs := make([]error, len(pieces))
	var wg sync.WaitGroup
	for i, p := range pieces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = parseManifestPiece(p)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return parseManifestPiece(data)
		}
	}
	var out []parsedDoc
	for _, o := range outs {
		out = append(out, o...)
	}
	return out, nil
}

// splitDocuments cuts data into up to n pieces of whole documents, at lines
// "---" (or "--- ..."); nothing is cut in a small file or one with
// directives ("%YAML", "%TAG": they belong to the document after them).
func splitDocuments(data []byte, n int) [][]byte {
	const minPiece = 256 << 10
	if n <= 1 || len(data) < 2*minPiece || bytes.HasPrefix(data, []byte("%")) || bytes.Contains(data, []byte("\n%")) {
		return [][]byte{data}
	}
	if m := len(data) / minPiece; m < n {
		n = m
	}
	var pieces [][]byte
	start := 0
	for k := 1; k < n; k++ {
		at := start + (len(data)-start)/(n-k+1)
		cut := -1
		for i := at; i < len(data); {
			j := bytes.Index(data[i:], []byte("\n---"))
			if j < 0 {
				break
			}
			pos := i + j + 1 // the line's start
			if rest := data[pos+3:]; len(rest) == 0 || rest[0] == '\n' || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r' {
				cut = pos
				break
			}
			i = pos + 3
		}
		if cut < 0 {
			break
		}
		pieces = append(pieces, data[start:cut])
		start = cut
	}
	return append(pieces, data[start:])
}

// parseManifestPiece parses data in one go, a document at a time: of a
// binding only the object is kept.
func parseManifestPiece(data []byte) ([]parsedDoc, error) {
	var out []parsedDoc
	err := Each(data, func(d Document) error {
		pd := parsedDoc{Document: d}
		if d.Kind == "MinionBinding" {
			// Decoded strictly, a binding has the metadata the lenient
			// decoding below would find: one conversion to JSON, not two.
			b := &v1alpha1.MinionBinding{}
			if pd.decErr = d.Decode(b); pd.decErr == nil {
				pd.meta = docMeta{Name: b.Name, Namespace: b.Namespace, Labels: b.Labels}
				if b.Namespace == "" {
					b.Namespace = "default"
				}
				pd.binding = b
				// The object is all a reader takes of a binding: the
				// data is let go (10,000 bindings are megabytes).
				pd.Value = value.Value{}
				out = append(out, pd)
				return nil
			}
		}
		var meta struct{ Metadata docMeta }
		if pd.metaErr = json.Unmarshal(d.Value.AppendJSON(nil), &meta); pd.metaErr == nil {
			pd.meta = meta.Metadata
		}
		out = append(out, pd)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// convertedBinding is convert.Binding of a shared MinionBinding, once.
type convertedBinding struct {
	once  sync.Once
	rb    render.Binding
	err   error
	reads atomic.Int32
}

// Binding is convert.Binding(&b.Spec), once per binding shared by the
// readers (the values are immutable); the cache lets go of it after the
// last reader.
func (c *Cache) Binding(b *v1alpha1.MinionBinding) (render.Binding, error) {
	if c == nil {
		return convert.Binding(&b.Spec)
	}
	v, _ := c.converted.LoadOrStore(b, &convertedBinding{})
	cb := v.(*convertedBinding)
	cb.once.Do(func() { cb.rb, cb.err = convert.Binding(&b.Spec) })
	if int(cb.reads.Add(1)) >= c.readers {
		c.converted.Delete(b)
	}
	return cb.rb, cb.err
}

// NewCache is a cache for readers reads of each content.
func NewCache(readers int) *Cache {
	return &Cache{readers: readers, entries: map[[sha256.Size]byte]*manifestEntry{}}
}

// read is ReadFile, parsing a content seen before only once (a
// nil cache parses every time).
func (c *Cache) read(file string) ([]parsedDoc, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if c == nil {
		docs, err := parseManifest(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return docs, nil
	}
	key := sha256.Sum256(data)
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		e = &manifestEntry{}
		c.entries[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.docs, e.err = parseManifest(data) })
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

// ReadSet reads every manifest of the files and folders in paths,
// parsed through cache (nil: no cache).
func ReadSet(paths []string, cache *Cache) (*Set, error) {
	in := &Set{Connections: map[string]*v1alpha1.VaultConnection{}, Namespaces: map[string]map[string]string{}}
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
		for _, pd := range docs {
			d := pd.Document
			if pd.metaErr != nil {
				return nil, fmt.Errorf("%s: %w", file, pd.metaErr)
			}
			m := pd.meta
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
				in.Templates = append(in.Templates, Template{Obj: t, Doc: d})
			case "MinionBinding":
				if pd.decErr != nil {
					return nil, fmt.Errorf("%s: %w", file, pd.decErr)
				}
				in.Bindings = append(in.Bindings, pd.binding)
			case "VaultConnection":
				c := &v1alpha1.VaultConnection{}
				if err := d.Decode(c); err != nil {
					return nil, fmt.Errorf("%s: %w", file, err)
				}
				in.Connections[c.Name] = c
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
				in.Namespaces[m.Name] = lbls
			}
		}
	}
	slices.SortFunc(in.Templates, func(a, b Template) int { return strings.Compare(a.Obj.Name, b.Obj.Name) })
	slices.SortFunc(in.Bindings, func(a, b *v1alpha1.MinionBinding) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	in.ConfigMaps = func(ns, name string) (map[string]string, error) {
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
