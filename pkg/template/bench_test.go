package template

import (
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// typicalPlaces is the typical binding: four policies, three
// entity metadata keys and two pillar paths over a three-role pillar.
func typicalPlaces() *Places {
	return &Places{
		Policies: []*Pattern{
			Compile("saltstack/minions"), Compile("saltstack/{minion}"),
			Compile("salt_role_{pillar[roles]}"), Compile("salt_env_{grains[env]}_{pillar[roles]}"),
		},
		Entity: []MetaEntry{
			{"minion-id", Compile("{minion}")},
			{"roles", Compile("{pillar[roles]}")},
			{"env", Compile("{pillar[env]}")},
		},
		PillarPaths: []*Pattern{Compile("salt/data/minions/{minion}"), Compile("salt/data/roles/{pillar[roles]}")},
	}
}

func typicalData(b testing.TB) *Data {
	pillar, err := value.DecodeJSON([]byte(`{"roles":["web","db","cache"],"env":"prod"}`))
	if err != nil {
		b.Fatal(err)
	}
	grains, _ := value.DecodeJSON([]byte(`{"id":"web01.example.com","env":"prod","os_family":"Debian"}`))
	return &Data{Minion: "web01.example.com", Pillar: pillar, Grains: grains}
}

func TestTypicalBinding(t *testing.T) {
	out, err := typicalPlaces().Render(typicalData(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"saltstack/minions", "saltstack/web01.example.com", "salt_role_web", "salt_role_db", "salt_role_cache",
		"salt_env_prod_web", "salt_env_prod_db", "salt_env_prod_cache"}
	if len(out.Policies) != len(want) {
		t.Fatalf("policies %q", out.Policies)
	}
	for i := range want {
		if out.Policies[i] != want[i] {
			t.Fatalf("policies %q", out.Policies)
		}
	}
	if len(out.Entity) != 6 || out.Entity[1].Value != "cache,db,web" || out.Entity[2] != (KV{"roles__0", "cache"}) {
		t.Fatalf("entity %q", out.Entity)
	}
	if len(out.PillarPaths) != 4 {
		t.Fatalf("paths %q", out.PillarPaths)
	}
}

// BenchmarkTypicalBinding renders the typical binding with its template
// compiled once, as the controller does.
func BenchmarkTypicalBinding(b *testing.B) {
	pl := typicalPlaces()
	d := typicalData(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.Render(d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTypicalBindingCompile includes compiling the patterns, the
// cost when a template changes.
func BenchmarkTypicalBindingCompile(b *testing.B) {
	d := typicalData(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := typicalPlaces().Render(d); err != nil {
			b.Fatal(err)
		}
	}
}
