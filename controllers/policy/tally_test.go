package policy

import (
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/internal/admission"
)

// talliesByWalk counts what templateSummary shows by walking every name,
// as the summary did before it kept tallies: the reference the tallies
// must equal after any change.
func talliesByWalk(tp *templatePolicies) (missing, stale int, conflicts []string) {
	for _, name := range slices.Sorted(maps.Keys(tp.refs)) {
		ref := tp.refs[name]
		body, ok, conflict := ref.desired()
		if conflict {
			var from []string
			for _, b := range slices.Sorted(maps.Keys(ref.bodies)) {
				from = append(from, ref.from[b].String())
			}
			conflicts = append(conflicts, admission.PolicyConflict(name, from...).Message)
		}
		if got, owned := tp.owned[name]; ok && !tp.notOwned[name] && (!owned || got != body) {
			missing++
		}
	}
	for name := range tp.owned {
		if ref := tp.refs[name]; ref == nil {
			stale++
		} else if _, ok, _ := ref.desired(); !ok {
			stale++
		}
	}
	return missing, stale, conflicts
}

// The status's counts, kept one name at a time, equal a walk of every
// name after each of a long random run of the index's changes: binding
// deltas (new, changed, conflicting, gone), syncs that write, delete, find
// a name absent or someone else's, discoveries, head starts and full
// scans, in any order.
func TestTalliesFollowEveryChange(t *testing.T) {
	names := []string{"p1", "p2", "p3", "shared", "gone"}
	bodies := []string{"A", "B"}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 34))
		x := newPolicyIndex()
		x.rebuild("t", nil, nil, true)
		randomDocs := func() bindingPolicies {
			d := policiesOf()
			for _, n := range names {
				if rng.IntN(3) == 0 {
					d.docs[n] = bodies[rng.IntN(len(bodies))]
				}
			}
			d.member = rng.IntN(5) != 0
			return d
		}
		var ops []string
		for step := range 300 {
			key := saltKey(fmt.Sprintf("b%d", rng.IntN(6)))
			switch op := rng.IntN(7); op {
			case 0, 1:
				ops = append(ops, "set "+key.Name)
				x.set(key, randomDocs())
			case 2:
				ops = append(ops, "gone "+key.Name)
				x.set(key, bindingPolicies{})
			case 3:
				// A sync of what is claimed: each name owned (written or
				// kept), deleted, absent, someone else's, or failed.
				w := x.claim("t")
				var pass policyPass
				for _, n := range w.names() {
					switch rng.IntN(5) {
					case 0:
						pass.owned = append(pass.owned, n)
					case 1:
						pass.deleted = append(pass.deleted, n)
					case 2:
						pass.absent = append(pass.absent, n)
					case 3:
						pass.notOwned = append(pass.notOwned, n)
					}
				}
				ops = append(ops, fmt.Sprintf("settle %+v", pass))
				x.settle("t", w, pass)
			case 4:
				found := []string{names[rng.IntN(len(names))]}
				ops = append(ops, fmt.Sprintf("discovered %q", found))
				x.discoveredOwned("t", found)
			case 5:
				ops = append(ops, "head start "+key.Name)
				x.headStart("t", key, randomDocs().docs)
			case 6:
				scanned := map[types.NamespacedName]bindingPolicies{}
				for i := range rng.IntN(5) {
					scanned[saltKey(fmt.Sprintf("b%d", i))] = randomDocs()
				}
				ops = append(ops, fmt.Sprintf("scan of %d", len(scanned)))
				x.rebuild("t", nil, scanned, rng.IntN(2) == 0)
			}
			s := x.summary("t")
			missing, stale, conflicts := talliesByWalk(x.templates["t"])
			if s.missing != missing || s.stale != stale || !slices.Equal(s.conflicts, conflicts) {
				t.Fatalf("seed %d, step %d (%s): missing %d, stale %d, conflicts %q; a walk of every name: %d, %d, %q\nsteps: %q",
					seed, step, ops[len(ops)-1], s.missing, s.stale, s.conflicts, missing, stale, conflicts, ops)
			}
		}
	}
}

// A presumption owns every wanted name at once: nothing is missing after.
func TestTalliesAfterAPresumption(t *testing.T) {
	x := newPolicyIndex()
	x.rebuild("t", nil, ownAndShared(), true)
	wanted := x.wanted("t")
	if s := x.summary("t"); s.missing != len(wanted) {
		t.Fatalf("before: %d missing, want %d", s.missing, len(wanted))
	}
	var content [16]byte
	for n, b := range wanted {
		flipContent(&content, n, b)
	}
	p := presumption{count: int64(len(wanted)), digest: policySetDigest(slices.Collect(maps.Keys(wanted))), content: hex.EncodeToString(content[:])}
	if !x.presume("t", p, slices.Collect(maps.Keys(wanted)), time.Now(), time.Hour) {
		t.Fatal("not presumed")
	}
	if s := x.summary("t"); s.missing != 0 || s.stale != 0 || s.owned != len(wanted) {
		t.Errorf("after: %+v", s)
	}
}

// BenchmarkTemplateSummary: a status refresh of a template with a policy
// per minion, from the tallies and by walking every name, side by side.
func BenchmarkTemplateSummary(b *testing.B) {
	for _, n := range []int{10_000, 50_000} {
		x := newPolicyIndex()
		scanned := map[types.NamespacedName]bindingPolicies{}
		for i := range n {
			scanned[saltKey(fmt.Sprintf("m%05d", i))] = policiesOf(fmt.Sprintf("minion_m%05d", i), "A", "shared", "S")
		}
		x.rebuild("t", nil, scanned, true)
		w := x.claim("t")
		x.settle("t", w, policyPass{owned: w.names()[:n/2]}) // half written, half to go
		b.Run(fmt.Sprintf("tallies/%d", n), func(b *testing.B) {
			for b.Loop() {
				x.summary("t")
			}
		})
		b.Run(fmt.Sprintf("walk/%d", n), func(b *testing.B) {
			for b.Loop() {
				talliesByWalk(x.templates["t"])
			}
		})
	}
}
