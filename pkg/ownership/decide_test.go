package ownership

import (
	"strings"
	"testing"
	"time"
)

var (
	// back is self's earlier incarnation: same namespace and name.
	back      = Owner{Cluster: "c-1", Namespace: "team-a", Name: "web01", UID: "u-0"}
	squatter  = Owner{Cluster: "c-1", Namespace: "team-z", Name: "web01", UID: "u-9"}
	restored  = Owner{Cluster: "c-1", Namespace: "team-b", Name: "web01", UID: "u-2b"}
	ahead     = Rivals{Ahead: &squatter, Others: []Owner{squatter}}
	lostAt    = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	lostOther = Claim{Holder: HolderOther, Other: sibling, Lost: lostAt}
	returning = Rivals{Others: []Owner{restored}}
)

func TestDecideEntity(t *testing.T) {
	other := Claim{Holder: HolderOther, Other: sibling}
	tests := []struct {
		name   string
		f      EntityFacts
		want   Decision
		reason Reason
		why    string
	}{
		{name: "absent: create with the marker", f: EntityFacts{Claim: Claim{Holder: HolderNone}}, want: Create},
		{name: "absent, another claimant comes first", f: EntityFacts{Name: "e", Rivals: ahead}, want: Refuse, reason: ReasonDuplicate, why: "team-z/web01 claims the minion ID first"},
		{name: "ours", f: EntityFacts{Claim: Claim{Holder: HolderSelf}}, want: Keep},
		{name: "ours, whoever comes first in the cluster", f: EntityFacts{Claim: Claim{Holder: HolderSelf}, Rivals: ahead}, want: Keep},
		{name: "our earlier incarnation's (a restore): taken, credentials kept", f: EntityFacts{Claim: Claim{Holder: HolderSelf, Previous: true, Other: back}, Rivals: ahead}, want: Take},
		{name: "unmarked: a Salt master's, a login's, an administrator's", f: EntityFacts{Name: "e", Claim: Claim{Holder: HolderUnmarked}}, want: Refuse, reason: ReasonNotOwned, why: "adoptMinions"},
		{name: "unmarked, the template adopts", f: EntityFacts{Claim: Claim{Holder: HolderUnmarked}, Adopt: true}, want: Take},
		{name: "unmarked, adopted, but another claimant comes first", f: EntityFacts{Claim: Claim{Holder: HolderUnmarked}, Adopt: true, Rivals: ahead}, want: Refuse, reason: ReasonDuplicate},
		{name: "unmarked, the previous release's (status has its ID)", f: EntityFacts{Claim: Claim{Holder: HolderUnmarked}, ProvenByStatus: true}, want: Take},
		{name: "marker wiped (metadata replaced), our role linked to it", f: EntityFacts{Claim: Claim{Holder: HolderUnmarked}, LinkedRole: true}, want: Take},
		{name: "marker edited, our role linked to it", f: EntityFacts{Claim: Claim{Holder: HolderOther, Unnamed: UnnamedEdited}, LinkedRole: true}, want: Take},
		{name: "another binding, live", f: EntityFacts{Name: "e", Claim: other, Holder: HolderLive}, want: Refuse, reason: ReasonConflict, why: "team-b/web01"},
		{name: "another binding, live, our role linked to it anyway", f: EntityFacts{Claim: other, Holder: HolderLive, LinkedRole: true}, want: Refuse, reason: ReasonConflict},
		{name: "another binding, being deleted", f: EntityFacts{Claim: other, Holder: HolderDeleting}, want: Wait, reason: ReasonReleasing},
		{name: "another binding of this cluster, gone without its deletion: lost, kept for it (not marked yet)", f: EntityFacts{Name: "e", Claim: other, Holder: HolderGone, Window: time.Hour},
			want: Wait, reason: ReasonLost, why: "for 1h0m0s from when the operator records the loss"},
		{name: "lost, marked: kept until the window ends", f: EntityFacts{Name: "e", Claim: lostOther, Holder: HolderGone, Window: time.Hour},
			want: Wait, reason: ReasonLost, why: "since 2026-12-07T10:00:00Z: it is kept for that MinionBinding coming back under its name until 2026-12-07T11:00:00Z"},
		{name: "lost, and another claimant comes first", f: EntityFacts{Claim: lostOther, Holder: HolderGone, Rivals: ahead}, want: Refuse, reason: ReasonDuplicate},
		{name: "lost, its binding back under its name (a restore): taken with its credentials", f: EntityFacts{Claim: Claim{Holder: HolderSelf, Previous: true, Other: back, Lost: lostAt}, Rivals: ahead}, want: Take},
		{name: "gone, and created again under its name: it keeps the minion", f: EntityFacts{Claim: Claim{Holder: HolderOther, Other: Owner{Cluster: "c-1", Namespace: "team-b", Name: "web01", UID: "u-2"}}, Holder: HolderGone, Rivals: returning},
			want: Refuse, reason: ReasonDuplicate, why: "created again as MinionBinding team-b/web01 (uid u-2b)"},
		{name: "gone, but another claimant comes first", f: EntityFacts{Claim: other, Holder: HolderGone, Rivals: ahead}, want: Refuse, reason: ReasonDuplicate},
		{name: "gone, its objects retained for it (deletionPolicy Retain): kept for it", f: EntityFacts{Claim: Claim{Holder: HolderOther, Other: sibling, Retained: true}, Holder: HolderGone},
			want: Refuse, reason: ReasonRetained, why: "until a cluster administrator releases it"},
		{name: "retained for our earlier incarnation: taken back", f: EntityFacts{Claim: Claim{Holder: HolderSelf, Previous: true, Other: back, Retained: true}, Rivals: ahead}, want: Take},
		{name: "adoption never takes a marked entity", f: EntityFacts{Claim: other, Holder: HolderLive, Adopt: true}, want: Refuse, reason: ReasonConflict},
		{name: "status never takes a marked entity", f: EntityFacts{Claim: other, Holder: HolderLive, ProvenByStatus: true}, want: Refuse, reason: ReasonConflict},
		{name: "another cluster: nobody can tell it is gone", f: EntityFacts{Claim: Claim{Holder: HolderOther, Other: foreign}, Holder: HolderUnknown}, want: Refuse, reason: ReasonConflict, why: "cluster c-2"},
		{name: "an edited marker", f: EntityFacts{Claim: Claim{Holder: HolderOther, Unnamed: UnnamedEdited}, Adopt: true}, want: Refuse, reason: ReasonConflict, why: "cannot read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideEntity(tt.f)
			if got.Decision != tt.want || got.Reason != tt.reason || !strings.Contains(got.Why, tt.why) {
				t.Errorf("DecideEntity = %s %d %q, want %s %d containing %q", got.Decision, got.Reason, got.Why, tt.want, tt.reason, tt.why)
			}
		})
	}
}

