package value

import (
	"math"
	"testing"
)

// The expected strings below were printed by CPython 3.11.

func TestFormatFloatRepr(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{1.0, "1.0"}, {1.5, "1.5"}, {1e16, "1e+16"}, {1e-05, "1e-05"}, {0.0001, "0.0001"},
		{123456789012345.0, "123456789012345.0"}, {1e15, "1000000000000000.0"}, {0.1, "0.1"},
		{math.Copysign(0, -1), "-0.0"}, {2.5e-300, "2.5e-300"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
		{5e-324, "5e-324"}, {100.0, "100.0"}, {1234567890123456.0, "1234567890123456.0"},
		{12345678901234567.0, "1.2345678901234568e+16"}, {0.5, "0.5"}, {3.14159, "3.14159"}, {1e22, "1e+22"},
		{-1e-7, "-1e-07"}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}, {math.NaN(), "nan"},
	}
	for _, c := range cases {
		if got := FormatFloatRepr(c.f); got != c.want {
			t.Errorf("FormatFloatRepr(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}

func TestPyReprAndASCII(t *testing.T) {
	cases := []struct {
		v           Value
		repr, ascii string
	}{
		{NewString("it's"), `"it's"`, `"it's"`},
		{NewString(`a"b`), `'a"b'`, `'a"b'`},
		{NewString(`both'"`), `'both\'"'`, `'both\'"'`},
		{NewString("tab\there\n"), `'tab\there\n'`, `'tab\there\n'`},
		{NewString("é\u200b\x7f\x00"), `'é\u200b\x7f\x00'`, `'\xe9\u200b\x7f\x00'`},
		{NewString("\U0001F600"), `'😀'`, `'\U0001f600'`},
		{NewList([]Value{NewInt(1), NewString("a"), NewNull(), NewBool(true), NewFloat(1), NewMap([]Pair{{NewString("k"), NewList(nil)}})}),
			`[1, 'a', None, True, 1.0, {'k': []}]`, `[1, 'a', None, True, 1.0, {'k': []}]`},
	}
	for _, c := range cases {
		if got := c.v.PyRepr(); got != c.repr {
			t.Errorf("repr = %s, want %s", got, c.repr)
		}
		if got := c.v.PyASCII(); got != c.ascii {
			t.Errorf("ascii = %s, want %s", got, c.ascii)
		}
	}
	if got := NewList([]Value{NewString("a")}).PyStr(); got != "['a']" {
		t.Errorf("str(list) = %s", got)
	}
}

func TestLower(t *testing.T) {
	cases := map[string]string{
		"İSTANBUL ΟΔΟΣ Σ aΣb ΑΣ. STRAẞE": "i̇stanbul οδος σ aσb ας. straße",
		"UP-low-UP": "up-low-up",
		"already":   "already",
		"ΟΔΟΣ ΟΔΟΣ": "οδος οδος",
	}
	for in, want := range cases {
		if got := Lower(in); got != want {
			t.Errorf("Lower(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResolvePlain(t *testing.T) {
	cases := []struct {
		in   string
		want Value
	}{
		{"yes", NewBool(true)}, {"Off", NewBool(false)}, {"y", NewString("y")}, {"~", NewNull()},
		{"1", NewInt(1)}, {"1.0", NewFloat(1)}, {"1e+16", NewString("1e+16")}, {"1.0e+16", NewFloat(1e16)},
		{"0x1f", NewInt(31)}, {"010", NewInt(8)}, {"1_000", NewInt(1000)}, {"190:20:30", NewInt(685230)},
		{".inf", NewFloat(math.Inf(1))}, {"-.5", NewString("-.5")}, {"-1.5", NewFloat(-1.5)}, {"12345678901234567890", NewString("12345678901234567890")},
		{"web", NewString("web")},
	}
	for _, c := range cases {
		got := ResolvePlain(c.in)
		if got.Kind() != c.want.Kind() || !Equal(got, c.want) {
			t.Errorf("ResolvePlain(%q) = %s %s, want %s %s", c.in, got.Kind().PyType(), got.PyRepr(), c.want.Kind().PyType(), c.want.PyRepr())
		}
	}
}

func TestDecodeKeepsOrderAndTypes(t *testing.T) {
	for name, decode := range map[string]func() (Value, error){
		"yaml": func() (Value, error) { return DecodeYAML([]byte("z: 1\na: 1.0\nm: {y: [b, a], x: null}\n")) },
		"json": func() (Value, error) { return DecodeJSON([]byte(`{"z":1,"a":1.0,"m":{"y":["b","a"],"x":null}}`)) },
	} {
		v, err := decode()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := v.PyRepr(); got != "{'z': 1, 'a': 1.0, 'm': {'y': ['b', 'a'], 'x': None}}" {
			t.Errorf("%s: %s", name, got)
		}
		if got := string(v.AppendJSON(nil)); got != `{"z":1,"a":1.0,"m":{"y":["b","a"],"x":null}}` {
			t.Errorf("%s: JSON %s", name, got)
		}
	}
}

func TestDecodeYAMLRefusesAliasBombs(t *testing.T) {
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
		"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n" +
		"g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
	if _, err := DecodeYAML([]byte(bomb)); err == nil {
		t.Fatal("an alias bomb decoded")
	}
}

func TestMergeKeys(t *testing.T) {
	v, err := DecodeYAML([]byte("base: &b {x: 1, y: 2}\nv:\n  <<: *b\n  y: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := v.GetString("v")
	if got.PyRepr() != "{'x': 1, 'y': 3}" {
		t.Errorf("merge key: %s", got.PyRepr())
	}
}

func FuzzDecodeYAML(f *testing.F) {
	for _, s := range []string{"a: 1", "- [x, {y: z}]", "a: &a [1]\nb: *a", "<<: {a: 1}", "!!float 1", "? [a]\n: b", "'1.0'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := DecodeYAML([]byte(s))
		if err != nil {
			return
		}
		_ = v.PyRepr()
		back, err := DecodeJSON(v.AppendJSON(nil))
		if err == nil && v.Kind() != Float && !Equal(v, back) && !hasNaN(v) && !hasNonStringKey(v) {
			t.Fatalf("JSON round trip changed %s into %s", v.PyRepr(), back.PyRepr())
		}
	})
}

func hasNaN(v Value) bool {
	switch v.Kind() {
	case Float:
		return math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0)
	case List:
		for _, it := range v.Items() {
			if hasNaN(it) {
				return true
			}
		}
	case Map:
		for _, p := range v.Pairs() {
			if hasNaN(p.Val) || hasNaN(p.Key) {
				return true
			}
		}
	}
	return false
}

func hasNonStringKey(v Value) bool {
	switch v.Kind() {
	case List:
		for _, it := range v.Items() {
			if hasNonStringKey(it) {
				return true
			}
		}
	case Map:
		for _, p := range v.Pairs() {
			if p.Key.Kind() != String || hasNonStringKey(p.Val) {
				return true
			}
		}
	}
	return false
}

func TestJSONStringEscaping(t *testing.T) {
	v := NewList([]Value{NewString("<no jid set> & \"q\" \\ \n\t\x01 é \u2028")})
	want := `["<no jid set> & \"q\" \\ \n\t\u0001 é \u2028"]`
	if got := string(v.AppendJSON(nil)); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	back, err := DecodeJSON([]byte(want))
	if err != nil || !Equal(back, v) {
		t.Fatalf("round trip: %v %v", back.PyRepr(), err)
	}
}
