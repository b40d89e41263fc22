package ownership

import (
	"errors"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name, raw string
		want      int
		err       string
	}{
		{name: "none", raw: ""},
		{name: "this release", raw: `[{"vault":"v1","connection":"a","mount":"m","entity":"e","deletionPolicy":"Retain"}]`, want: 1},
		{name: "the previous release (no vault)", raw: `[{"connection":"a","mount":"m","entity":"e"}]`, want: 1},
		{name: "garbage", raw: `role web01`, err: "not a JSON list"},
		{name: "an object", raw: `{"connection":"a"}`, err: "not a JSON list"},
		{name: "no mount", raw: `[{"connection":"a","entity":"e"}]`, err: "every entry needs"},
		{name: "neither vault nor connection", raw: `[{"mount":"m","entity":"e"}]`, err: "every entry needs"},
		{name: "too many", raw: "[" + strings.Repeat(`{"vault":"v","mount":"m","entity":"e"},`, MaxPlacements) + `{"vault":"v","mount":"m","entity":"e"}]`, err: "placements, at most"},
		{name: "an entity named ..", raw: `[{"vault":"v","mount":"m","entity":".."}]`, err: "cannot name an object"},
		{name: "an entity path", raw: `[{"vault":"v","mount":"m","entity":"a/b"}]`, err: "cannot name an object"},
		{name: "a mount that climbs", raw: `[{"vault":"v","mount":"m/../sys","entity":"e"}]`, err: "cannot name an object"},
		{name: "a control character", raw: `[{"vault":"v","mount":"m","entity":"e\u0000"}]`, err: "cannot name an object"},
		{name: "a nested mount", raw: `[{"vault":"v","mount":"/team/salt-minions/","entity":"e"}]`, want: 1},
		{name: "200 KB", raw: `[{"vault":"v","mount":"m","entity":"` + strings.Repeat("e", 200<<10) + `"}]`, err: "bytes, at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := Decode(tt.raw)
			if tt.err != "" {
				if err == nil || !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || len(inv) != tt.want {
				t.Fatalf("Decode = %v, %v; want %d entries", inv, err, tt.want)
			}
		})
	}
}

func TestPlacementIdentity(t *testing.T) {
	p := Placement{Vault: "v1", Connection: "a", Mount: "salt-minions", Entity: "salt_minion_web01"}
	tests := []struct {
		name                 string
		q                    Placement
		sameRole, sameEntity bool
	}{
		{"another connection to the same Vault", Placement{Vault: "v1", Connection: "b", Mount: "salt-minions", Entity: "salt_minion_web01"}, true, true},
		{"entity names are case-insensitive, mounts cleaned", Placement{Vault: "v1", Connection: "a", Mount: "/salt-minions/", Entity: "Salt_Minion_Web01"}, true, true},
		{"another Vault namespace", Placement{Vault: "v1/team", Connection: "a", Mount: "salt-minions", Entity: "salt_minion_web01"}, false, false},
		{"another mount", Placement{Vault: "v1", Connection: "a", Mount: "m2", Entity: "salt_minion_web01"}, false, true},
		{"another entity", Placement{Vault: "v1", Connection: "a", Mount: "salt-minions", Entity: "e2"}, true, false},
		{"an old record whose Vault is unknown", Placement{Connection: "a", Mount: "salt-minions", Entity: "salt_minion_web01"}, false, false},
	}
	for _, tt := range tests {
		if got := p.SameRole(tt.q); got != tt.sameRole {
			t.Errorf("%s: SameRole = %v", tt.name, got)
		}
		if got := p.SameEntity(tt.q); got != tt.sameEntity {
			t.Errorf("%s: SameEntity = %v", tt.name, got)
		}
	}
	if VaultKey("c", "/admin/salt/") != "c/admin/salt" || VaultKey("c", "") != "c" {
		t.Error("VaultKey")
	}
}

func TestInventoryMergeStaleWithout(t *testing.T) {
	a := Placement{Vault: "v1", Connection: "a", Mount: "m1", Entity: "e", DeletionPolicy: "Delete"}
	b := Placement{Vault: "v1", Connection: "a", Mount: "m2", Entity: "e", DeletionPolicy: "Delete"}
	viaB := a
	viaB.Connection = "b"

	inv := Inventory{a}
	if !inv.Has(a) || inv.Has(viaB) || inv.Has(b) {
		t.Fatal("Has")
	}
	// A switch of connection to the same Vault: the same placement, now
	// reached through b; nothing is stale.
	inv = inv.Merge(viaB)
	if len(inv) != 1 || inv[0].Connection != "b" || len(inv.Stale(&viaB)) != 0 {
		t.Fatalf("merge of the same placement: %+v", inv)
	}
	// A switch of mount: the old placement is stale until removed.
	inv = inv.Merge(b)
	stale := inv.Stale(&b)
	if len(stale) != 1 || !stale[0].Same(a) {
		t.Fatalf("stale %+v", stale)
	}
	if got := inv.Without(stale); len(got) != 1 || !got[0].Same(b) {
		t.Fatalf("without %+v", got)
	}
	if len(inv.Stale(nil)) != 2 {
		t.Fatal("deletion: everything is stale")
	}
	round, err := Decode(inv.Encode())
	if err != nil || len(round) != 2 || round[1] != b {
		t.Fatalf("round trip %+v %v", round, err)
	}
	if (Inventory{}).Encode() != "" {
		t.Fatal("an empty inventory is no annotation")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(`[{"vault":"v1","connection":"a","mount":"m","entity":"e"}]`)
	f.Add(`[{"connection":"a","mount":"m","entity":"e","deletionPolicy":"Retain"}]`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		inv, err := Decode(raw)
		if err != nil {
			return
		}
		again, err := Decode(inv.Encode())
		if err != nil || len(again) != len(inv) {
			t.Fatalf("%q decodes to %+v, which does not survive a round trip: %+v %v", raw, inv, again, err)
		}
	})
}
