package audit

import "testing"

func TestPillarReadPath(t *testing.T) {
	cases := []struct {
		pillar   string
		versions map[string]int
		want     string
	}{
		{"salt/minions/web01", nil, "salt/data/minions/web01"},
		{"salt/data/minions/web01", nil, "salt/data/minions/web01"}, // _v2_the_path leaves it
		{"/salt/minions/web01/", nil, "salt/data/minions/web01"},
		{"salt/metadata/minions/web01", nil, "salt/data/minions/web01"}, // _v2_the_path flips metadata/ to data/
		{"salt/data", nil, "salt/data"},
		{"salt/metadata", nil, "salt/data"},
		{"salt/database/x", nil, "salt/data/database/x"}, // "database" is not "data/"
		{"salt/minions/web01", map[string]int{"salt": 1}, "salt/minions/web01"},
		{"kv/team/a/minions/web01", map[string]int{"kv/team": 2}, "kv/team/data/a/minions/web01"},
		{"kv/team/a/x", map[string]int{"kv": 1, "kv/team": 2}, "kv/team/data/a/x"}, // the longest mount
	}
	for _, c := range cases {
		if got := pillarReadPath(c.pillar, c.versions); got != c.want {
			t.Errorf("pillarReadPath(%q, %v) = %q, want %q", c.pillar, c.versions, got, c.want)
		}
	}
}
