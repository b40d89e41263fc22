//go:build integration

package harness

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// processes are the CPU columns, in order.
var processes = []string{"apiserver", "etcd", "vault", "operator", "harness"}

// serverColumns are the servers' memory columns, in order.
var serverColumns = []string{"apiserver", "etcd", "vault"}

// Header says how the numbers were made: the command, the machine, the
// settings.
func Header(cfg Config, command string, started time.Time, machine string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Scale benchmark: the operator against the floor\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n", command)
	fmt.Fprintf(&b, "- started %s; %s\n", started.Format(time.RFC3339), machine)
	fmt.Fprintf(&b, "- N %v, shapes %v; %d parallel creators, floor with %d workers, operator `--concurrency=%d` with a memory limit of %s; fresh servers for each converge (the floor, the floor + record, the floor + record + proof, the operator's), the rollouts on the servers of the converge before them; the harness watches the bindings (an informer) in the floors as in the operator's phases\n",
		cfg.ns, cfg.shapes, cfg.creators, cfg.floorWorkers, cfg.concurrency, memoryLimits(cfg.ns))
	if cfg.rounds > 1 {
		fmt.Fprintf(&b, "- %d rounds of each size and shape, the floors first in odd rounds and the operator's phases first in even ones (ratios by round and their median at the end)\n", cfg.rounds)
	}
	if p := phasesRun(cfg); p != "" {
		fmt.Fprintf(&b, "- %s\n", p)
	}
	return b.String()
}

// memoryLimits says the operator's memory limit (and RSS goal) at each N
// of ns: "256 MiB at N=1000, 10000; 512 MiB at N=50000".
func memoryLimits(ns []int) string {
	var limits []int64
	byLimit := map[int64][]string{}
	for _, n := range ns {
		l := operatorMemory(n) >> 20
		if _, ok := byLimit[l]; !ok {
			limits = append(limits, l)
		}
		byLimit[l] = append(byLimit[l], fmt.Sprint(n))
	}
	parts := make([]string, len(limits))
	for i, l := range limits {
		parts[i] = fmt.Sprintf("%d MiB at N=%s", l, strings.Join(byLimit[l], ", "))
	}
	return strings.Join(parts, "; ")
}

