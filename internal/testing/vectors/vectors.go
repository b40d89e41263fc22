// Package vectors loads the test vectors produced by running the upstream
// implementations (saltext-vault templating, map.jinja parameter stack),
// for the tests of every layer that must match them: pkg/template,
// pkg/parameters, pkg/render and the CLI. It is test support: no product
// code imports it.
package vectors

import (
	"encoding/json"
	"os"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// TemplatingCase is one case of templating.json.
type TemplatingCase struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind"` // policies, metadata, pillar_paths
	Patterns  []string        `json:"patterns"`
	Pattern   *string         `json:"pattern"`
	Metadata  [][2]string     `json:"metadata"`
	Minion    string          `json:"minion"`
	Grains    json.RawMessage `json:"grains"`
	Pillar    json.RawMessage `json:"pillar"`
	JID       *string         `json:"jid"`
	User      *string         `json:"user"`
	Expected  json.RawMessage `json:"expected"`
	Deviation string          `json:"deviation"`
}

// Templating reads a templating vectors file.
func Templating(path string) ([]TemplatingCase, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cases []TemplatingCase
	return cases, json.Unmarshal(raw, &cases)
}

// WantsError reports whether the whole render must fail.
func (c TemplatingCase) WantsError() bool {
	var e struct{ Error bool }
	return json.Unmarshal(c.Expected, &e) == nil && e.Error
}

// WantList is the expected policies or pillar paths (never nil).
func (c TemplatingCase) WantList() []string {
	out := []string{}
	_ = json.Unmarshal(c.Expected, &out)
	if out == nil {
		out = []string{}
	}
	return out
}

// WantPairs is the expected metadata, in order.
func (c TemplatingCase) WantPairs() [][2]string {
	out := [][2]string{}
	_ = json.Unmarshal(c.Expected, &out)
	if out == nil {
		out = [][2]string{}
	}
	return out
}

// HasKey reports whether the case configures metadata key k.
func (c TemplatingCase) HasKey(k string) bool {
	for _, p := range c.Metadata {
		if p[0] == k {
			return true
		}
	}
	return false
}

// ParametersCase is one case of parameters.json.
type ParametersCase struct {
	Name          string          `json:"name"`
	TplRoot       string          `json:"tplroot"`
	Grains        json.RawMessage `json:"grains"`
	Pillar        json.RawMessage `json:"pillar"`
	Opts          json.RawMessage `json:"opts"`
	Files         json.RawMessage `json:"files"`
	Expected      json.RawMessage `json:"expected_mapdata"`
	ExpectedError bool            `json:"expected_error"`
	FilesTried    []struct {
		Path  string `json:"path"`
		Found bool   `json:"found"`
	} `json:"files_tried"`
}

// Parameters reads a parameters vectors file.
func Parameters(path string) ([]ParametersCase, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Cases []ParametersCase `json:"cases"`
	}
	return file.Cases, json.Unmarshal(raw, &file)
}

// Value decodes raw case data keeping order and types; absent is an empty
// mapping.
func Value(raw json.RawMessage) (value.Value, error) {
	if len(raw) == 0 {
		return value.NewMap(nil), nil
	}
	return value.DecodeJSON(raw)
}
