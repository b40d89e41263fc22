package parameters

import (
	"slices"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

func FuzzParseSource(f *testing.F) {
	for _, s := range []string{
		"defaults.yaml", "Y:G@os", "C@tpl:lookup", "C:SUB@tpl:lookup", "Y:G:!@dns!domain",
		"Y:G:!:x@os", "Y:G:!:x:y@os", "Y:Z@os", "Y:SUB@os", "@", "", "X@a@b", " C @ k ", "I:SUB:->@a->b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src, err := ParseSource(s)
		head, key, hasAt := strings.Cut(s, "@")
		if err != nil {
			if !hasAt {
				t.Fatalf("%q: error without '@': %v", s, err)
			}
			return
		}
		if src.Raw != s {
			t.Fatalf("%q: Raw = %q", s, src.Raw)
		}
		if !strings.ContainsRune("YCGI", rune(src.Type)) || !strings.ContainsRune("CGI", rune(src.Query)) {
			t.Fatalf("%q: type %q query %q", s, src.Type, src.Query)
		}
		if src.Delim == "" {
			t.Fatalf("%q: empty delimiter", s)
		}
		if src.Type != 'Y' && src.Query != src.Type {
			t.Fatalf("%q: %c source queries with %c", s, src.Type, src.Query)
		}
		if src.Sub && (src.Type == 'Y' || src.Option != "SUB") {
			t.Fatalf("%q: Sub on %c with option %q", s, src.Type, src.Option)
		}
		if !hasAt {
			if src != (Source{Type: 'Y', Query: 'C', Delim: ":", Key: s, Raw: s}) {
				t.Fatalf("%q: %+v", s, src)
			}
			return
		}
		key, _, _ = strings.Cut(key, "@")
		if src.Key != key {
			t.Fatalf("%q: Key = %q, want %q", s, src.Key, key)
		}
		meta := strings.Split(head, ":")
		if len(meta) > 4 {
			t.Fatalf("%q: %d parts accepted", s, len(meta))
		}
		if len(meta) == 3 && meta[2] != "" && src.Delim != meta[2] {
			t.Fatalf("%q: Delim = %q", s, src.Delim)
		}
		if len(meta) != 3 && src.Delim != ":" {
			t.Fatalf("%q: Delim = %q", s, src.Delim)
		}
	})
}

// FuzzStack runs random documents through the whole stack: map_jinja.yaml,
// defaults.yaml and one more layer file at a few likely paths, plus a
// document holding grains, pillar and opts.
func FuzzStack(f *testing.F) {
	f.Add([]byte(`{values: {sources: ["Y:G@os", "C@tpl:lookup", "C:SUB@tpl", "I@x", "Y:I:!@a!b"]}, merge_lists: true}`),
		[]byte(`{values: {pkg: {name: tpl}, list: [a]}}`),
		[]byte(`{strategy: overwrite, values: {pkg: {name: deb}, list: [b]}}`),
		[]byte(`{grains: {os: Debian, id: m}, pillar: {tpl: {lookup: {a: 1}, strategy: recurse}, a: {b: [c, 1]}}, opts: {__cli: salt-minion}}`))
	f.Add([]byte(`{values: {sources: [G@g, "Y:G@g", "Y:C@l"]}}`),
		[]byte(`values: null`),
		[]byte(`[{values: {x: 1}, strategy: list}]`),
		[]byte(`{grains: {g: [1, 2.5, null, {k: v}]}, pillar: {l: {z: 1, 1: 2}}}`))
	f.Add([]byte(`{values: {sources: "C@tpl"}}`), []byte(`0`), []byte(`{values: [1]}`), []byte(`{pillar: {tpl: {strategy: {}, merge_lists: yes}}}`))
	f.Fuzz(func(t *testing.T, mapJinja, defaults, layer, data []byte) {
		doc := func(b []byte) value.Value {
			v, err := value.DecodeYAML(b)
			if err != nil {
				return value.Value{}
			}
			return v
		}
		d := doc(data)
		in := Input{Root: "tpl", Files: map[string]value.Value{}}
		in.Grains, _ = d.GetString("grains")
		in.Pillar, _ = d.GetString("pillar")
		in.Opts, _ = d.GetString("opts")
		in.Files["tpl/parameters/map_jinja.yaml"] = doc(mapJinja)
		in.Files["tpl/parameters/defaults.yaml"] = doc(defaults)
		l := doc(layer)
		for _, p := range []string{"parameters/map_jinja.yaml", "tpl/parameters/os/Debian.yaml", "tpl/parameters/g/1.yaml", "tpl/parameters/a!b/c.yaml", "tpl/parameters/x.yaml"} {
			in.Files[p] = l
		}

		res, err := Stack(in)
		if err != nil {
			return
		}
		m := res.Mapdata
		mj, ok := m.GetString("map_jinja")
		if !m.IsMap() || !ok {
			t.Fatalf("mapdata %s has no map_jinja", m.PyRepr())
		}
		srcs, _ := mj.GetString("sources")
		if len(srcs.Items()) != len(res.Sources) {
			t.Fatalf("sources %q vs map_jinja %s", res.Sources, srcs.PyRepr())
		}
		if _, ok := strictEqual(sortKeys(m), m, ""); !ok {
			t.Fatalf("mapdata not key-sorted: %s", m.PyRepr())
		}
		again, err := Stack(in)
		if err != nil {
			t.Fatalf("second run failed: %v", err)
		}
		if _, ok := strictEqual(again.Mapdata, m, ""); !ok || !slices.Equal(again.FilesTried, res.FilesTried) {
			t.Fatal("Stack is not deterministic")
		}
	})
}
