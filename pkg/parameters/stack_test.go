package parameters

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// stackCase describes one Stack call with YAML-written data. Files paths
// are relative to "tpl/parameters/" unless they start with "/".
type stackCase struct {
	name                  string
	grains, pillar, opts  string
	files                 map[string]string
	want                  string   // mapdata without map_jinja, YAML, key order checked
	wantSources           []string // nil: not checked
	wantTried             []string // nil: not checked; paths relative like files
	wantErr               string   // substring of the error
	wantErrIs             error
	keepMapJinjaInCompare bool
}

func (c stackCase) input(t *testing.T) Input {
	t.Helper()
	in := Input{Root: "tpl", Files: map[string]value.Value{}}
	parse := func(s string) value.Value {
		if s == "" {
			return emptyMap
		}
		return y(t, s)
	}
	in.Grains, in.Pillar, in.Opts = parse(c.grains), parse(c.pillar), parse(c.opts)
	for p, doc := range c.files {
		in.Files[filePath(p)] = y(t, doc)
	}
	return in
}

func filePath(p string) string {
	if strings.HasPrefix(p, "/") {
		return p[1:]
	}
	return "tpl/parameters/" + p
}

func TestStack(t *testing.T) {
	const sources = "{values: {sources: [%s]}}"
	src := func(s ...string) string { return strings.Replace(sources, "%s", strings.Join(s, ", "), 1) }
	tests := []stackCase{
		{
			name:   "list value names files in order",
			grains: "{roles: [web, db, 3]}",
			files: map[string]string{
				"map_jinja.yaml": src("Y:G@roles"),
				"roles/web.yaml": "{values: {r: [web], web: 1}}",
				"roles/db.yaml":  "{values: {r: [db], db: 1}}",
				"roles/3.yaml":   "{values: {three: 3}}",
			},
			want:      "{db: 1, r: [db], three: 3, web: 1}",
			wantTried: []string{"/parameters/map_jinja.yaml", "map_jinja.yaml", "defaults.yaml", "roles/web.yaml", "roles/db.yaml", "roles/3.yaml"},
		},
		{
			name:   "mapping value names its keys, sorted as upstream's YAML round trip leaves them",
			pillar: "{sel: {zz: 1, aa: 2}}",
			files: map[string]string{
				"map_jinja.yaml": src("Y:I@sel"),
				"sel/zz.yaml":    "{values: {w: zz}}",
				"sel/aa.yaml":    "{values: {w: aa}}",
			},
			want:      "{w: zz}",
			wantTried: []string{"/parameters/map_jinja.yaml", "map_jinja.yaml", "defaults.yaml", "sel/aa.yaml", "sel/zz.yaml"},
		},
		{
			name:   "names are Python str() of the value",
			pillar: "{i: 4, t: true, n: null, f: 1.50, l: [1.0, {b: 1, a: 2}, [x]]}",
			files: map[string]string{
				"map_jinja.yaml": src("Y:I@i", "Y:I@t", "Y:I@n", "Y:I@f", "Y:I@l"),
			},
			want: "{}",
			wantTried: []string{"/parameters/map_jinja.yaml", "map_jinja.yaml", "defaults.yaml",
				"i/4.yaml", "t/True.yaml", "n/None.yaml", "f/1.5.yaml",
				"l/1.0.yaml", "l/{'a': 2, 'b': 1}.yaml", "l/['x'].yaml"},
		},
		{
			name:   "missing or empty value: KEY is the path",
			pillar: "{e: '', el: [], ed: {}}",
			files: map[string]string{
				"map_jinja.yaml":  src("Y:I@e", "Y:I@el", "Y:I@ed", "sub/dir/f.yaml", "plain", "Y:G@a/b", "/abs", "x.jinja", "yaml", "t.tar"),
				"e.yaml":          "{values: {e: 1}}",
				"sub/dir/f.yaml":  "{values: {f: 1}}",
				"plain.yaml":      "{values: {plain: 1}}",
				"a/b.yaml":        "{values: {ab: 1}}",
				"x.jinja":         "{values: {jinja: 1}}",
				"yaml":            "{values: {bare: 1}}",
				"t.tar.yaml":      "{values: {tar: 1}}",
				"/tpl/parameters": "{values: {never: 1}}",
			},
			want: "{ab: 1, bare: 1, e: 1, f: 1, plain: 1, tar: 1}",
			wantTried: []string{"/parameters/map_jinja.yaml", "map_jinja.yaml", "defaults.yaml",
				"e.yaml", "el.yaml", "ed.yaml", "sub/dir/f.yaml", "plain.yaml", "a/b.yaml", "abs.yaml", "yaml", "t.tar.yaml"},
		},
		{
			name:   "falsy, scalar and list documents",
			grains: "{g: [empty, zero, str, list, nolist]}",
			files: map[string]string{
				"map_jinja.yaml": src("Y:G@g"),
				"g/empty.yaml":   "{}",
				"g/zero.yaml":    "0",
				"g/str.yaml":     "just text",
				"g/list.yaml":    "[x, {values: {from_list: 1}, strategy: overwrite}]",
				"g/nolist.yaml":  "{strategy: overwrite}",
			},
			want: "{from_list: 1}",
		},
		{
			name: "global then formula map_jinja.yaml, lists merged on request",
			files: map[string]string{
				"/parameters/map_jinja.yaml": src("G@a"),
				"map_jinja.yaml":             "{merge_lists: 'Yes', values: {sources: [G@b, G@a], extra: 1}}",
			},
			grains:      "{a: {from_a: 1}, b: {from_b: 1}}",
			want:        "{from_a: 1, from_b: 1}",
			wantSources: []string{"G@a", "G@b"},
		},
		{
			name: "map_jinja settings land in mapdata, key-sorted, replacing a map_jinja parameter",
			files: map[string]string{
				"map_jinja.yaml": "{values: {zeta: 1, sources: [C@tpl], alpha: 2}}",
			},
			pillar:                "{tpl: {map_jinja: {x: 1}, b: 1}}",
			want:                  "{b: 1, map_jinja: {alpha: 2, sources: [C@tpl], zeta: 1}}",
			keepMapJinjaInCompare: true,
		},
		{
			name:   "tplroot:merge_lists is the default of every layer",
			pillar: "{tpl: {merge_lists: true, l: [b, c]}}",
			files: map[string]string{
				"map_jinja.yaml": src("C@tpl", "over"),
				"defaults.yaml":  "{values: {l: [a, b]}}",
				"over.yaml":      "{merge_lists: false, values: {l: [z]}}",
			},
			want: "{l: [z], merge_lists: true}",
		},
		{
			name:   "tplroot:merge_lists unset: lists are replaced",
			pillar: "{tpl: {l: [b, c]}}",
			files: map[string]string{
				"map_jinja.yaml": src("C@tpl"),
				"defaults.yaml":  "{values: {l: [a, b]}}",
			},
			want: "{l: [b, c]}",
		},
		{
			name:   "a value's own strategy picks its merge and stays",
			pillar: "{tpl: {strategy: overwrite, nested: {b: 2}}}",
			files: map[string]string{
				"map_jinja.yaml": src("C@tpl"),
				"defaults.yaml":  "{values: {nested: {a: 1}}}",
			},
			want: "{nested: {b: 2}, strategy: overwrite}",
		},
		{
			name:   "SUB reads the strategy from the raw value too",
			pillar: "{tpl: {strategy: list, x: 1}}",
			files: map[string]string{
				"map_jinja.yaml": src("I:SUB@tpl"),
				"defaults.yaml":  "{values: {tpl: {old: 1}}}",
			},
			want: "{tpl: [{old: 1}, {strategy: list, x: 1}]}",
		},
		{
			name:   "SUB stores falsy values as {} and scalars as they are",
			pillar: "{z: 0, s: abc, l: [1], 'k:lookup': {v: 1}}",
			files: map[string]string{
				"map_jinja.yaml": src("I:SUB@z", "I:SUB@s", "I:SUB@l", "I:SUB@missing:lookup", "C:SUB:!@k:lookup"),
			},
			// With "!" as delimiter "k:lookup" is one key; only then ":lookup" is cut.
			want: "{k: {v: 1}, l: [1], missing: {}, s: abc, z: {}}",
		},
		{
			name:   "tplroot:strategy merges every config.get store",
			opts:   "{__cli: salt-minion, tpl: {from_opts: 1}}",
			grains: "{tpl: {from_grains: 1}}",
			pillar: "{tpl: {strategy: recurse, from_pillar: 1}, master: {tpl: {from_master: 1}}}",
			want:   "{from_grains: 1, from_master: 1, from_opts: 1, from_pillar: 1, strategy: recurse}",
		},
		{
			name:   "mixed key types keep their order, like Python's failed sorted()",
			pillar: "{tpl: {b: 1, 2: two, a: 1, nested: {z: 1, 10: x, 9: y}, nums: {10: a, 9.5: b, false: c}}}",
			want:   "{b: 1, 2: two, a: 1, nested: {z: 1, 10: x, 9: y}, nums: {false: c, 9.5: b, 10: a}}",
		},
		{
			name:      "sources must be a list",
			files:     map[string]string{"map_jinja.yaml": "{values: {sources: C@tpl}}"},
			wantErr:   `map_jinja sources is a string, not a list`,
			wantTried: []string{"/parameters/map_jinja.yaml", "map_jinja.yaml"},
		},
		{
			name:    "sources must be strings",
			files:   map[string]string{"map_jinja.yaml": "{values: {sources: [C@tpl, 4]}}"},
			wantErr: `map_jinja source 1 is a number (4), not a string`,
		},
		{
			name:    "a null sources fails",
			files:   map[string]string{"map_jinja.yaml": "{values: {sources: null}}"},
			wantErr: `map_jinja sources is null, not a list`,
		},
		{
			name:      "bad source",
			files:     map[string]string{"map_jinja.yaml": src("C@tpl", "Y:X:a:b:c@k")},
			wantErr:   `parameters: invalid source "Y:X:a:b:c@k"`,
			wantErrIs: ErrBadSource,
		},
		{
			name:      "values must be a mapping",
			files:     map[string]string{"map_jinja.yaml": src("f"), "f.yaml": "{values: [1]}"},
			wantErr:   `parameters: layer "f" file "tpl/parameters/f.yaml": values: cannot merge a list into a mapping`,
			wantErrIs: ErrMerge,
			wantTried: []string{"/parameters/map_jinja.yaml", "map_jinja.yaml", "defaults.yaml", "f.yaml"},
		},
		{
			name:      "a C value must be a mapping",
			grains:    "{os: Debian}",
			files:     map[string]string{"map_jinja.yaml": src("G@os")},
			wantErr:   `parameters: layer "G@os": cannot merge a string into a mapping`,
			wantErrIs: ErrMerge,
		},
		{
			name:    "map_jinja.yaml values null",
			files:   map[string]string{"/parameters/map_jinja.yaml": "{values: null}"},
			wantErr: `parameters: layer "map_jinja.yaml" file "parameters/map_jinja.yaml": values is null`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Stack(tt.input(t))
			if tt.wantTried != nil {
				want := make([]string, len(tt.wantTried))
				for i, p := range tt.wantTried {
					want[i] = filePath(p)
				}
				if !slices.Equal(res.FilesTried, want) {
					t.Errorf("files tried:\n got %q\nwant %q", res.FilesTried, want)
				}
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if tt.wantErrIs != nil && !errors.Is(err, tt.wantErrIs) {
					t.Errorf("error %v does not wrap %v", err, tt.wantErrIs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantSources != nil && !slices.Equal(res.Sources, tt.wantSources) {
				t.Errorf("sources %q, want %q", res.Sources, tt.wantSources)
			}
			got := res.Mapdata
			if mj, ok := got.GetString("map_jinja"); !ok || !mj.IsMap() {
				t.Fatalf("mapdata has no map_jinja mapping: %s", got.PyRepr())
			}
			if !tt.keepMapJinjaInCompare {
				got = got.Delete(value.NewString("map_jinja"))
			}
			want := y(t, tt.want)
			if p, ok := strictEqual(got, want, ""); !ok {
				t.Errorf("at %s:\n got %s\nwant %s", p, got.PyRepr(), want.PyRepr())
			}
		})
	}
}

func TestStackDefaultSources(t *testing.T) {
	res, err := Stack(Input{Root: "vault"})
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultSources("vault"); !slices.Equal(res.Sources, want) {
		t.Errorf("sources %q, want %q", res.Sources, want)
	}
	want := "{map_jinja: {sources: [Y:G@osarch, Y:G@os_family, Y:G@os, Y:G@osfinger, 'C@vault:lookup', C@vault, Y:G@id]}}"
	if p, ok := strictEqual(res.Mapdata, y(t, want), ""); !ok {
		t.Errorf("at %s: got %s", p, res.Mapdata.PyRepr())
	}
}

func TestStackDoesNotModifyInput(t *testing.T) {
	c := loadVectors(t)[0]
	in := vectorInput(t, c)
	before := map[string]string{}
	for p, v := range in.Files {
		before[p] = jsonText(v)
	}
	pillar := jsonText(in.Pillar)
	if _, err := Stack(in); err != nil {
		t.Fatal(err)
	}
	for p, v := range in.Files {
		if jsonText(v) != before[p] {
			t.Errorf("file %s changed", p)
		}
	}
	if jsonText(in.Pillar) != pillar {
		t.Error("pillar changed")
	}
}
