//go:build integration

package harness

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"
)

// The per-binding budgets of a fleet of up to 10,000 minions, and the goals
// at 50,000, in one place.
// TestScaleBudgets asserts the per-binding ones at N=200; the benchmark's
// report checks all of them.
const (
	// A new binding: the minion's own Vault objects (AppRole role, entity,
	// entity alias) cost at most 3 writes and 2 reads.
	budgetNewVaultWrites = 3
	budgetNewVaultReads  = 2
	// ... and at most 2 Kubernetes writes by the operator (events included).
	budgetNewK8sWrites = 2
	// Each distinct policy document a template renders costs at most one
	// write when it is new and one read (its ownership check), shared by
	// the bindings that render it.
	budgetPolicyWrites = 1
	budgetPolicyReads  = 1
	// A resync of a binding in sync (restart or forced): no Vault write, at
	// most 3 reads.
	budgetResyncVaultWrites = 0
	budgetResyncVaultReads  = 3
	// After a restart nothing but a timestamp would change: no status write.
	budgetRestartK8sWrites = 0
	// A forced resync records the request it handled: one status write.
	budgetForcedK8sWrites = 1
	// Whatever N, a phase may make a few calls that are not about
	// bindings: the connection's token lookup and renewal and the mount
	// accessor (Vault), the template's and the connection's status and
	// events (Kubernetes).
	budgetFixedVaultCalls = 10
	budgetFixedK8sWrites  = 10
	// ... plus what is bounded by time, not by N: the template's status
	// refresh and its batched events, each at most once a second
	// (Kubernetes), and the connection's check of its Vault every
	// checkInterval (30 s): the mount accessors and the token.
	budgetK8sWritesPerSecond = 2
	budgetVaultUpkeepPer30s  = 2
	// A single binding change reaches Vault within this (also one made as
	// a new leader takes over).
	budgetLatency = time.Second
	// A new leader reconciles within the lease duration and this after
	// the leader died.
	budgetTakeoverSlack = 2 * time.Second
	// After a takeover, the new leader's reads of the bindings' objects in
	// any minute stay within this times the steady rate of drift checks
	// spread over the interval (N×budgetResyncVaultReads per interval).
	budgetReadBurst = 2.0
	// Deleting the bindings and the template leaves none of the
	// template's policies (nor entities and roles) in Vault.
	budgetLeft = 0
	// The operator's RSS is at most its memory limit at N in every phase:
	// operatorMemory (cgroup.go), 256 MiB up to 10,000 bindings and
	// 512 MiB above.
	//
	// Converging N new bindings takes at most this times the floor (issue
	// 34's goal 4, at N=10,000; the floor writes the finalizer and the
	// record first), and at most budgetFloorRatioLarge times at largeN
	// (its goal 3: 50,000 bindings of shared policies).
	budgetFloorRatio      = 1.2
	budgetFloorRatioLarge = 1.3
	// A rollout (the template change, the policy change) takes at most
	// this times its floor, and the first minion's change is in Vault
	// within budgetFirstWrite of the template update (issue 34's goal 1).
	budgetRolloutRatio = 1.5
	budgetFirstWrite   = time.Second
	// Template change and resync cost per binding is flat from 1,000 to
	// 10,000 bindings: the larger N at most this much more per binding.
	budgetFlatCost = 0.20
	// The N the floor ratio and the RSS budgets are for, and the smallest
	// N of the flat-cost comparison; largeN is the N of the goals above
	// goalN.
	goalN, flatFromN = 10000, 1000
	largeN           = 50000
)

// floorRatioGoal is the converge's goal over the floor at n bindings, and
// the N that goal is set for.
func floorRatioGoal(n int) (ratio float64, at int) {
	if n <= goalN {
		return budgetFloorRatio, goalN
	}
	return budgetFloorRatioLarge, largeN
}

