package ownership

import (
	"strings"
	"testing"
)

var (
	self    = Owner{Cluster: "c-1", Namespace: "team-a", Name: "web01", UID: "u-1"}
	sibling = Owner{Cluster: "c-1", Namespace: "team-b", Name: "web01", UID: "u-2"}
	foreign = Owner{Cluster: "c-2", Namespace: "team-a", Name: "web01", UID: "u-3"}
)

func TestMarkerRoundTrip(t *testing.T) {
	for _, o := range []Owner{self, sibling, foreign} {
		got, ok := ParseMarker(o.Marker())
		if !ok || got != o {
			t.Errorf("ParseMarker(%q) = %+v, %v", o.Marker(), got, ok)
		}
		if len(o.Marker()) > MaxKeysLen {
			t.Errorf("marker %q is longer than a metadata value", o.Marker())
		}
	}
	longest := Owner{Cluster: strings.Repeat("c", 128), Namespace: strings.Repeat("n", 63), Name: strings.Repeat("m", 253), UID: "0b5bd3c2-6c6e-4a50-9b1d-2f1b8c9f1e77"}
	if n := len(longest.Marker()); n > MaxKeysLen {
		t.Errorf("the longest marker is %d characters, Vault keeps %d", n, MaxKeysLen)
	}
}

func TestParseMarkerRefusesWhatTheOperatorDoesNotWrite(t *testing.T) {
	for _, s := range []string{
		"",
		"ops",
		"cluster=c-1 binding=team-a/web01",
		"cluster=c-1 binding=team-a/web01 uid=u-1 extra=1",
		"cluster=c-1 binding=team-a uid=u-1",
		"cluster=c-1 binding=/web01 uid=u-1",
		"cluster= binding=team-a/web01 uid=u-1",
		"cluster=c 1 binding=team-a/web01 uid=u-1",
		"cluster=c/1 binding=team-a/web01 uid=u-1",
		"cluster=c-1 cluster=c-1 uid=u-1",
		"owner=c-1 binding=team-a/web01 uid=u-1",
	} {
		if o, ok := ParseMarker(s); ok {
			t.Errorf("ParseMarker(%q) = %+v, want refused", s, o)
		}
	}
}

func TestClaimOf(t *testing.T) {
	tests := []struct {
		name     string
		exists   bool
		md       map[string]string
		want     Holder
		other    Owner
		previous bool
		retained bool
	}{
		{name: "absent", want: HolderNone},
		{name: "no metadata", exists: true, want: HolderUnmarked},
		{name: "someone's keys, no marker", exists: true, md: map[string]string{"roles": "web"}, want: HolderUnmarked},
		{name: "ours", exists: true, md: map[string]string{MarkerKey: self.Marker()}, want: HolderSelf},
		{name: "same name and namespace, another UID: the binding created again (a restore)", exists: true,
			md: map[string]string{MarkerKey: Owner{Cluster: "c-1", Namespace: "team-a", Name: "web01", UID: "u-old"}.Marker()}, want: HolderSelf,
			other: Owner{Cluster: "c-1", Namespace: "team-a", Name: "web01", UID: "u-old"}, previous: true},
		{name: "same name and namespace in another cluster", exists: true,
			md: map[string]string{MarkerKey: Owner{Cluster: "c-2", Namespace: "team-a", Name: "web01", UID: "u-old"}.Marker()}, want: HolderOther,
			other: Owner{Cluster: "c-2", Namespace: "team-a", Name: "web01", UID: "u-old"}},
		{name: "another binding of this cluster", exists: true, md: map[string]string{MarkerKey: sibling.Marker()}, want: HolderOther, other: sibling},
		{name: "another cluster, same UID by chance", exists: true,
			md: map[string]string{MarkerKey: Owner{Cluster: "c-2", Namespace: "team-a", Name: "web01", UID: "u-1"}.Marker()}, want: HolderOther,
			other: Owner{Cluster: "c-2", Namespace: "team-a", Name: "web01", UID: "u-1"}},
		{name: "an edited marker is nobody's we know, never ours", exists: true, md: map[string]string{MarkerKey: "mine now"}, want: HolderOther},
		{name: "retained for another binding", exists: true, md: map[string]string{MarkerKey: sibling.Marker(), RetainedKey: "2026-12-05T10:00:00Z"}, want: HolderOther, other: sibling, retained: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ClaimOf(tt.exists, tt.md, self)
			if c.Holder != tt.want || c.Other != tt.other || c.Previous != tt.previous || c.Retained != tt.retained {
				t.Errorf("ClaimOf = %+v (%s), want %s %+v", c, c.Describe(), tt.want, tt.other)
			}
		})
	}
}

func FuzzParseMarker(f *testing.F) {
	f.Add(self.Marker())
	f.Add("cluster=a binding=b/c uid=d")
	f.Add("cluster== binding==/= uid==")
	f.Fuzz(func(t *testing.T, s string) {
		o, ok := ParseMarker(s)
		if !ok {
			return
		}
		// What parses is what the operator writes, and reads back the same.
		if again, ok := ParseMarker(o.Marker()); !ok || again != o {
			t.Fatalf("%q parsed as %+v, which writes %q and reads back as %+v, %v", s, o, o.Marker(), again, ok)
		}
	})
}
