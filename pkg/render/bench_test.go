package render

import (
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// BenchmarkRenderTypical is the controller's per-binding work for the
// issue's typical template, plus one policy document, entity name and AppRole.
func BenchmarkRenderTypical(b *testing.B) {
	c := Compile(Template{
		Policies:       []string{"saltstack/minions", "saltstack/{minion}", "salt_role_{pillar[roles]}", "salt_env_{grains[env]}_{pillar[roles]}"},
		EntityMetadata: []template.KV{{Key: "minion-id", Value: "{minion}"}, {Key: "roles", Value: "{pillar[roles]}"}, {Key: "env", Value: "{pillar[env]}"}},
		PillarPaths:    []string{"salt/data/minions/{minion}", "salt/data/roles/{pillar[roles]}"},
		PolicyDocuments: []PolicyDocument{{Name: "salt_role_{pillar[roles]}", Rules: []Rule{
			{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []string{"read", "list"}},
		}}},
		TrustMinionGrains: true,
	})
	pillar, _ := value.DecodeJSON([]byte(`{"roles":["web","db","cache"],"env":"prod"}`))
	grains, _ := value.DecodeJSON([]byte(`{"id":"web01","env":"prod"}`))
	bind := Binding{MinionID: "web01", Grains: grains, Pillar: pillar}
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.Render(bind, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Validate(res)) != 0 {
			b.Fatal("violations")
		}
	}
}