// Table renders every phase of every run as one markdown table, then the
// breakdowns, the latencies, what deletion left, the goals and the profiles.
func Table(all []*ShapeResult, goals []Check) string {
	var b strings.Builder
	b.WriteString("\n| N | shape | phase | wall s | ×floor | Vault R/b | Vault W/b | metric R/W per b | K8s W/b | CPU s apiserver | etcd | vault | operator | harness | op RSS MiB (peak) |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range all {
		if s.Err != "" && len(s.Phases) == 0 {
			fmt.Fprintf(&b, "| %d | %s | FAILED: %s | | | | | | | | | | | | |\n", s.N, s.Shape, oneLine(s.Err))
		}
		for _, p := range s.Phases {
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |", p.N, p.Shape, phaseLabel(p), fmtWall(p), fmtRatio(s, p),
				perB(readsOf(p.Vault), p.Per), perB(writesOf(p.Vault), p.Per), metricRW(p), perB(kubeWrites(p), p.Per))
			for _, proc := range processes {
				if v, ok := p.CPU[proc]; ok {
					fmt.Fprintf(&b, " %.1f |", v)
				} else {
					b.WriteString(" |")
				}
			}
			if p.PeakKiB > 0 {
				fmt.Fprintf(&b, " %.0f (%.0f) |\n", float64(p.RSSKiB)/1024, float64(p.PeakKiB)/1024)
			} else {
				b.WriteString(" |\n")
			}
		}
	}
	b.WriteString("\n×floor: the converge's wall time over the floor's, and in parentheses over the floor's that also writes the ownership record before Vault (floor + record); " +
		"the forced resync's, the template change's and the policy change's over their floor's (the least work of the phase, on the floor + record's bindings, with the finalizer and the record as the operator's: " +
		"the annotation, three Vault reads and a status patch; the entity written and a status patch; the minion's policy written with its new body, " +
		"and no status patch, as a binding's status names its policies, not their bodies). " +
		"In brackets, the converge's, the template change's and the policy change's over the floor that also reads each object before it writes it, " +
		"as the operator must to prove the name free or its own (Vault has no conditional write of roles, entities or policies): " +
		"floor + record + proof reads the role, the entity and the minion's policy before creating them; the rollouts' proof floors, on the same bindings after the plain ones, " +
		"read the entity or the policy before changing it again. " +
		"The policy change (perminion only) adds a rule to the per-minion policy document: every per-minion policy's body changes, nothing else. " +
		"The failover SIGKILLs the leader beside a standby (both `--leader-elect`); its wall time is from the kill until the new leader reconciled every binding once, " +
		"and its calls and CPU include the watch of the new leader that follows (below); the later phases measure the new leader, " +
		"so the template change reads the role and its role ID of each binding the new leader has not checked yet (its first drift checks are spread over the interval). ")
	b.WriteString("/b: per binding (the single-change row: per change). Vault R/W: the actor's calls in Vault's file audit log " +
		"(reads: read, list, and identity lookups; writes: create, update, delete). metric: the operator's " +
		"`minionvault_vault_requests_total` by its operation label (read+list / write+delete). K8s W: create, update, patch, " +
		"delete by the actor's user in the API server's audit log, events, status and the leader's Lease renewals (one per " + leaseRetry.String() + ") included. CPU: utime+stime from " +
		"/proc/<pid>/stat over the phase, including the second or more until the calls stopped. RSS: VmRSS at the end, " +
		"VmHWM over the phase.\n")
	b.WriteString("\n## etcd updates of MinionBindings per binding write\n\n" +
		"The API server's etcd updates of MinionBindings (its `etcd_request_duration_seconds` count), over the writes of bindings in its audit log " +
		"by the actor: above 1, an update met a stale object in the watch cache and was applied again.\n\n| N | shape | phase | etcd updates per binding | binding writes per binding | ratio |\n|---:|---|---|---:|---:|---:|\n")
	for _, s := range all {
		for _, p := range s.Phases {
			if p.Phase != phaseFloor && p.Phase != phaseFloorRecord && p.Phase != phaseFloorProof && p.Phase != phaseConverge {
				continue
			}
			w := writesTo(p.Kube, "minionbindings", "minionbindings/status")
			ratio := ""
			if w > 0 {
				ratio = fmt.Sprintf("%.3f", p.EtcdUpdates/float64(w))
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %.2f | %s | %s |\n", p.N, p.Shape, p.Phase, p.EtcdUpdates/float64(max(p.Per, 1)), perB(w, p.Per), ratio)
		}
	}
	writeServerMemory(&b, all)
	writeStored(&b, all)
	var memories []string
	for _, s := range all {
		if s.Memory != "" && !slices.Contains(memories, s.Memory) {
			memories = append(memories, s.Memory)
		}
	}
	for _, m := range memories {
		fmt.Fprintf(&b, "\nThe operator ran %s.\n", m)
	}

	b.WriteString("\n## Calls per binding by kind\n\n| N | shape | phase | Vault (audit log) | Kubernetes writes and reads (audit log) | errors |\n|---:|---|---|---|---|---|\n")
	for _, s := range all {
		for _, p := range s.Phases {
			errs := oneLine(p.Err)
			if p.NotQuiet {
				errs = strings.TrimSpace(errs + " calls did not stop within 60 s after the goal")
			}
			note := ""
			if p.Note != "" {
				note = " (" + p.Note + ")"
			}
			fmt.Fprintf(&b, "| %d | %s | %s%s | %s | %s | %s |\n", p.N, p.Shape, p.Phase, note, kinds(p.Vault, p.Per), kinds(p.Kube, p.Per), errs)
		}
	}

	b.WriteString("\n## Single binding change until Vault shows it\n\n| N | shape | median | max | each |\n|---:|---|---:|---:|---|\n")
	for _, s := range all {
		if p := s.phase(phaseLatency); p != nil && len(p.Latency) > 0 {
			l := slices.Clone(p.Latency)
			slices.Sort(l)
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %v |\n", s.N, s.Shape, l[len(l)/2].Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond), roundAll(p.Latency))
		}
	}
	writeRollouts(&b, all)
	writeFailovers(&b, all)
	b.WriteString("\n## Left in Vault after deleting the bindings and the template\n\n| N | shape | policies | entities | roles |\n|---:|---|---:|---:|---:|\n")
	for _, s := range all {
		if p := s.phase(phaseDelete); p != nil && p.Left != nil {
			fmt.Fprintf(&b, "| %d | %s | %d | %d | %d |\n", s.N, s.Shape, p.Left["policies"], p.Left["entities"], p.Left["roles"])
		}
	}

	b.WriteString("\n## Goals\n\n")
	for _, c := range goals {
		mark := "MET"
		if !c.OK {
			mark = "**NOT MET**"
		}
		fmt.Fprintf(&b, "- %s: %s: %s\n", mark, c.Goal, c.Measured)
	}

	writeProfiles(&b, "CPU profiles of the operator", all, func(p *phaseResult) []profileBlock {
		if p.ProfileTop == "" {
			return nil
		}
		return []profileBlock{{"", "go tool pprof -top " + p.Profile, p.ProfileTop}}
	})
	writeProfiles(&b, "Heap of the operator at the end of each phase", all, func(p *phaseResult) []profileBlock {
		if p.HeapTop == "" {
			return nil
		}
		return []profileBlock{{"", "go tool pprof -top -sample_index=inuse_space " + p.Heap, p.HeapTop}}
	})
	writeProfiles(&b, "CPU profiles of the servers (floors, converge, forced resync, template change, policy change)", all, func(p *phaseResult) []profileBlock {
		var out []profileBlock
		for _, sp := range p.Servers {
			out = append(out, profileBlock{", " + sp.Server, "go tool pprof -top " + sp.Path, sp.Top})
		}
		return out
	})
	return b.String()
}