// objectClasses are the Vault calls a binding's work makes; the rest is
// the connection's own upkeep, a fixed cost whatever N: the token's lookup
// and renewal, the AppRole mount's accessor (sys/auth; read per binding,
// it blows the fixed budget), sys/seal-status.
var objectClasses = []string{"role", "role/role-id", "entity", "alias", "lookup", "policy"}

// split counts a tally's calls for the bindings' own objects (everything
// but policies and upkeep), its policy calls, and its upkeep.
func split(t *tally) (reads, writes, policyReads, policyWrites, upkeep int) {
	if t == nil {
		return
	}
	for kind, n := range t.By {
		class, rw, _ := strings.Cut(kind, " ")
		switch {
		case !slices.Contains(objectClasses, class):
			upkeep += n
		case class == "policy" && rw == "W":
			policyWrites += n
		case class == "policy":
			policyReads += n
		case rw == "W":
			writes += n
		default:
			reads += n
		}
	}
	return
}

// writesTo counts the Kubernetes writes (create, update, patch, delete)
// of the resources in t.
func writesTo(t *tally, resources ...string) int {
	if t == nil {
		return 0
	}
	n := 0
	for kind, c := range t.By {
		verb, res, _ := strings.Cut(kind, " ")
		if kubeWriteVerbs[verb] && slices.Contains(resources, res) {
			n += c
		}
	}
	return n
}

// kinds lists a tally's counts per binding, largest first, for messages:
// "entity W 1.00, role W 1.00, ...".
func kinds(t *tally, per int) string { return kindsWhere(t, per, nil) }

