//go:build integration

package scale

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// processes are the CPU columns, in order.
var processes = []string{"apiserver", "etcd", "vault", "operator", "harness"}

// header says how the numbers were made: the command, the machine, the
// settings.
func header(cfg config, command string, started time.Time, machine string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Scale benchmark: the operator against the floor\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n", command)
	fmt.Fprintf(&b, "- started %s; %s\n", started.Format(time.RFC3339), machine)
	fmt.Fprintf(&b, "- N %v, shapes %v; %d parallel creators, floor with %d workers, operator `--concurrency=%d`; fresh servers per N and shape\n",
		cfg.ns, cfg.shapes, cfg.creators, cfg.floorWorkers, cfg.concurrency)
	return b.String()
}

// table renders every phase of every run as one markdown table, then the
// breakdowns, the latencies, what deletion left, the goals and the profiles.
func table(all []*shapeResult, goals []check) string {
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
		"the forced resync's and the template change's over their floor's (the least work of the phase, on the plain floor's bindings: " +
		"the annotation, three Vault reads and a status patch; the entity written and a status patch). ")
	b.WriteString("/b: per binding (the single-change row: per change). Vault R/W: the actor's calls in Vault's file audit log " +
		"(reads: read, list, and identity lookups; writes: create, update, delete). metric: the operator's " +
		"`minionvault_vault_requests_total` by its operation label (read+list / write+delete). K8s W: create, update, patch, " +
		"delete by the actor's user in the API server's audit log, events and status included. CPU: utime+stime from " +
		"/proc/<pid>/stat over the phase, including the second or more until the calls stopped. RSS: VmRSS at the end, " +
		"VmHWM over the phase.\n")
	b.WriteString("\n## etcd updates of MinionBindings per binding write\n\n" +
		"The API server's etcd updates of MinionBindings (its `etcd_request_duration_seconds` count), over the writes of bindings in its audit log " +
		"by the actor: above 1, an update met a stale object in the watch cache and was applied again.\n\n| N | shape | phase | etcd updates per binding | binding writes per binding | ratio |\n|---:|---|---|---:|---:|---:|\n")
	for _, s := range all {
		for _, p := range s.Phases {
			if p.Phase != phaseFloor && p.Phase != phaseFloorRecord && p.Phase != phaseConverge {
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
	writeProfiles(&b, "CPU profiles of the servers (floors, converge, forced resync, template change)", all, func(p *phaseResult) []profileBlock {
		var out []profileBlock
		for _, sp := range p.Servers {
			out = append(out, profileBlock{", " + sp.Server, "go tool pprof -top " + sp.Path, sp.Top})
		}
		return out
	})
	return b.String()
}

// profileBlock is one profile in the report: what it is of (after the
// phase), the command that shows it, and that command's output.
type profileBlock struct {
	what, command, top string
}

// writeProfiles writes a section with the blocks of every phase, or
// nothing when there are none.
func writeProfiles(b *strings.Builder, heading string, all []*shapeResult, blocks func(*phaseResult) []profileBlock) {
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

func fmtRatio(s *shapeResult, p *phaseResult) string {
	f := floorOf(p.Phase)
	if f == "" {
		return ""
	}
	out := ""
	if r, ok := phaseRatio(s, p.Phase, f); ok {
		out = fmt.Sprintf("%.2f", r)
	}
	if p.Phase != phaseConverge {
		return out
	}
	if r, ok := phaseRatio(s, phaseConverge, phaseFloorRecord); ok {
		out += fmt.Sprintf(" (%.2f)", r)
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
