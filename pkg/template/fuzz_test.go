package template

import (
	"reflect"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

func fuzzData(t testing.TB) *Data {
	pillar, err := value.DecodeJSON([]byte(`{"roles":["web","db"],"aux":["x","y"],"empty":[],"n":3,"f":1.5,
		"m":{"a":{"b":["n1","n2"]},"c":"s"},"braces":["{minion}","{{x}}","a{b"],"0":"zero","s":"Ünï"}`))
	if err != nil {
		t.Fatal(err)
	}
	grains, _ := value.DecodeJSON([]byte(`{"id":"m1","roles":["g1","g2"],"os":"Debian"}`))
	return &Data{Minion: "Min-1", Pillar: pillar, Grains: grains}
}

// FuzzExpand checks that no pattern panics, and that the fast path and
// upstream's general rewrite-and-reparse algorithm agree on every pattern
// the fast path accepts.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{
		"{minion}", "salt_role_{pillar[roles]}", "{pillar[roles]}-{pillar[aux]}-{pillar[roles]}",
		"{{ {pillar[roles]} }}", "{pillar[m][a][b][1]}", "{minion:{pillar[n]}}", "{pillar[roles]!r}",
		"{pillar[braces]}", "{pillar[empty]}{", "{pillar[empty]!0}", "{pillar[empty]:>4}{pillar[roles]!r}", "{pillar[roles]}{pillar[roles]!s}", "{}", "{0}",
		"{pillar[s][1]:>4}", "{pillar.x}", "{minion!}", "{pillar[[x]}", "{{pillar[roles]}}{pillar[roles]}",
		"{grains[roles]}/{pillar[m]}", "{minion:{}}", "}", "{",
	} {
		f.Add(s)
	}
	d := fuzzData(f)
	f.Fuzz(func(t *testing.T, src string) {
		p := Compile(src)
		fast, fastWarn, fastErr := Expand(p, d, PolicyVars, false)
		_ = p.Fields()
		if !p.regular {
			return
		}
		slow := &Pattern{src: src, parsed: p.parsed, regular: false}
		gen, genWarn, genErr := Expand(slow, d, PolicyVars, false)
		if (fastErr == nil) != (genErr == nil) || !reflect.DeepEqual(fast, gen) || len(fastWarn) != len(genWarn) {
			t.Fatalf("fast and general paths differ on %q:\nfast %q %v %q\ngen  %q %v %q", src, fast, fastErr, fastWarn, gen, genErr, genWarn)
		}
	})
}

// FuzzMetadata feeds arbitrary keys and patterns through the composite
// metadata algorithm.
func FuzzMetadata(f *testing.F) {
	f.Add("roles", "{pillar[roles]}", "roles__x")
	f.Add("k", "{pillar[braces]}", "k2")
	d := fuzzData(f)
	f.Fuzz(func(t *testing.T, k1, p1, k2 string) {
		pl := Places{Entity: []MetaEntry{{k1, Compile(p1)}, {k2, Compile("{minion}")}}}
		out, err := pl.Render(d)
		if err != nil {
			return
		}
		for _, kv := range out.Entity {
			if kv.Key == "" && k1 != "" && k2 != "" {
				t.Fatalf("empty key in %q", out.Entity)
			}
		}
	})
}
