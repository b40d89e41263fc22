//go:build integration

package harness

import (
	"slices"
	"testing"
	"time"
)

func TestFailoverCounts(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	calls := []vaultCall{
		{At: at(-1), Class: "entity", Path: "identity/entity/name/salt_minion_m00001"},              // before the takeover
		{At: at(1), Class: "role", Path: "auth/salt-minions/role/m00001"},                           // minute 0
		{At: at(2), Class: "role/role-id", Path: "auth/salt-minions/role/m00001/role-id"},           // minute 0
		{At: at(3), Class: "policy", Path: "sys/policies/acl/bench_minion_m00001"},                  // minute 0
		{At: at(61), Class: "token", Path: "auth/token/lookup-self"},                                // minute 1
		{At: at(62), Class: "entity", Write: true, Path: "identity/entity/name/salt_minion_m00050"}, // the changed binding
		{At: at(63), Class: "role", Write: true, Path: "auth/salt-minions/role/m00002"},
		{At: at(64), Class: "token", Write: true, Path: "auth/token/renew-self"},
		{At: at(125), Class: "entity", Path: "identity/entity/name/salt_minion_m00003"}, // past the watch
	}
	got := readsPerMinute(calls, t0, 2)
	want := []minuteReads{{Bindings: 2, Policies: 1}, {Upkeep: 1}}
	if !slices.Equal(got, want) {
		t.Errorf("readsPerMinute = %+v, want %+v", got, want)
	}
	n, kinds, upkeep := writesExcept(calls, "m00050")
	if n != 1 || kinds["role W"] != 1 || upkeep != 1 {
		t.Errorf("writesExcept = %d %v %d, want 1 map[role W:1] 1", n, kinds, upkeep)
	}
	f := &failoverResult{Minutes: got, Steady: 1}
	if r := f.maxRatio(); r != 2 {
		t.Errorf("maxRatio = %v, want 2", r)
	}
	r := rolloutOf(append(calls, vaultCall{At: at(10), Class: "entity", Write: true}), "entity", t0)
	if r.Writes != 2 || r.First != 10*time.Second || r.Last != 62*time.Second {
		t.Errorf("rolloutOf = %+v, want 2 writes, first 10s, last 62s", r)
	}
}

// TestCallsFor: the changed binding's calls after the patch, in order,
// with their time from it; other minions' and earlier calls left out.
func TestCallsFor(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	calls := []vaultCall{
		{At: t0.Add(-time.Second), Class: "role", Path: "auth/approle/role/m02500"},
		{At: t0.Add(700 * time.Millisecond), Class: "role", Path: "auth/approle/role/m02500"},
		{At: t0.Add(710 * time.Millisecond), Class: "role", Path: "auth/approle/role/m02501"},
		{At: t0.Add(1900 * time.Millisecond), Class: "entity", Write: true, Path: "identity/entity/name/bench_minion_m02500"},
	}
	got := callsFor(calls, "m02500", t0)
	want := []string{"R auth/approle/role/m02500 +700ms", "W identity/entity/name/bench_minion_m02500 +1.9s"}
	if !slices.Equal(got, want) {
		t.Errorf("callsFor: %q, want %q", got, want)
	}
}