// writeServerMemory renders the servers' peak RSS in each phase, beside
// the operator's in the main table.
func writeServerMemory(b *strings.Builder, all []*ShapeResult) {
	var rows strings.Builder
	for _, s := range all {
		for _, p := range s.Phases {
			if len(p.ServerPeakKiB) == 0 {
				continue
			}
			fmt.Fprintf(&rows, "| %d | %s | %s |", p.N, p.Shape, p.Phase)
			for _, srv := range serverColumns {
				if v, ok := p.ServerPeakKiB[srv]; ok {
					fmt.Fprintf(&rows, " %.0f |", float64(v)/1024)
				} else {
					rows.WriteString(" |")
				}
			}
			if p.PeakKiB > 0 {
				fmt.Fprintf(&rows, " %.0f |\n", float64(p.PeakKiB)/1024)
			} else {
				rows.WriteString(" |\n")
			}
		}
	}
	if rows.Len() == 0 {
		return
	}
	b.WriteString("\n## Servers' memory per phase (MiB, peak)\n\n" +
		"VmHWM of each server's process over the phase (reset at its start, as the operator's), the operator's beside them. " +
		"Each converge starts fresh servers; the phases after it on the same servers (the rollouts' floors after their floor, the operator's phases after its converge) include in their peak what came before them.\n\n" +
		"| N | shape | phase | apiserver | etcd | vault | operator |\n|---:|---|---|---:|---:|---:|---:|\n")
	b.WriteString(rows.String())
}

// writeRollouts renders when Vault showed each template change.
func writeRollouts(b *strings.Builder, all []*ShapeResult) {
	var rows strings.Builder
	for _, s := range all {
		for _, p := range s.Phases {
			if r := p.Rollout; r != nil {
				fmt.Fprintf(&rows, "| %d | %s | %s | %s | %s | %s | %d |\n", p.N, p.Shape, p.Phase, r.Class,
					fmtDur(r.First, r.Writes > 0), fmtDur(r.Last, r.Writes > 0), r.Writes)
			}
		}
	}
	if rows.Len() == 0 {
		return
	}
	b.WriteString("\n## Template changes: from the update until Vault shows them\n\n" +
		"From the template update sent to the operator's first and last write of the objects the change is about, by Vault's audit log " +
		"(its timestamps): the first minion's change visible in Vault, and the whole rollout's.\n\n" +
		"| N | shape | phase | writes of | first | last | writes |\n|---:|---|---|---|---:|---:|---:|\n")
	b.WriteString(rows.String())
}

