package parameters

import (
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

func TestTraverse(t *testing.T) {
	data := `
a: {b: {c: 1}}
nul: null
list: [x, {k: v}, {k: w, 1: one}, [deep]]
ints: {8080: http, 1: one, -2: neg, 1.5: f, q: quoted}
nokey: {null: n}
str: abc
"a:b": colon
yes: bool-key
`
	tests := []struct {
		key, delim string
		want       string // YAML; "" for a miss
	}{
		{"a:b:c", ":", "1"},
		{"a:b", ":", "{c: 1}"},
		{"a:x", ":", ""},
		{"a!b!c", "!", "1"},
		{"a:b:c", "!", ""},
		{"a:b", "!", "colon"},
		// A present null is a hit.
		{"nul", ":", "null"},
		{"nul:x", ":", ""},
		// Lists: a number is first an integer key of an embedded
		// mapping, then a position; other parts search embedded mappings.
		{"list:0", ":", "x"},
		{"list:-1", ":", "[deep]"},
		{"list:-4", ":", "x"},
		{"list:-5", ":", ""},
		{"list:4", ":", ""},
		{"list:1", ":", "one"},
		{"list: 1 ", ":", "one"},
		{"list:+0", ":", "x"},
		{"list:3:0", ":", "deep"},
		{"list:k", ":", "v"},
		{"list:z", ":", ""},
		{"list:1_0", ":", ""},
		{"list:99999999999999999999", ":", ""},
		// Mappings: a missed part is retried YAML-loaded.
		{"ints:8080", ":", "http"},
		{"ints:1", ":", "one"},
		{"ints:1.0", ":", "one"},
		{"ints:-2", ":", "neg"},
		{"ints:1.5", ":", "f"},
		{"ints:0x1F90", ":", "http"},
		{"ints:true", ":", "one"},   // True == 1 is the same key
		{"ints:8_080", ":", ""},     // yamlify_arg refuses underscores-only numbers
		{"ints:'q'", ":", "quoted"}, // YAML-loaded to q
		{"ints:'8080'", ":", ""},    // YAML-loaded to the string "8080": no such key
		{"nokey:None", ":", "n"},
		{"nokey:~", ":", "n"},
		{"nokey:null", ":", "n"},
		{"nokey:", ":", ""},
		// The key `yes` is True in YAML 1.1: found through the retry.
		{"yes", ":", "bool-key"},
		// Scalars cannot be subscripted.
		{"str:0", ":", ""},
		{"str:a", ":", ""},
		{"", ":", ""},
	}
	doc := y(t, data)
	for _, tt := range tests {
		got, ok := traverse(doc, tt.key, tt.delim)
		if tt.want == "" {
			if ok {
				t.Errorf("traverse(%q, %q) = %s, want a miss", tt.key, tt.delim, got.PyRepr())
			}
			continue
		}
		want := y(t, tt.want)
		if !ok {
			t.Errorf("traverse(%q, %q) missed, want %s", tt.key, tt.delim, want.PyRepr())
			continue
		}
		if p, eq := strictEqual(got, want, ""); !eq {
			t.Errorf("traverse(%q, %q) = %s, want %s (at %s)", tt.key, tt.delim, got.PyRepr(), want.PyRepr(), p)
		}
	}
}

func TestPyInt(t *testing.T) {
	tests := []struct {
		in             string
		n              int64
		isInt, overflw bool
	}{
		{"0", 0, true, false}, {"42", 42, true, false}, {"-7", -7, true, false}, {"+3", 3, true, false},
		{" 12\t", 12, true, false}, {"007", 7, true, false}, {"1_000", 1000, true, false},
		{"9223372036854775807", 1<<63 - 1, true, false},
		{"-9223372036854775808", -1 << 63, true, false},
		{"9223372036854775808", 0, true, true},
		{"123456789012345678901234567890", 0, true, true},
		{"", 0, false, false}, {"-", 0, false, false}, {"_1", 0, false, false}, {"1_", 0, false, false},
		{"1__0", 0, false, false}, {"1.0", 0, false, false}, {"0x10", 0, false, false}, {"a", 0, false, false},
		{"- 1", 0, false, false},
	}
	for _, tt := range tests {
		n, isInt, overflow := pyInt(tt.in)
		if n != tt.n || isInt != tt.isInt || overflow != tt.overflw {
			t.Errorf("pyInt(%q) = %d, %v, %v; want %d, %v, %v", tt.in, n, isInt, overflow, tt.n, tt.isInt, tt.overflw)
		}
	}
}

func TestQuery(t *testing.T) {
	in := Input{
		Root:   "tpl",
		Opts:   y(t, "{only_opts: o, both: opts, nested: {o: 1}}"),
		Grains: y(t, "{os: Debian, both: grains, only_grains: g, nested: {g: 1}, dns: {domain: example.net}}"),
		Pillar: y(t, "{both: pillar, only_pillar: p, nested: {p: 1}, sentinel: '_|-', master: {only_master: m, sentinel: from-master, both: master}}"),
	}
	tests := []struct {
		method     byte
		key, delim string
		want       string
	}{
		// config.get: opts, grains, pillar, pillar["master"]: first hit.
		{'C', "both", ":", "opts"},
		{'C', "only_grains", ":", "g"},
		{'C', "only_pillar", ":", "p"},
		{'C', "only_master", ":", "m"},
		{'C', "nested", ":", "{o: 1}"},
		{'C', "nested:p", ":", "1"},
		// A stored "_|-" is config.get's miss marker: the search goes on.
		{'C', "sentinel", ":", "from-master"},
		{'G', "sentinel", ":", ""},
		{'I', "sentinel", ":", "'_|-'"},
		// grains.get and pillar.get read only their own store.
		{'G', "only_opts", ":", ""},
		{'I', "only_opts", ":", ""},
		{'G', "both", ":", "grains"},
		{'I', "both", ":", "pillar"},
		{'I', "master:only_master", ":", "m"},
		// The delimiter is honoured for every method.
		{'G', "dns!domain", "!", "example.net"},
		{'C', "dns!domain", "!", "example.net"},
		{'G', "dns:domain", "", "example.net"},
		{'X', "os", ":", ""},
	}
	for _, tt := range tests {
		got, ok := Query(tt.method, in, tt.key, tt.delim)
		if tt.want == "" {
			if ok {
				t.Errorf("Query(%c, %q) = %s, want a miss", tt.method, tt.key, got.PyRepr())
			}
			continue
		}
		want := y(t, tt.want)
		if !ok || !value.Equal(got, want) {
			t.Errorf("Query(%c, %q) = %s, %v; want %s", tt.method, tt.key, got.PyRepr(), ok, want.PyRepr())
		}
	}
}

func TestQueryStrategy(t *testing.T) {
	base := Input{
		Root:   "tpl",
		Grains: y(t, "{tpl: {from_grains: 1, shared: grains, list: [g]}}"),
		Pillar: y(t, "{tpl: {from_pillar: 1, shared: pillar, deep: {p: 1}, list: [p]}, master: {tpl: {from_master: 1, deep: {m: 1}}}}"),
	}
	tests := []struct {
		name string
		opts string
		want string
	}{
		{"no strategy: first hit", "{}", "{from_grains: 1, shared: grains, list: [g]}"},
		{"recurse", "{tpl: {strategy: recurse}}",
			"{from_master: 1, deep: {m: 1, p: 1}, from_pillar: 1, shared: grains, list: [g], from_grains: 1, strategy: recurse}"},
		{"unknown means recurse", "{tpl: {strategy: deep}}",
			"{from_master: 1, deep: {m: 1, p: 1}, from_pillar: 1, shared: grains, list: [g], from_grains: 1, strategy: deep}"},
		{"overwrite", "{tpl: {strategy: overwrite}}", "{strategy: overwrite}"},
		{"falsy strategy", "{tpl: {strategy: ''}}", "{strategy: ''}"},
		{"salt-minion", "{__cli: salt-minion, tpl: {strategy: overwrite}}", "{strategy: overwrite}"},
		{"salt-call", "{__cli: salt-call, tpl: {strategy: overwrite}}", "{strategy: overwrite}"},
		// Under salt-ssh or an unknown command the merge option is dropped.
		{"salt-ssh", "{__master_opts__: {__cli: salt-ssh}, tpl: {strategy: overwrite}}", "{strategy: overwrite}"},
		{"salt-call over ssh", "{__cli: salt-call, __master_opts__: {__cli: salt-ssh}, tpl: {strategy: recurse}}", "{strategy: recurse}"},
		{"salt-run", "{__cli: salt-run, tpl: {strategy: recurse}}", "{strategy: recurse}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			in.Opts = y(t, tt.opts)
			got, ok := Query('C', in, "tpl", ":")
			want := y(t, tt.want)
			if !ok || !value.Equal(got, want) {
				t.Errorf("got %s, want %s", got.PyRepr(), want.PyRepr())
			}
		})
	}

	// The strategy itself is read without merging, from the first store.
	in := base
	in.Opts = y(t, "{tpl: {x: 1}}")
	in.Pillar = y(t, "{tpl: {strategy: recurse, from_pillar: 1}}")
	got, _ := Query('C', in, "tpl", ":")
	if want := y(t, "{strategy: recurse, from_pillar: 1, from_grains: 1, shared: grains, list: [g], x: 1}"); !value.Equal(got, want) {
		t.Errorf("strategy from pillar: got %s, want %s", got.PyRepr(), want.PyRepr())
	}
	// A store that is no mapping is left out of the merge.
	in.Pillar = y(t, "{tpl: {strategy: recurse}, master: salt.example.com}")
	got, _ = Query('C', in, "tpl", ":")
	if want := y(t, "{strategy: recurse, from_grains: 1, shared: grains, list: [g], x: 1}"); !value.Equal(got, want) {
		t.Errorf("string master: got %s, want %s", got.PyRepr(), want.PyRepr())
	}
}
