package template

import (
	"reflect"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/testing/vectors"
)

// renderVector renders a case the way upstream's function for its kind did.
func renderVector(t testing.TB, c vectors.TemplatingCase) (any, error) {
	grains, err := vectors.Value(c.Grains)
	if err != nil {
		t.Fatal(err)
	}
	pillar, err := vectors.Value(c.Pillar)
	if err != nil {
		t.Fatal(err)
	}
	d := &Data{Minion: c.Minion, Grains: grains, Pillar: pillar}
	if c.JID != nil {
		d.JID = *c.JID
	}
	if c.User != nil {
		d.User = *c.User
	}
	var pl Places
	switch c.Kind {
	case "policies":
		for _, p := range c.Patterns {
			pl.Policies = append(pl.Policies, Compile(p))
		}
	case "pillar_paths":
		pl.PillarPaths = []*Pattern{Compile(*c.Pattern)}
	case "metadata":
		for _, kv := range c.Metadata {
			pl.Entity = append(pl.Entity, MetaEntry{Key: kv[0], Pattern: Compile(kv[1])})
		}
	}
	out, err := pl.Render(d)
	if err != nil {
		return nil, err
	}
	switch c.Kind {
	case "policies":
		return out.Policies, nil
	case "pillar_paths":
		return out.PillarPaths, nil
	}
	pairs := [][2]string{}
	for _, kv := range out.Entity {
		pairs = append(pairs, [2]string{kv.Key, kv.Value})
	}
	return pairs, nil
}

// TestVectors runs testdata/templating.json, produced by running the
// upstream functions (the deviations carry our expected result).
func TestVectors(t *testing.T) {
	cases, err := vectors.Templating("testdata/templating.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 200 {
		t.Fatalf("only %d vectors loaded", len(cases))
	}
	for _, c := range cases {
		t.Run(c.ID, func(t *testing.T) {
			got, err := renderVector(t, c)
			if c.WantsError() {
				if err == nil {
					t.Fatalf("want an error, got %q", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			var want any = c.WantList()
			if c.Kind == "metadata" {
				want = c.WantPairs()
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %q\nwant %q", got, want)
			}
		})
	}
}