func TestDecideRole(t *testing.T) {
	exists := func(f RoleFacts) RoleFacts {
		f.Exists, f.RoleID, f.Mount, f.Name = true, "rid", "salt-minions", "web01"
		if f.ID.Holder == HolderNone {
			f.ID.Holder = HolderUnmarked
		}
		return f
	}
	tests := []struct {
		name   string
		f      RoleFacts
		want   Decision
		reason Reason
		why    string
	}{
		{name: "absent: create, linked to the entity", f: RoleFacts{}, want: Create},
		{name: "its role ID proves it ours, nothing links it (alias deleted by hand)", f: exists(RoleFacts{ID: Claim{Holder: HolderSelf}}), want: Keep},
		{name: "its role ID proves it ours, another claimant comes first", f: exists(RoleFacts{ID: Claim{Holder: HolderSelf}, Rivals: ahead}), want: Keep},
		{name: "its role ID is another live binding's", f: exists(RoleFacts{ID: Claim{Holder: HolderOther, Other: sibling}, IDHolder: HolderLive, Alias: Claim{Holder: HolderSelf}}), want: Refuse, reason: ReasonConflict, why: "team-b/web01"},
		{name: "its role ID is another binding's, being deleted", f: exists(RoleFacts{ID: Claim{Holder: HolderOther, Other: sibling}, IDHolder: HolderDeleting}), want: Wait, reason: ReasonReleasing},
		{name: "its role ID is a gone binding's: lost, kept for it", f: exists(RoleFacts{ID: Claim{Holder: HolderOther, Unnamed: UnnamedGone}, IDHolder: HolderGone}), want: Wait, reason: ReasonLost, why: "no longer claims"},
		{name: "its role ID is another cluster's", f: exists(RoleFacts{ID: Claim{Holder: HolderOther, Unnamed: UnnamedForeign}, Adopt: true, SlotHeld: true}), want: Refuse, reason: ReasonConflict, why: "another Kubernetes cluster"},
		{name: "linked to the binding's entity", f: exists(RoleFacts{Alias: Claim{Holder: HolderSelf}}), want: Keep},
		{name: "linked to another binding's entity", f: exists(RoleFacts{Alias: Claim{Holder: HolderOther, Other: sibling}, Holder: HolderLive}), want: Refuse, reason: ReasonConflict, why: "team-b/web01"},
		{name: "linked to another cluster's", f: exists(RoleFacts{Alias: Claim{Holder: HolderOther, Other: foreign}, Adopt: true, SlotHeld: true}), want: Refuse, reason: ReasonConflict},
		{name: "linked to a binding being deleted", f: exists(RoleFacts{Alias: Claim{Holder: HolderOther, Other: sibling}, Holder: HolderDeleting}), want: Wait, reason: ReasonReleasing},
		{name: "linked to a binding that is gone", f: exists(RoleFacts{Alias: Claim{Holder: HolderOther, Other: sibling}, Holder: HolderGone}), want: Wait, reason: ReasonLost},
		{name: "linked to a binding that is gone, retained for it", f: exists(RoleFacts{Alias: Claim{Holder: HolderOther, Other: sibling, Retained: true}, Holder: HolderGone}), want: Refuse, reason: ReasonRetained},
		{name: "nobody's: made by hand, the binding never held it", f: exists(RoleFacts{}), want: Refuse, reason: ReasonNotOwned, why: "salt-minions/web01"},
		{name: "a login's entity, the binding never held it", f: exists(RoleFacts{Alias: Claim{Holder: HolderUnmarked}}), want: Refuse, reason: ReasonNotOwned},
		{name: "re-created by hand where the binding held it", f: exists(RoleFacts{SlotHeld: true}), want: Take},
		{name: "re-created, and a minion logged in before the operator", f: exists(RoleFacts{Alias: Claim{Holder: HolderUnmarked}, SlotHeld: true}), want: Take},
		{name: "the previous release's", f: exists(RoleFacts{ProvenByStatus: true}), want: Take},
		{name: "the template adopts", f: exists(RoleFacts{Adopt: true}), want: Take},
		{name: "the template adopts, another claimant comes first", f: exists(RoleFacts{Adopt: true, Rivals: ahead}), want: Refuse, reason: ReasonDuplicate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideRole(tt.f)
			if got.Decision != tt.want || got.Reason != tt.reason || !strings.Contains(got.Why, tt.why) {
				t.Errorf("DecideRole = %s %d %q, want %s %d containing %q", got.Decision, got.Reason, got.Why, tt.want, tt.reason, tt.why)
			}
		})
	}
}

func TestDeletable(t *testing.T) {
	tests := []struct {
		name           string
		c              Claim
		proven, linked bool
		want           bool
	}{
		{"ours", Claim{Holder: HolderSelf}, false, false, true},
		{"our earlier incarnation's", Claim{Holder: HolderSelf, Previous: true, Other: back}, false, false, true},
		{"the previous release's", Claim{Holder: HolderUnmarked}, true, false, true},
		{"marker wiped, our role linked to it", Claim{Holder: HolderUnmarked}, false, true, true},
		{"marker edited, our role linked to it", Claim{Holder: HolderOther, Unnamed: UnnamedEdited}, false, true, true},
		{"unmarked: an administrator's", Claim{Holder: HolderUnmarked}, false, false, false},
		{"another binding's", Claim{Holder: HolderOther, Other: sibling}, false, false, false},
		{"another binding's, whatever status or a role says", Claim{Holder: HolderOther, Other: sibling}, true, true, false},
		{"absent", Claim{Holder: HolderNone}, true, true, false},
	}
	for _, tt := range tests {
		if got := Deletable(tt.c, tt.proven, tt.linked); got != tt.want {
			t.Errorf("%s: Deletable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
