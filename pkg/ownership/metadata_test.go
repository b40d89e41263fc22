package ownership

import (
	"maps"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/template"
)

func TestMetadata(t *testing.T) {
	kv := func(pairs ...string) []template.KV {
		var out []template.KV
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, template.KV{Key: pairs[i], Value: pairs[i+1]})
		}
		return out
	}
	mark := self.Marker()
	tests := []struct {
		name     string
		actual   map[string]string
		rendered []template.KV
		want     map[string]string
	}{
		{name: "new entity", rendered: kv("roles", "db,web", "roles__0", "db", "roles__1", "web"),
			want: map[string]string{"roles": "db,web", "roles__0": "db", "roles__1": "web", MarkerKey: mark, KeysKey: "roles"}},
		{name: "someone else's key is kept", actual: map[string]string{"owner": "ops", "roles": "x", KeysKey: "roles", MarkerKey: mark},
			rendered: kv("roles", "web", "roles__0", "web"),
			want:     map[string]string{"owner": "ops", "roles": "web", "roles__0": "web", MarkerKey: mark, KeysKey: "roles"}},
		{name: "a list that shrank drops its companions", actual: map[string]string{"roles": "db,web", "roles__0": "db", "roles__1": "web", KeysKey: "roles", MarkerKey: mark},
			rendered: kv("roles", "web", "roles__0", "web"),
			want:     map[string]string{"roles": "web", "roles__0": "web", MarkerKey: mark, KeysKey: "roles"}},
		{name: "a key the template stopped rendering is dropped (it is in the list)", actual: map[string]string{"env": "prod", "roles": "web", KeysKey: "env,roles", MarkerKey: mark},
			rendered: kv("roles", "web"),
			want:     map[string]string{"roles": "web", MarkerKey: mark, KeysKey: "roles"}},
		{name: "adopted: no list yet, foreign keys kept, marker added", actual: map[string]string{"env": "prod", "roles": "x"},
			rendered: kv("roles", "web"),
			want:     map[string]string{"env": "prod", "roles": "web", MarkerKey: mark, KeysKey: "roles"}},
		{name: "a forged marker or list is replaced", actual: map[string]string{MarkerKey: "cluster=x binding=a/b uid=c", "minionvault-other": "1"},
			rendered: nil,
			want:     map[string]string{MarkerKey: mark}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Metadata(tt.actual, tt.rendered, self)
			if err != nil || !maps.Equal(got, tt.want) {
				t.Errorf("Metadata = %v, %v\nwant %v", got, err, tt.want)
			}
		})
	}
}

// The cases the operator's metadata rules had before the owner marker:
// the keys rendered before now come from KeysKey in Vault.
func TestMetadataKeepsTheEarlierRules(t *testing.T) {
	rendered := []template.KV{{Key: "minion-id", Value: "web01"}, {Key: "roles", Value: "db,web"}, {Key: "roles__0", Value: "db"}, {Key: "roles__1", Value: "web"}}
	ours := func(m map[string]string) map[string]string {
		out := maps.Clone(m)
		out[MarkerKey], out[KeysKey] = self.Marker(), "minion-id,roles"
		return out
	}
	cases := []struct {
		name         string
		actual, want map[string]string
	}{
		{"new entity", nil, ours(map[string]string{"minion-id": "web01", "roles": "db,web", "roles__0": "db", "roles__1": "web"})},
		{"foreign keys kept", map[string]string{"owner": "team-a", "roles": "old"},
			ours(map[string]string{"owner": "team-a", "minion-id": "web01", "roles": "db,web", "roles__0": "db", "roles__1": "web"})},
		{"stale index keys removed", map[string]string{"roles__2": "cache", "roles__3": "x", "roles": "cache,db,web"},
			ours(map[string]string{"minion-id": "web01", "roles": "db,web", "roles__0": "db", "roles__1": "web"})},
		{"keys no longer configured removed", map[string]string{"env": "prod", "team": "t", KeysKey: "env"},
			ours(map[string]string{"team": "t", "minion-id": "web01", "roles": "db,web", "roles__0": "db", "roles__1": "web"})},
		{"lookalike foreign key kept", map[string]string{"rolesX__0": "keep"},
			ours(map[string]string{"rolesX__0": "keep", "minion-id": "web01", "roles": "db,web", "roles__0": "db", "roles__1": "web"})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Metadata(c.actual, rendered, self)
			if err != nil || !maps.Equal(got, c.want) {
				t.Fatalf("got %v, %v\nwant %v", got, err, c.want)
			}
		})
	}
}