// writeFailovers renders what the failover phases measured besides the row.
func writeFailovers(b *strings.Builder, all []*ShapeResult) {
	var rows, calls strings.Builder
	var watch, interval time.Duration
	for _, s := range all {
		p := s.phase(phaseFailover)
		if p == nil || p.Failover == nil {
			continue
		}
		f := p.Failover
		watch, interval = f.Watch, f.Interval
		minutes := make([]string, len(f.Minutes))
		for i, m := range f.Minutes {
			minutes[i] = fmt.Sprintf("%d (%d, %d)", m.Bindings, m.Policies, m.Upkeep)
		}
		fmt.Fprintf(&rows, "| %d | %s | %s | %s | %s | %s | %s | %d | %s | %.0f | %.2f | %d of %d | %s |\n", s.N, s.Shape,
			f.LeaseDuration, f.RenewedBefore.Round(time.Millisecond), fmtDur(f.Lease, f.Lease > 0), fmtDur(f.FirstReconcile, f.FirstReconcile > 0),
			fmtDur(f.AllReconciled, f.AllReconciled > 0), f.Writes, strings.Join(minutes, ", "), f.Steady, f.maxRatio(), f.ReadyLow, s.N,
			fmtDur(f.Change, f.Change > 0))
		if len(f.ChangeCalls) > 0 {
			fmt.Fprintf(&calls, "- N=%d %s, %s: %s\n", s.N, s.Shape, f.Changed, strings.Join(f.ChangeCalls, ", "))
		}
	}
	if rows.Len() == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Failover: the leader SIGKILLed beside a standby\n\n"+
		"From the kill (no lease released): the Lease taken by the standby (its acquireTime), its first reconcile and every binding reconciled "+
		"once with nothing queued or running (its `controller_runtime_reconcile_total`, polled every 50 ms). Vault writes: the operator's writes "+
		"of roles, entities, aliases and policies from the kill to the end of the watch, the changed binding's aside. Reads per minute: the %s "+
		"after the takeover, with the template's interval at %s (a new process spreads its first drift checks over it): the bindings' objects "+
		"(role, role ID, entity: the drift checks), in parentheses the policies (a new process reads each policy in Vault once) and the upkeep; "+
		"steady is N×%d per interval, ×steady the busiest minute's over it. Fewest Ready: the fewest bindings with Ready True at once from the "+
		"kill on. Change: one binding's roles patched when the standby was seen holding the Lease, until its entity in Vault showed them.\n\n"+
		"| N | shape | lease | renewed before the kill | lease taken | first reconcile | all reconciled | Vault writes | reads per minute: bindings' objects (policies, upkeep) | steady | ×steady | fewest Ready | change until Vault |\n"+
		"|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n", watch, interval, budgetResyncVaultReads)
	b.WriteString(rows.String())
	if calls.Len() > 0 {
		b.WriteString("\nThe changed binding's Vault calls by the new leader, from the patch (audit log): when its reconcile began, and what it waited on.\n\n")
		b.WriteString(calls.String())
	}
}

// fmtDur is d in milliseconds, or "–" when it was not measured.
func fmtDur(d time.Duration, ok bool) string {
	if !ok {
		return "–"
	}
	return d.Round(time.Millisecond).String()
}

// profileBlock is one profile in the report: what it is of (after the
// phase), the command that shows it, and that command's output.
type profileBlock struct {
	what, command, top string
}

// writeProfiles writes a section with the blocks of every phase, or
// nothing when there are none.
func writeProfiles(b *strings.Builder, heading string, all []*ShapeResult, blocks func(*phaseResult) []profileBlock) {
	var sec strings.Builder
	for _, s := range all {
		for _, p := range s.Phases {
			for _, pb := range blocks(p) {
				fmt.Fprintf(&sec, "\n### N=%d %s %s%s: `%s`\n\n```\n%s\n```\n", p.N, p.Shape, p.Phase, pb.what, pb.command, strings.TrimSpace(pb.top))
			}
		}
	}
	if sec.Len() > 0 {
		b.WriteString("\n## " + heading + "\n")
		b.WriteString(sec.String())
	}
}

func phaseLabel(p *phaseResult) string {
	if p.Err != "" {
		return p.Phase + " (FAILED)"
	}
	return p.Phase
}

func fmtWall(p *phaseResult) string {
	return fmt.Sprintf("%.2f", p.Wall.Seconds())
}

func fmtRatio(s *ShapeResult, p *phaseResult) string {
	f := floorOf(p.Phase)
	if f == "" {
		return ""
	}
	out := ""
	if r, ok := phaseRatio(s, p.Phase, f); ok {
		out = fmt.Sprintf("%.2f", r)
	}
	if p.Phase == phaseConverge {
		if r, ok := phaseRatio(s, phaseConverge, phaseFloorRecord); ok {
			out += fmt.Sprintf(" (%.2f)", r)
		}
	}
	if r, ok := phaseRatio(s, p.Phase, proofFloorOf(p.Phase)); ok {
		out += fmt.Sprintf(" [%.2f]", r)
	}
	return out
}

func readsOf(t *tally) int {
	if t == nil {
		return 0
	}
	return t.Reads
}

func writesOf(t *tally) int {
	if t == nil {
		return 0
	}
	return t.Writes
}

func perB(v, per int) string {
	return fmt.Sprintf("%.2f", float64(v)/float64(max(per, 1)))
}

func metricRW(p *phaseResult) string {
	if p.VaultMetric == nil {
		return ""
	}
	m := p.VaultMetric
	per := float64(max(p.Per, 1))
	return fmt.Sprintf("%.2f / %.2f", (m["read"]+m["list"])/per, (m["write"]+m["delete"])/per)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return s
}
