// Package manifest is what the CLI knows of MinionTemplate and
// MinionBinding manifests: documents read from YAML files, keeping what
// Kubernetes' own decoding loses (mapping key order, the int/float
// distinction of grains, pillar and parameter files; manifest.go); the
// manifests of files and folders read once (ReadSet, with a Cache for
// audit diff's two sides; set.go); and the admission gate's source of
// facts over them (Facts, facts.go), through which `minionvault plan` and
// `minionvault audit` admit exactly the bindings the operator would.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Document is one decoded manifest: the ordered data, and its kind.
type Document struct {
	APIVersion string
	Kind       string
	Value      value.Value
}

// ReadFile returns the documents of a YAML file (several may be separated
// by ---; empty documents are skipped).
func ReadFile(path string) ([]Document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return docs, nil
}

// Parse decodes every YAML document in data.
func Parse(data []byte) ([]Document, error) {
	var docs []Document
	err := Each(data, func(d Document) error {
		docs = append(docs, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return docs, nil
}

// Each decodes the YAML documents in data one at a time and passes each to
// fn, which may keep it; the first error stops it. Unlike Parse it never
// holds every document at once.
func Each(data []byte, fn func(Document) error) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 1; ; {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := value.FromYAMLNode(&n)
		if err != nil {
			return err
		}
		if v.IsNull() {
			continue
		}
		if !v.IsMap() {
			return fmt.Errorf("document %d is a %s, not a mapping", i, v.Kind().PyType())
		}
		d := Document{Value: v}
		if s, ok := v.GetString("apiVersion"); ok {
			d.APIVersion = s.Str()
		}
		if s, ok := v.GetString("kind"); ok {
			d.Kind = s.Str()
		}
		if err := fn(d); err != nil {
			return err
		}
		i++
	}
}

// Find returns the one document of the given kind in path.
func Find(path, kind string) (Document, error) {
	docs, err := ReadFile(path)
	if err != nil {
		return Document{}, err
	}
	return find(docs, path, kind)
}

// FindIn is Find on data read already; name labels errors.
func FindIn(data []byte, name, kind string) (Document, error) {
	docs, err := Parse(data)
	if err != nil {
		return Document{}, fmt.Errorf("%s: %w", name, err)
	}
	return find(docs, name, kind)
}

func find(docs []Document, path, kind string) (Document, error) {
	var found []Document
	for _, d := range docs {
		if d.Kind == kind {
			found = append(found, d)
		}
	}
	switch len(found) {
	case 0:
		return Document{}, fmt.Errorf("%s: no %s in the file", path, kind)
	case 1:
		return found[0], nil
	}
	return Document{}, fmt.Errorf("%s: %d %s documents, want one", path, len(found), kind)
}

// Decode fills obj (an API type) from the document through JSON that keeps
// key order, so raw JSON fields (grains, pillar, files) stay ordered.
// Unknown fields are an error: a typo should not silently drop a setting.
func (d Document) Decode(obj any) error {
	dec := json.NewDecoder(bytes.NewReader(d.Value.AppendJSON(nil)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return fmt.Errorf("decoding %s: %w", d.Kind, err)
	}
	return nil
}

// Lookup walks string keys through nested mappings.
func (d Document) Lookup(keys ...string) (value.Value, bool) {
	v := d.Value
	for _, k := range keys {
		var ok bool
		if v, ok = v.GetString(k); !ok {
			return value.Value{}, false
		}
	}
	return v, true
}

// MetadataOrder is a MinionTemplate's metadata key order as written, per
// scope ("entity", "secret"): the API type holds maps, and the order is
// what saltext renders in.
func (d Document) MetadataOrder() map[string][]string {
	order := map[string][]string{}
	for _, scope := range []string{"entity", "secret"} {
		if m, ok := d.Lookup("spec", "metadata", scope); ok {
			for _, p := range m.Pairs() {
				order[scope] = append(order[scope], p.Key.PyStr())
			}
		}
	}
	return order
}