// kindsWhere is kinds of only the kinds keep accepts (all when nil).
func kindsWhere(t *tally, per int, keep func(kind string) bool) string {
	type kv struct {
		k string
		v int
	}
	var l []kv
	if t != nil {
		for k, v := range t.By {
			if keep == nil || keep(k) {
				l = append(l, kv{k, v})
			}
		}
	}
	if len(l) == 0 {
		return "none"
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].v != l[j].v {
			return l[i].v > l[j].v
		}
		return l[i].k < l[j].k
	})
	parts := make([]string, 0, len(l))
	for _, e := range l {
		s := fmt.Sprintf("%s %.2f", e.k, float64(e.v)/float64(max(per, 1)))
		if f := t.Failed[e.k]; f > 0 {
			s += fmt.Sprintf(" (%d failed)", f)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// Check is one budget or goal, as measured.
type Check struct {
	Goal     string
	OK       bool
	Measured string
}

// Which kinds a budget's message lists.
var (
	vaultUpkeep     = func(k string) bool { c, _, _ := strings.Cut(k, " "); return !slices.Contains(objectClasses, c) }
	vaultReadKinds  = func(k string) bool { return strings.HasSuffix(k, " R") && !vaultUpkeep(k) }
	vaultWriteKinds = func(k string) bool { return strings.HasSuffix(k, " W") && !vaultUpkeep(k) }
	kubeWriteKinds  = func(k string) bool { v, _, _ := strings.Cut(k, " "); return kubeWriteVerbs[v] }
)

func limit(name string, got, budget int, n int, how string, t *tally, keep func(string) bool) Check {
	return Check{
		Goal: name,
		OK:   got <= budget,
		Measured: fmt.Sprintf("%d (%.2f per binding), budget %d = %s; by kind per binding: %s",
			got, float64(got)/float64(max(n, 1)), budget, how, kindsWhere(t, n, keep)),
	}
}

// BudgetChecks are the per-binding budgets of one shape at one N, and the
// correctness of its phases: what TestScaleBudgets asserts.
func BudgetChecks(s *ShapeResult) []Check {
	var out []Check
	where := fmt.Sprintf("N=%d %s", s.N, s.Shape)
	if s.Err != "" {
		out = append(out, Check{Goal: where + ": the run", Measured: s.Err})
	}
	for _, p := range s.Phases {
		if p.Err != "" {
			out = append(out, Check{Goal: where + ": phase " + p.Phase, Measured: p.Err})
		}
	}
	n := s.N
	// By the shape alone: a round's label ("perminion #2") is no shape.
	pols := expectedPolicies(s.baseShape(), n)
	names := policyNames(s.baseShape(), n)
	if p := s.phase(phaseConverge); p != nil && p.Err == "" {
		slots, slotsHow := slotReads(p, names)
		out = append(out, vaultBudgets(where+": converge", p, n, pols, budgetNewVaultWrites, budgetNewVaultReads, 0, "", budgetPolicyWrites,
			budgetPolicyReads*pols+slots, fmt.Sprintf("%d per policy document (%d) %s", budgetPolicyReads, pols, slotsHow))...)
		fixed, fixedHow := fixedK8sWrites(p)
		out = append(out, limit(where+": converge: operator's Kubernetes writes", kubeWrites(p), budgetNewK8sWrites*n+fixed, n,
			fmt.Sprintf("%d per binding + %s", budgetNewK8sWrites, fixedHow), p.Kube, kubeWriteKinds))
	}
	for _, name := range []string{phaseRestart, phaseForced} {
		p := s.phase(name)
		if p == nil || p.Err != "" {
			continue
		}
		fixed, fixedHow := fixedK8sWrites(p)
		k8s, k8sHow := budgetRestartK8sWrites*n+fixed, fmt.Sprintf("%d per binding + %s", budgetRestartK8sWrites, fixedHow)
		if name == phaseForced {
			k8s, k8sHow = budgetForcedK8sWrites*n+fixed, fmt.Sprintf("%d per binding + %s", budgetForcedK8sWrites, fixedHow)
		}
		slots, slotsHow := slotReads(p, names)
		polReads, polHow := slots, "none but the slots': the policies were read when they were written "+slotsHow
		if name == phaseRestart {
			// A new process that cannot presume the policies from the
			// template's status reads each policy in Vault once, the
			// template's and every other (here the floor's as many again,
			// default, the actors' own); one that can reads the others.
			polReads = budgetPolicyReads*p.VaultPolicies + 1 + slots
			polHow = fmt.Sprintf("at most %d per policy in Vault (%d: the template's %d, the floor's, default, the actors') and their list %s", budgetPolicyReads, p.VaultPolicies, pols, slotsHow)
		}
		due, dueHow := checksDue(s, p)
		out = append(out, vaultBudgets(where+": "+name, p, n, pols, budgetResyncVaultWrites, budgetResyncVaultReads, due, dueHow, 0, polReads, polHow)...)
		out = append(out, limit(where+": "+name+": operator's Kubernetes writes", kubeWrites(p), k8s, n, k8sHow, p.Kube, kubeWriteKinds))
		if name == phaseRestart {
			out = append(out, limit(where+": restart resync: binding status writes", writesTo(p.Kube, "minionbindings/status"), 0, n,
				"none when nothing but a timestamp would change", p.Kube, kubeWriteKinds))
		}
	}
	if p := s.phase(phasePolicy); p != nil && p.Err == "" {
		out = append(out, policyChangeBudgets(where, p, n, names)...)
	}
	if p := s.phase(phaseFailover); p != nil && p.Err == "" && p.Failover != nil {
		out = append(out, failoverBudgets(where, p.Failover, n)...)
	}
	if p := s.phase(phaseLatency); p != nil && p.Err == "" {
		mx := slices.Max(append([]time.Duration{0}, p.Latency...))
		out = append(out, Check{
			Goal: where + ": single binding change reaches Vault", OK: mx <= budgetLatency && len(p.Latency) > 0,
			Measured: fmt.Sprintf("max %s of %v, budget %s", mx.Round(time.Millisecond), roundAll(p.Latency), budgetLatency),
		})
	}
	if p := s.phase(phaseDelete); p != nil && p.Err == "" {
		out = append(out, Check{
			Goal: where + ": deleting the bindings and the template empties Vault", OK: p.Left["policies"] <= budgetLeft && p.Left["entities"] <= budgetLeft && p.Left["roles"] <= budgetLeft,
			Measured: fmt.Sprintf("left: %d policies %s_*, %d entities, %d roles%s", p.Left["policies"], policyPrefix, p.Left["entities"], p.Left["roles"], noteOf(p)),
		})
	}
	var peak int64
	var peakPhase string
	for _, p := range s.Phases {
		if p.PeakKiB > peak {
			peak, peakPhase = p.PeakKiB, p.Phase
		}
	}
	if peak > 0 {
		limitMiB := operatorMemory(n) >> 20
		out = append(out, Check{
			Goal: where + ": operator RSS in every phase", OK: peak <= limitMiB*1024,
			Measured: fmt.Sprintf("peak %.0f MiB (%s), budget %d MiB (its memory limit at N=%d)", float64(peak)/1024, peakPhase, limitMiB, n),
		})
	}
	return out
}

// policyChangeBudgets: a change of every per-minion policy body (n
// policies) reads and writes each once, and writes nothing of the
// bindings, in Vault or in their status.
func policyChangeBudgets(where string, p *phaseResult, n int, names []string) []Check {
	_, w, pr, pw, _ := split(p.Vault)
	isPolicy := func(k string) bool { return strings.HasPrefix(k, "policy ") }
	how := func(per int) string { return fmt.Sprintf("%d per changed policy (%d per-minion)", per, n) }
	slots, slotsHow := slotReads(p, names)
	return []Check{
		limit(where+": policy change: operator's Vault policy writes", pw, budgetPolicyWrites*n, n, how(budgetPolicyWrites), p.Vault, func(k string) bool { return k == "policy W" }),
		limit(where+": policy change: operator's Vault policy reads", pr, budgetPolicyReads*n+slots, n, how(budgetPolicyReads)+" "+slotsHow, p.Vault, func(k string) bool { return k == "policy R" }),
		limit(where+": policy change: operator's Vault writes for the bindings' objects", w, 0, n,
			"none: no role or entity renders differently", p.Vault, func(k string) bool { return vaultWriteKinds(k) && !isPolicy(k) }),
		limit(where+": policy change: binding status writes", writesTo(p.Kube, "minionbindings/status"), 0, n,
			"none: status names the policies, not their bodies", p.Kube, kubeWriteKinds),
	}
}

// failoverBudgets: a failover writes nothing to Vault, every binding stays
// Ready, and a change made at the takeover reaches Vault as any other.
func failoverBudgets(where string, f *failoverResult, n int) []Check {
	return []Check{
		{
			Goal: where + ": failover: operator's Vault writes (the binding changed at the takeover aside)", OK: f.Writes == 0,
			Measured: fmt.Sprintf("%d %v, budget 0 (the token's upkeep: %d)", f.Writes, f.WriteKinds, f.UpkeepWrites),
		},
		{
			Goal: where + ": failover: every binding stays Ready", OK: f.ReadyLow == n,
			Measured: fmt.Sprintf("fewest Ready at once %d of %d", f.ReadyLow, n),
		},
		{
			Goal: where + ": failover: a binding changed at the takeover reaches Vault", OK: f.Change > 0 && f.Change <= budgetLatency,
			Measured: fmt.Sprintf("%s (%s), budget %s", f.Change.Round(time.Millisecond), f.Changed, budgetLatency),
		},
	}
}

// checksDueAfterFailover is how many reads of the bindings' objects phase
// p may make, and the goal in words: none, unless a failover ran before
// it in the round. The new leader spread its first drift checks over the
// failover's interval (10 minutes), and setting the interval back leaves
// the checks where they are: those that fall due in p read their three
// objects, at most twice the steady rate over the time p was counted.
func checksDueAfterFailover(s *ShapeResult, p *phaseResult) (int, string) {
	const none = "none of the bindings' objects (a drift check that falls due in the phase would)"
	fi, pi := slices.IndexFunc(s.Phases, func(q *phaseResult) bool { return q.Phase == phaseFailover }), slices.Index(s.Phases, p)
	if fi < 0 || fi > pi || s.Phases[fi].Failover == nil || s.Phases[fi].Failover.Steady == 0 {
		return 0, none
	}
	f := s.Phases[fi].Failover
	allowed := int(2 * f.Steady * phaseSeconds(p) / 60)
	return allowed, fmt.Sprintf("the bindings' objects only for the drift checks the failover's %s interval scheduled: at most %d, twice the steady rate (%.0f per minute) over the %.0f s counted",
		f.Interval, allowed, f.Steady, phaseSeconds(p))
}

// phaseSeconds is how long the phase's calls were counted: its wall time
// and the calm that followed.
func phaseSeconds(p *phaseResult) float64 {
	return (p.Wall + p.Quiet).Seconds()
}

// slotReads is what the template's slots may read in a phase: each policy
// is compared with Vault once per interval, in the slot of verifySlots
// its name hashes to (controllers/policy/index_schedule.go, fnv-32a), one slot
// every interval/verifySlots. A phase of s seconds sees at most
// s/slotLength+1 slots come, and reads one more that came just before it
// started; each at most the largest slot's names. The slots are of
// uneven size (at 211 names, 3.5 on average and 7 the largest; at 10,011, 167 and 225): an
// average per slot made a budget that a phase over a large slot failed.
func slotReads(p *phaseResult, names []string) (int, string) {
	s := phaseSeconds(p)
	length := benchInterval / verifySlots
	largest := largestSlot(names, verifySlots)
	slots := int(s/length.Seconds()) + 2
	return slots * largest, fmt.Sprintf("+ %d for the slots (each policy once per %s interval: %.0f s of it, %d slots of %s of at most %d names)",
		slots*largest, benchInterval, s, slots, length, largest)
}

// verifySlots is the number of slots the template cuts its interval into
// (controllers/policy/index_schedule.go).
const verifySlots = 60

// largestSlot is the most names that hash to one of slots slots, as the
// template's slotOf does.
func largestSlot(names []string, slots uint32) int {
	count := map[uint32]int{}
	for _, n := range names {
		h := fnv.New32a()
		h.Write([]byte(n))
		count[h.Sum32()%slots]++
	}
	largest := 0
	for _, c := range count {
		largest = max(largest, c)
	}
	return largest
}

// checksDue is what the bindings' drift checks scheduled before a phase
// may read in it: a binding whose check comes in the phase before the
// phase's own reconcile of it is read twice. The checks are spread over
// the interval the process that scheduled them had: after the failover,
// the new leader's first checks are spread over failoverInterval, and a
// binding in sync keeps its check when the interval is set back, until
// it is next reconciled.
func checksDue(s *ShapeResult, p *phaseResult) (int, string) {
	interval := benchInterval
	for _, q := range s.Phases {
		if q == p {
			break
		}
		if q.Phase == phaseFailover {
			interval = failoverInterval
		}
	}
	secs := phaseSeconds(p)
	checks := int(float64(s.N)*secs/interval.Seconds()) + 1
	return checks * budgetResyncVaultReads, fmt.Sprintf("+ %d for the checks due in the phase (%d per binding, %.0f s of a %s interval)",
		checks*budgetResyncVaultReads, budgetResyncVaultReads, secs, interval)
}

// fixedK8sWrites is the allowance for the Kubernetes writes that are not
// about one binding: fixed, plus what the template's once-a-second refresh
// may make over the phase.
// The leader's Lease renewal, once per retry period, is one more.
func fixedK8sWrites(p *phaseResult) (int, string) {
	s := phaseSeconds(p)
	return budgetFixedK8sWrites + int(s*budgetK8sWritesPerSecond) + int(s/leaseRetry.Seconds()),
		fmt.Sprintf("%d + %d per second of the phase (%.0f s) + a lease renewal per %s", budgetFixedK8sWrites, budgetK8sWritesPerSecond, s, leaseRetry)
}

func kubeWrites(p *phaseResult) int {
	if p.Kube == nil {
		return 0
	}
	return p.Kube.Writes
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// phaseRatio is the wall time of phase over that of floorPhase.
func phaseRatio(s *ShapeResult, phase, floorPhase string) (float64, bool) {
	f, c := s.phase(floorPhase), s.phase(phase)
	if f == nil || c == nil || f.Err != "" || c.Err != "" || f.Wall == 0 {
		return 0, false
	}
	return c.Wall.Seconds() / f.Wall.Seconds(), true
}

// GoalChecks are the goals across shapes and sizes: the floor ratio, and
// flat cost per binding from flatFromN to the largest N measured.
func GoalChecks(all []*ShapeResult) []Check {
	var out []Check
	for _, s := range all {
		goal, at := floorRatioGoal(s.N)
		// The floor (34) writes the finalizer and the ownership
		// record before its Vault calls, as any operator that cleans up on
		// deletion must: the goal is against it. The plain floor, without
		// the record, is reported beside it.
		if r, ok := phaseRatio(s, phaseConverge, phaseFloorRecord); ok {
			g := fmt.Sprintf("N=%d %s: converge within %.1f× the floor (with the finalizer and the ownership record written first)", s.N, s.Shape, goal)
			if s.N != at {
				g += fmt.Sprintf(" (the goal is at N=%d)", at)
			}
			out = append(out, Check{Goal: g, OK: r <= goal, Measured: fmt.Sprintf("%.2f×", r)})
		}
		if r, ok := phaseRatio(s, phaseConverge, phaseFloor); ok {
			out = append(out, Check{
				Goal: fmt.Sprintf("N=%d %s: for reference, converge within %.1f× the plain floor (no record)", s.N, s.Shape, goal),
				OK:   r <= goal, Measured: fmt.Sprintf("%.2f×", r),
			})
		}
		if r, ok := phaseRatio(s, phaseConverge, phaseFloorProof); ok {
			out = append(out, Check{
				Goal: fmt.Sprintf("N=%d %s: for reference, converge within %.1f× the floor that also reads each object before creating it (floor + record + proof)", s.N, s.Shape, goal),
				OK:   r <= goal, Measured: fmt.Sprintf("%.2f×", r),
			})
		}
		out = append(out, rolloutGoals(s)...)
	}
	for _, s := range all {
		out = append(out, failoverGoals(s)...)
		if p := s.phase(phasePolicy); p != nil && p.Err == "" {
			r, _, _, _, _ := split(p.Vault)
			allowed, goal := checksDueAfterFailover(s, p)
			out = append(out, Check{
				Goal: fmt.Sprintf("N=%d %s: policy change reads %s", s.N, s.Shape, goal), OK: r <= allowed,
				Measured: fmt.Sprintf("%d: %s", r, kindsWhere(p.Vault, p.Per, func(k string) bool { return vaultReadKinds(k) && !strings.HasPrefix(k, "policy ") })),
			})
		}
	}
	for _, shape := range allShapes {
		var small, large *ShapeResult
		for _, s := range all {
			if s.baseShape() != shape || s.N < flatFromN {
				continue
			}
			if small == nil || s.N < small.N {
				small = s
			}
			if large == nil || s.N > large.N {
				large = s
			}
		}
		if small == nil || large == nil || small.N == large.N {
			continue
		}
		for _, name := range []string{phaseTemplate, phasePolicy, phaseRestart, phaseForced} {
			a, b := small.phase(name), large.phase(name)
			if a == nil || b == nil || a.Err != "" || b.Err != "" {
				continue
			}
			wa, wb := perBinding(a, a.Wall.Seconds()), perBinding(b, b.Wall.Seconds())
			ca, cb := perBinding(a, a.CPU["operator"]), perBinding(b, b.CPU["operator"])
			out = append(out, Check{
				Goal: fmt.Sprintf("%s: %s cost per binding flat from N=%d to N=%d (within %.0f %%)", shape, name, small.N, large.N, budgetFlatCost*100),
				OK:   wb <= wa*(1+budgetFlatCost) && cb <= ca*(1+budgetFlatCost),
				Measured: fmt.Sprintf("wall %s per binding, operator CPU %s, the servers' CPU %s",
					growth(wa, wb), growth(ca, cb), growth(perBinding(a, serversCPU(a)), perBinding(b, serversCPU(b)))),
			})
			fa, fb := small.phase(floorOf(name)), large.phase(floorOf(name))
			if fa == nil || fb == nil || fa.Err != "" || fb.Err != "" {
				continue
			}
			fwa, fwb := perBinding(fa, fa.Wall.Seconds()), perBinding(fb, fb.Wall.Seconds())
			out = append(out, Check{
				Goal: fmt.Sprintf("%s: for reference, %s (no operator) cost per binding flat from N=%d to N=%d (within %.0f %%)", shape, fa.Phase, small.N, large.N, budgetFlatCost*100),
				OK:   fwb <= fwa*(1+budgetFlatCost),
				Measured: fmt.Sprintf("wall %s per binding, the servers' CPU %s",
					growth(fwa, fwb), growth(perBinding(fa, serversCPU(fa)), perBinding(fb, serversCPU(fb)))),
			})
		}
	}
	return out
}

// rolloutGoals are issue 34's goal 1 for the template change and the
// policy change: at most budgetRolloutRatio times the floor (the same
// writes by a plain loop, and the status patches), the first minion's
// change in Vault within budgetFirstWrite; and, for reference, the ratio
// over the floor that reads each object before changing it.
func rolloutGoals(s *ShapeResult) []Check {
	var out []Check
	where := fmt.Sprintf("N=%d %s", s.N, s.Shape)
	for _, phase := range []string{phaseTemplate, phasePolicy} {
		p := s.phase(phase)
		if p == nil || p.Err != "" {
			continue
		}
		if r, ok := phaseRatio(s, phase, floorOf(phase)); ok {
			out = append(out, Check{Goal: fmt.Sprintf("%s: %s within %.1f× its floor", where, phase, budgetRolloutRatio),
				OK: r <= budgetRolloutRatio, Measured: fmt.Sprintf("%.2f×", r)})
		}
		if r, ok := phaseRatio(s, phase, proofFloorOf(phase)); ok {
			out = append(out, Check{Goal: fmt.Sprintf("%s: for reference, %s within %.1f× the floor that also reads each object before changing it (%s)", where, phase, budgetRolloutRatio, proofFloorOf(phase)),
				OK: r <= budgetRolloutRatio, Measured: fmt.Sprintf("%.2f×", r)})
		}
		if ro := p.Rollout; ro != nil && ro.Writes > 0 {
			out = append(out, Check{Goal: fmt.Sprintf("%s: %s: the first minion's change in Vault within %s of the template update", where, phase, budgetFirstWrite),
				OK: ro.First <= budgetFirstWrite, Measured: ro.First.Round(time.Millisecond).String()})
		}
	}
	return out
}

// failoverGoals: the new leader reconciles within the lease duration and
// budgetTakeoverSlack of the kill, and spreads its drift checks.
func failoverGoals(s *ShapeResult) []Check {
	p := s.phase(phaseFailover)
	if p == nil || p.Err != "" || p.Failover == nil {
		return nil
	}
	f := p.Failover
	where := fmt.Sprintf("N=%d %s", s.N, s.Shape)
	var bindings, policies []int
	for _, m := range f.Minutes {
		bindings, policies = append(bindings, m.Bindings), append(policies, m.Policies)
	}
	return []Check{
		{
			Goal: fmt.Sprintf("%s: failover: the new leader reconciles within the lease duration + %s of the kill", where, budgetTakeoverSlack),
			OK:   f.FirstReconcile > 0 && f.FirstReconcile <= f.LeaseDuration+budgetTakeoverSlack,
			Measured: fmt.Sprintf("lease taken %s, first reconcile %s after the kill; the leader renewed %s before it, so the lease (%s) expired %s after it and was taken %s later (a standby retries every %s, with client-go's jitter up to 2.2×)",
				f.Lease.Round(time.Millisecond), f.FirstReconcile.Round(time.Millisecond), f.RenewedBefore.Round(time.Millisecond), f.LeaseDuration,
				(f.LeaseDuration - f.RenewedBefore).Round(time.Millisecond), (f.Lease - f.LeaseDuration + f.RenewedBefore).Round(time.Millisecond), leaseRetry),
		},
		{
			Goal: fmt.Sprintf("%s: failover: the new leader's reads of the bindings' objects per minute within %.0f× the steady rate", where, budgetReadBurst),
			OK:   len(f.Minutes) > 0 && f.maxRatio() <= budgetReadBurst,
			Measured: fmt.Sprintf("%v per minute after the takeover, steady %.0f (N×%d per %s interval): max %.2f×; policy reads %v",
				bindings, f.Steady, budgetResyncVaultReads, f.Interval, f.maxRatio(), policies),
		},
	}
}

// perBinding is v (seconds) per binding of p, in milliseconds.
func perBinding(p *phaseResult, v float64) float64 {
	return v * 1000 / float64(max(p.Per, 1))
}

// serversCPU is the CPU seconds of kube-apiserver, etcd and Vault in p.
func serversCPU(p *phaseResult) float64 {
	return p.CPU["apiserver"] + p.CPU["etcd"] + p.CPU["vault"]
}

// growth says how a cost per binding (ms) changed from a to b.
func growth(a, b float64) string {
	if a == 0 {
		return fmt.Sprintf("%.2f → %.2f ms", a, b)
	}
	return fmt.Sprintf("%.2f → %.2f ms (%+.0f %%)", a, b, (b/a-1)*100)
}

func noteOf(p *phaseResult) string {
	if p.Note == "" {
		return ""
	}
	return " (" + p.Note + ")"
}

// vaultBudgets checks a phase's Vault calls: those for the bindings' own
// objects per binding, the policy calls per policy document, the upkeep.
func vaultBudgets(what string, p *phaseResult, n, pols, writes, reads, extraReads int, extraHow string, policyWrites, policyReads int, policyReadsHow string) []Check {
	r, w, pr, pw, up := split(p.Vault)
	isPolicy := func(k string) bool { return strings.HasPrefix(k, "policy ") }
	return []Check{
		limit(what+": operator's Vault writes for the bindings' objects", w, writes*n, n,
			fmt.Sprintf("%d per binding", writes), p.Vault, func(k string) bool { return vaultWriteKinds(k) && !isPolicy(k) }),
		limit(what+": operator's Vault reads for the bindings' objects", r, reads*n+extraReads, n,
			strings.TrimSpace(fmt.Sprintf("%d per binding %s", reads, extraHow)), p.Vault, func(k string) bool { return vaultReadKinds(k) && !isPolicy(k) }),
		limit(what+": operator's Vault policy writes", pw, policyWrites*pols, n,
			fmt.Sprintf("%d per policy document (%d)", policyWrites, pols), p.Vault, func(k string) bool { return k == "policy W" }),
		limit(what+": operator's Vault policy reads", pr, policyReads, n, policyReadsHow, p.Vault, func(k string) bool { return k == "policy R" }),
		limit(what+": operator's Vault upkeep calls (token, mount accessor, seal status)", up,
			budgetFixedVaultCalls+budgetVaultUpkeepPer30s*int(phaseSeconds(p)/30), n,
			fmt.Sprintf("%d + %d per 30 s of the phase (%.0f s)", budgetFixedVaultCalls, budgetVaultUpkeepPer30s, phaseSeconds(p)), p.Vault, vaultUpkeep),
	}
}
