package ownership

import (
	"strings"
	"testing"
)

func TestDecideEntity(t *testing.T) {
	other := Claim{Holder: HolderOther, Other: sibling}
	tests := []struct {
		name string
		f    EntityFacts
		want Decision
		why  string
	}{
		{name: "absent: create with the marker", f: EntityFacts{Claim: Claim{Holder: HolderNone}}, want: Create},
		{name: "ours", f: EntityFacts{Claim: Claim{Holder: HolderSelf}}, want: Keep},
		{name: "unmarked: a Salt master's, a login's, an administrator's", f: EntityFacts{Name: "e", Claim: Claim{Holder: HolderUnmarked}}, want: Refuse, why: "adoptMinions"},
		{name: "unmarked, the template adopts", f: EntityFacts{Claim: Claim{Holder: HolderUnmarked}, Adopt: true}, want: Take},
		{name: "unmarked, the previous release's (status has its ID)", f: EntityFacts{Claim: Claim{Holder: HolderUnmarked}, ProvenByStatus: true}, want: Take},
		{name: "another binding, live", f: EntityFacts{Name: "e", Claim: other, Holder: HolderLive}, want: Refuse, why: "team-b/web01"},
		{name: "another binding, being deleted", f: EntityFacts{Claim: other, Holder: HolderDeleting}, want: Wait},
		{name: "another binding of this cluster, gone", f: EntityFacts{Claim: other, Holder: HolderGone}, want: Take},
		{name: "adoption never takes a marked entity", f: EntityFacts{Claim: other, Holder: HolderLive, Adopt: true}, want: Refuse},
		{name: "status never takes a marked entity", f: EntityFacts{Claim: other, Holder: HolderLive, ProvenByStatus: true}, want: Refuse},
		{name: "another cluster: nobody can tell it is gone", f: EntityFacts{Claim: Claim{Holder: HolderOther, Other: foreign}, Holder: HolderUnknown}, want: Refuse, why: "cluster c-2"},
		{name: "an edited marker", f: EntityFacts{Claim: Claim{Holder: HolderOther}, Adopt: true}, want: Refuse, why: "cannot read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := DecideEntity(tt.f)
			if got != tt.want || !strings.Contains(why, tt.why) {
				t.Errorf("DecideEntity = %s %q, want %s containing %q", got, why, tt.want, tt.why)
			}
		})
	}
}

func TestDecideRole(t *testing.T) {
	exists := func(f RoleFacts) RoleFacts {
		f.Exists, f.RoleID, f.Mount, f.Name = true, "rid", "salt-minions", "web01"
		return f
	}
	tests := []struct {
		name string
		f    RoleFacts
		want Decision
		why  string
	}{
		{name: "absent: create, linked to the entity", f: RoleFacts{}, want: Create},
		{name: "linked to the binding's entity", f: exists(RoleFacts{Alias: Claim{Holder: HolderSelf}}), want: Keep},
		{name: "linked to another binding's entity", f: exists(RoleFacts{Alias: Claim{Holder: HolderOther, Other: sibling}, Holder: HolderLive}), want: Refuse, why: "team-b/web01"},
		{name: "linked to another cluster's", f: exists(RoleFacts{Alias: Claim{Holder: HolderOther, Other: foreign}, Adopt: true, SlotHeld: true}), want: Refuse},
		{name: "linked to a binding being deleted", f: exists(RoleFacts{Alias: Claim{Holder: HolderOther, Other: sibling}, Holder: HolderDeleting}), want: Wait},
		{name: "linked to a binding that is gone", f: exists(RoleFacts{Alias: Claim{Holder: HolderOther, Other: sibling}, Holder: HolderGone}), want: Take},
		{name: "nobody's: made by hand, the binding never held it", f: exists(RoleFacts{}), want: Refuse, why: "salt-minions/web01"},
		{name: "a login's entity, the binding never held it", f: exists(RoleFacts{Alias: Claim{Holder: HolderUnmarked}}), want: Refuse},
		{name: "re-created by hand where the binding held it", f: exists(RoleFacts{SlotHeld: true}), want: Take},
		{name: "re-created, and a minion logged in before the operator", f: exists(RoleFacts{Alias: Claim{Holder: HolderUnmarked}, SlotHeld: true}), want: Take},
		{name: "the previous release's", f: exists(RoleFacts{ProvenByStatus: true}), want: Take},
		{name: "the template adopts", f: exists(RoleFacts{Adopt: true}), want: Take},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := DecideRole(tt.f)
			if got != tt.want || !strings.Contains(why, tt.why) {
				t.Errorf("DecideRole = %s %q, want %s containing %q", got, why, tt.want, tt.why)
			}
		})
	}
}

func TestDeletable(t *testing.T) {
	tests := []struct {
		name   string
		c      Claim
		proven bool
		want   bool
	}{
		{"ours", Claim{Holder: HolderSelf}, false, true},
		{"the previous release's", Claim{Holder: HolderUnmarked}, true, true},
		{"unmarked: an administrator's", Claim{Holder: HolderUnmarked}, false, false},
		{"another binding's", Claim{Holder: HolderOther, Other: sibling}, false, false},
		{"another binding's, whatever status says", Claim{Holder: HolderOther, Other: sibling}, true, false},
		{"absent", Claim{Holder: HolderNone}, true, false},
	}
	for _, tt := range tests {
		if got := Deletable(tt.c, tt.proven); got != tt.want {
			t.Errorf("%s: Deletable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
