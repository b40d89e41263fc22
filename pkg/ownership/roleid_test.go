package ownership

import (
	"strings"
	"testing"
)

func TestRoleIDProvesItsOwner(t *testing.T) {
	place := RolePlace{Mount: "salt-minions", Role: "web01"}
	id := NewRoleID(self, place, [16]byte{1, 2, 3})
	if len(id) != roleIDLen || !strings.HasPrefix(id, "mv1-") {
		t.Fatalf("role ID %q", id)
	}
	if id == NewRoleID(self, place, [16]byte{1, 2, 4}) {
		t.Error("two random inputs made one role ID")
	}
	tests := []struct {
		name     string
		roleID   string
		cluster  string
		place    RolePlace
		owner    Owner
		byName   bool
		chosen   bool
		ofCluter bool
		forOwner bool
	}{
		{name: "its own", roleID: id, cluster: "c-1", place: place, owner: self, chosen: true, ofCluter: true, forOwner: true},
		{name: "mounts and role names as Vault stores them", roleID: id, cluster: "c-1", place: RolePlace{Mount: "/salt-minions/", Role: "WEB01"}, owner: self, chosen: true, ofCluter: true, forOwner: true},
		{name: "the same binding created again (another UID)", roleID: id, cluster: "c-1", place: place, owner: back, chosen: true, ofCluter: true, forOwner: true},
		{name: "another binding of the cluster", roleID: id, cluster: "c-1", place: place, owner: sibling, chosen: true, ofCluter: true},
		{name: "the same name in another cluster", roleID: id, cluster: "c-2", place: place, owner: Owner{Cluster: "c-2", Namespace: "team-a", Name: "web01"}, chosen: true},
		{name: "a plan knows no cluster: the name proves it", roleID: id, cluster: "this-cluster", place: place, owner: Owner{Cluster: "this-cluster", Namespace: "team-a", Name: "web01"}, byName: true, chosen: true, forOwner: true},
		{name: "copied to another role", roleID: id, cluster: "c-1", place: RolePlace{Mount: "salt-minions", Role: "db01"}, owner: self, chosen: true},
		{name: "copied to another mount", roleID: id, cluster: "c-1", place: RolePlace{Mount: "other", Role: "web01"}, owner: self, chosen: true},
		{name: "Vault's UUID (a Salt master, an administrator)", roleID: "0b5bd3c2-6c6e-4a50-9b1d-2f1b8c9f1e77", cluster: "c-1", place: place, owner: self},
		{name: "tampered tag", roleID: id[:len(id)-1] + flip(id[len(id)-1]), cluster: "c-1", place: place, owner: self, chosen: true, ofCluter: true},
		{name: "upper case hex", roleID: strings.ToUpper(id), cluster: "c-1", place: place, owner: self},
		{name: "cut short", roleID: id[:len(id)-1], cluster: "c-1", place: place, owner: self},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ProveRoleID(tt.roleID, tt.cluster, tt.place)
			if p.Chosen != tt.chosen || p.Cluster != tt.ofCluter || p.For(tt.owner, tt.byName) != tt.forOwner {
				t.Errorf("ProveRoleID(%q) = chosen %v, cluster %v, for %v", tt.roleID, p.Chosen, p.Cluster, p.For(tt.owner, tt.byName))
			}
		})
	}
}

func flip(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

func TestRoleClaim(t *testing.T) {
	place := RolePlace{Mount: "salt-minions", Role: "web01"}
	proof := func(o Owner) RoleIDProof { return ProveRoleID(NewRoleID(o, place, [16]byte{9}), "c-1", place) }
	tests := []struct {
		name       string
		p          RoleIDProof
		candidates []Owner
		want       Claim
	}{
		{name: "Vault's role ID", p: ProveRoleID("0b5bd3c2-6c6e-4a50-9b1d-2f1b8c9f1e77", "c-1", place), want: Claim{Holder: HolderUnmarked}},
		{name: "ours", p: proof(self), candidates: []Owner{sibling}, want: Claim{Holder: HolderSelf}},
		{name: "our earlier incarnation's", p: proof(back), want: Claim{Holder: HolderSelf}},
		{name: "a claimant's", p: proof(sibling), candidates: []Owner{squatter, sibling}, want: Claim{Holder: HolderOther, Other: sibling}},
		{name: "a binding that claims it no more", p: proof(sibling), candidates: []Owner{squatter}, want: Claim{Holder: HolderOther, Unnamed: UnnamedGone}},
		{name: "another cluster's", p: ProveRoleID(NewRoleID(foreign, place, [16]byte{9}), "c-1", place), candidates: []Owner{squatter}, want: Claim{Holder: HolderOther, Unnamed: UnnamedForeign}},
	}
	for _, tt := range tests {
		if got := RoleClaim(tt.p, self, false, tt.candidates); got != tt.want {
			t.Errorf("%s: RoleClaim = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func FuzzProveRoleID(f *testing.F) {
	place := RolePlace{Mount: "salt-minions", Role: "web01"}
	f.Add(NewRoleID(self, place, [16]byte{1}), "c-1")
	f.Add("mv1-", "c-1")
	f.Add("0b5bd3c2-6c6e-4a50-9b1d-2f1b8c9f1e77", "")
	f.Fuzz(func(t *testing.T, roleID, cluster string) {
		p := ProveRoleID(roleID, cluster, place)
		if p.For(self, false) && roleID != strings.ToLower(roleID) {
			t.Fatalf("%q proves itself in a form the operator never writes", roleID)
		}
	})
}
