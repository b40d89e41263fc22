package parameters

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/testing/vectors"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// The cases of testdata/parameters.json were produced by running
// template-formula's map.jinja; data stays raw until value.DecodeJSON, which
// keeps key order and the int/float distinction.
func loadVectors(t testing.TB) []vectors.ParametersCase {
	t.Helper()
	cases, err := vectors.Parameters("testdata/parameters.json")
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

func vectorInput(t testing.TB, c vectors.ParametersCase) Input {
	t.Helper()
	in := Input{
		Root:   c.TplRoot,
		Grains: mustJSON(t, c.Grains),
		Pillar: mustJSON(t, c.Pillar),
		Opts:   mustJSON(t, c.Opts),
		Files:  map[string]value.Value{},
	}
	for _, p := range mustJSON(t, c.Files).Pairs() {
		doc := p.Val
		if doc.IsString() {
			// The generator stores a document JSON cannot say as it was
			// written ("values:\n" for values-null-error): YAML text.
			d, err := value.DecodeYAML([]byte(doc.Str()))
			if err != nil {
				t.Fatalf("file %s: %v", p.Key.Str(), err)
			}
			doc = d
		}
		in.Files[p.Key.Str()] = doc
	}
	return in
}

func mustJSON(t testing.TB, raw json.RawMessage) value.Value {
	t.Helper()
	if len(raw) == 0 {
		return value.Value{}
	}
	v, err := value.DecodeJSON(raw)
	if err != nil {
		t.Fatalf("decoding %.60s: %v", raw, err)
	}
	return v
}

func TestVectors(t *testing.T) {
	cases := loadVectors(t)
	passed := 0
	for _, c := range cases {
		ok := t.Run(c.Name, func(t *testing.T) {
			res, err := Stack(vectorInput(t, c))
			if c.FilesTried != nil {
				// We try no `.yaml.jinja` twins: compare the rest, in order.
				var want []string
				for _, f := range c.FilesTried {
					if !strings.HasSuffix(f.Path, ".jinja") {
						want = append(want, f.Path)
					}
				}
				if !slices.Equal(res.FilesTried, want) {
					t.Errorf("files tried:\n got %q\nwant %q", res.FilesTried, want)
				}
			}
			if c.ExpectedError {
				if err == nil {
					t.Fatalf("want an error, got mapdata %s", jsonText(res.Mapdata))
				}
				t.Logf("error (as expected): %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Stack: %v", err)
			}
			want := mustJSON(t, c.Expected)
			if !value.Equal(res.Mapdata, want) {
				t.Fatalf("mapdata differs:\n got %s\nwant %s", jsonText(res.Mapdata), jsonText(want))
			}
			// Stricter than Python's ==: key order (every expected mapping
			// is key-sorted, and so is ours, see sortKeys) and int vs
			// float vs bool. No case needs the order leeway the spec gives
			// Y expansion over a mapping: upstream sorts those keys too,
			// and so do we.
			if path, ok := strictEqual(res.Mapdata, want, ""); !ok {
				t.Fatalf("mapdata differs in order or type at %s:\n got %s\nwant %s", path, jsonText(res.Mapdata), jsonText(want))
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("parameter vectors: %d/%d pass", passed, len(cases))
}

// strictEqual compares kinds exactly (1, 1.0 and true differ) and mappings
// in order, returning the path of the first difference.
func strictEqual(a, b value.Value, path string) (string, bool) {
	if a.Kind() != b.Kind() {
		return path, false
	}
	switch a.Kind() {
	case value.List:
		ai, bi := a.Items(), b.Items()
		if len(ai) != len(bi) {
			return path, false
		}
		for i := range ai {
			if p, ok := strictEqual(ai[i], bi[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	case value.Map:
		ap, bp := a.Pairs(), b.Pairs()
		if len(ap) != len(bp) {
			return path, false
		}
		for i := range ap {
			p := path + "." + ap[i].Key.PyStr()
			if _, ok := strictEqual(ap[i].Key, bp[i].Key, p); !ok {
				return p + " (key order)", false
			}
			if q, ok := strictEqual(ap[i].Val, bp[i].Val, p); !ok {
				return q, false
			}
		}
		return "", true
	case value.Float:
		fa, fb := a.Float(), b.Float()
		return path, fa == fb || fa != fa && fb != fb
	}
	return path, value.Equal(a, b)
}

func jsonText(v value.Value) string {
	b, _ := v.MarshalJSON()
	return string(b)
}
