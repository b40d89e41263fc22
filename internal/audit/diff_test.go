package audit

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/testsamples"
	"github.com/minionvault/minion-vault-operator/pkg/template"
)

// audit diff prepares each minion only while it compares it, from the
// rendered parts it kept (one copy for both sides where they render
// alike): the report is the one of fleets prepared in full, as who-can
// loads them.
func TestAuditDiffUnpreparedSameAsPrepared(t *testing.T) {
	dir := t.TempDir()
	base, head := filepath.Join(dir, "base"), filepath.Join(dir, "head")
	testsamples.WriteFleet(t, base, 300, false)
	testsamples.WriteFleet(t, head, 300, true)
	o := Options{VaultVersion: "1.21.4", Accessor: "auth_approle_offline"}
	load := func(path string) *Fleet {
		t.Helper()
		f, err := Load([]string{path}, o)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	full := Diff(load(base), load(head), []string{"salt/data/env/prod"})
	bf, hf, err := LoadDiff([]string{base}, []string{head}, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range hf.minions {
		if m.prep != nil || m.unprepared == nil || m.subject.Entity != nil {
			t.Fatalf("minion %s: prepared or with a subject", m.id)
		}
		if bf.byID[m.id].unprepared != m.unprepared {
			t.Fatalf("minion %s: a copy per side", m.id)
		}
	}
	lean := Diff(bf, hf, []string{"salt/data/env/prod"})
	if !reflect.DeepEqual(lean, full) {
		t.Fatalf("unprepared %+v, prepared %+v", lean.Summary, full.Summary)
	}
	if full.Summary.Minions != 300 || full.Summary.Gaining != 300 || len(full.Warnings) == 0 {
		t.Fatalf("%+v %q", full.Summary, full.Warnings)
	}
	// m00001 has the roles db and web: the templated rules of
	// saltstack/minions render its metadata roles__0 and roles__1.
	gain := func(role string) PathChange {
		return PathChange{Path: "salt/data/roles/" + role, Base: []string{"list", "read"}, Head: []string{"list", "read", "update"},
			Gained: []string{"update"}, Why: "salt_role_" + role + ",saltstack/minions salt/data/roles/" + role + " (exact match)"}
	}
	want := MinionDiff{Minion: "m00001", Role: "m00001", Roles: []string{"db", "web"}, Changes: []PathChange{gain("db"), gain("web")}}
	if got := lean.Minions[1]; !reflect.DeepEqual(got, want) {
		t.Fatalf("m00001: %+v, want %+v", got, want)
	}
}

// The diff's JSON, written one minion at a time, is json.MarshalIndent's
// text: with and without minions, warnings, nil and empty lists.
func TestWriteDiffJSON(t *testing.T) {
	one := MinionDiff{Minion: "web01", Role: "web01", Changes: []PathChange{{Path: "a/b", Base: []string{"deny"}, Head: []string{"read"},
		Gained: []string{"read"}, Why: "p a/b (exact match)"}}}
	removed := MinionDiff{Minion: "db01", Role: "db01", Status: "removed", Changes: []PathChange{}}
	for _, r := range []DiffReport{
		{Minions: []MinionDiff{}},
		{Summary: DiffSummary{Minions: 2, Gaining: 1, Paths: 7}, Minions: []MinionDiff{one, removed}, Warnings: []string{"head: \"x\" <&>"}},
		{Minions: nil, Warnings: []string{}},
	} {
		want, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := Write(&got, "json", r); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want)+"\n" {
			t.Errorf("got\n%s\nwant\n%s", got.String(), want)
		}
	}
}

// A binding's parts are shared only where both sides render them alike,
// and the second side lets go of them.
func TestSharedMinions(t *testing.T) {
	s := newSharedMinions(2)
	b := &v1alpha1.MinionBinding{}
	md := []template.KV{{Key: "roles", Value: "web"}}
	first := &unpreparedMinion{tokenPolicies: []string{"default", "p"}, entityName: "e", entityMD: md}
	alike := &unpreparedMinion{tokenPolicies: []string{"default", "p"}, entityName: "e", entityMD: slices.Clone(md)}
	other := &unpreparedMinion{tokenPolicies: []string{"default", "p"}, entityName: "e", entityMD: []template.KV{{Key: "roles", Value: "db"}}}
	if s.share(b, "t", first) != first || s.share(b, "t", alike) != first {
		t.Fatal("alike parts are not shared")
	}
	if _, held := s.m.Load(sharedKey{b, "t"}); held {
		t.Fatal("held after the last reader")
	}
	if s.share(b, "u", first) != first || s.share(b, "u", other) != other {
		t.Fatal("different parts are shared")
	}
}
