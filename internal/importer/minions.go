package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"unicode/utf8"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// MinionData is one input of per-minion mappings, minion ID -> data, in
// input order.
type MinionData []MinionEntry

// MinionEntry is one minion's grains or pillar.
type MinionEntry struct {
	ID   string
	Data value.Value // a mapping
}

// byID indexes the data by minion ID.
func (m MinionData) byID() map[string]value.Value {
	out := make(map[string]value.Value, len(m))
	for _, e := range m {
		out[e.ID] = e.Data
	}
	return out
}

// ParseMinionData reads the JSON that `salt-run cache.grains --out=json`
// and `salt-run cache.pillar --out=json` print: one object mapping minion
// IDs to their grains or pillar. A stream of such objects is accepted too
// (`salt '*' grains.items --out=json` prints one per minion); a minion seen
// again replaces its earlier data. Key order and the int/float
// distinction of the values are kept. Minions whose data is not a mapping
// (a minion that did not return) are skipped with a warning.
func ParseMinionData(what string, data []byte) (MinionData, []string, error) {
	var out MinionData
	var warnings []string
	index := map[string]int{}
	add := func(id string, v value.Value) {
		if !v.IsMap() {
			warnings = append(warnings, fmt.Sprintf("%s of minion %q is a %s, not a mapping: skipped", what, id, v.Kind().PyType()))
			return
		}
		if i, ok := index[id]; ok {
			out[i].Data = v
			warnings = append(warnings, fmt.Sprintf("%s of minion %q given twice: the last one is used", what, id))
			return
		}
		index[id] = len(out)
		out = append(out, MinionEntry{ID: id, Data: v})
	}
	// The top-level object is read minion by minion: fleets are large, and
	// each minion's data is decoded on its own, in order.
	dec := json.NewDecoder(bytes.NewReader(data))
	for n := 1; ; n++ {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: JSON document %d: %w", what, n, err)
		}
		if tok == nil {
			continue
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return nil, nil, fmt.Errorf("%s: JSON document %d is not an object of minion IDs", what, n)
		}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, nil, fmt.Errorf("%s: JSON document %d: %w", what, n, err)
			}
			id, _ := kt.(string)
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, nil, fmt.Errorf("%s: JSON document %d, minion %q: %w", what, n, id, err)
			}
			v, err := value.DecodeJSON(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: JSON document %d, minion %q: %w", what, n, id, err)
			}
			add(id, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, nil, fmt.Errorf("%s: JSON document %d: %w", what, n, err)
		}
	}
	return out, warnings, nil
}

var minionIDRE = regexp.MustCompile(`^[^/\s]+$`)

// validMinionID is the CRD's rule for spec.minionID.
func validMinionID(id string) bool {
	n := utf8.RuneCountInString(id)
	return n >= 1 && n <= 253 && utf8.ValidString(id) && minionIDRE.MatchString(id) && id != "." && id != ".."
}
