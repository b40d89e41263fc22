//go:build integration

package harness

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Environment variables of the HA benchmark (make bench-ha sets them).
const (
	envHAN      = "SCALE_HA_N"      // bindings per fleet (default 1000)
	envHAModes  = "SCALE_HA_MODES"  // active-following, standby, or both (default)
	envHASealed = "SCALE_HA_SEALED" // how long the restarted node stays sealed (default 20s)
	envHAPerf   = "SCALE_HA_PERF"   // raft performance_multiplier (default Vault's, 5)
	envHAKeep   = "SCALE_HA_KEEP"   // a folder to keep the operator's and the Vault nodes' logs in
)

// HACIN is the fleet TestVaultHA runs.
const HACIN = 50

// The HA goals, checked by TestVaultHA and reported by BenchmarkHA.
const (
	// haRetryBound: once Vault answers again, the operator finds out
	// within the connection check's retry (minRetry in
	// controllers/connection/gate.go, 2 s, while Vault does not answer, is
	// sealed or fails): the bindings that failed wait on the connection's
	// gate, and the check that passes opens it, waking them all at once.
	haRetryBound = 2 * time.Second
	// haSlack is what else a disturbed operation may take beyond the
	// undisturbed one, the outage and haRetryBound: the reconciles in
	// flight at the disturbance fail and are done again (backoff from
	// 5 ms), every waiting binding writes its Ready=False and, woken,
	// its Ready again (two status writes each), and the bindings already
	// done are woken too (no Vault call: they wait for their drift check).
	haSlack = 10 * time.Second
	// haExtraCalls: a disturbance may cost at most this many more Vault
	// calls (reads and writes each) per binding than the same undisturbed
	// operation (the reconciles in flight at the disturbance fail and are
	// done again, each a few calls).
	haExtraCalls = 0.5
)

// HAChecks are the goals over every mode's run.
func HAChecks(all []*haModeResult) []Check {
	var out []Check
	for _, m := range all {
		if m.Err != "" {
			out = append(out, Check{Goal: m.Mode + ": the run completes", Measured: m.Err})
		}
		for _, p := range m.Phases {
			name := fmt.Sprintf("%s %s %s", m.Mode, p.Fleet, p.Op)
			out = append(out,
				Check{Goal: name + ": completes", OK: p.Err == "", Measured: firstLine(p.Err)},
				Check{Goal: name + ": no binding Stalled", OK: len(p.Stalled) == 0, Measured: strings.Join(p.Stalled, "; ")},
				Check{Goal: name + ": no panic in the operator", OK: len(p.Panics) == 0, Measured: strings.Join(p.Panics, "; ")},
				Check{Goal: name + ": the connection's Vault identity unchanged (a change has every binding checked)", OK: p.IdentityChanges == 0,
					Measured: strings.Join(p.Connection, "; ")},
				Check{Goal: name + ": Vault as rendered, nothing duplicated, every object proven the binding's", OK: len(p.Problems) == 0, Measured: p.Check})
			base := m.phase("base", p.Op)
			if p.Fleet == "base" || base == nil || p.Err != "" || base.Err != "" {
				continue
			}
			delay, bound := p.Wall-base.Wall, p.outage()+haRetryBound+haSlack
			out = append(out, Check{
				Goal: fmt.Sprintf("%s: all Ready within the outage + %s + %s after the undisturbed operation's time", name, haRetryBound, haSlack),
				OK:   delay <= bound,
				Measured: fmt.Sprintf("%s against %s undisturbed: %s later; outage %s (Vault back at the operator's address; election %s, sealed %s), the operator's first call after it %s",
					sec(p.Wall), sec(base.Wall), sec(delay), sec(p.outage()), sec(p.Election), sec(p.Sealed), sec(p.Resumed-p.Back)),
			})
			if p.Vault != nil && base.Vault != nil {
				n := float64(p.N)
				r, w := float64(p.Vault.Reads)/n, float64(p.Vault.Writes)/n
				br, bw := float64(base.Vault.Reads)/n, float64(base.Vault.Writes)/n
				out = append(out, Check{
					Goal:     fmt.Sprintf("%s: at most %.1f more Vault reads and writes per binding than undisturbed", name, haExtraCalls),
					OK:       r <= br+haExtraCalls && w <= bw+haExtraCalls,
					Measured: fmt.Sprintf("R/b %.2f (undisturbed %.2f), W/b %.2f (undisturbed %.2f)", r, br, w, bw),
				})
			}
		}
	}
	return out
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func sec(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// HAHeader describes the run.
func HAHeader(cfg HAConfig, command string, started time.Time, host string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Vault HA: the operator through failovers\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n", command)
	fmt.Fprintf(&b, "- started %s; %s\n", started.Format(time.RFC3339), host)
	perf := "Vault's default (5)"
	if cfg.PerfMultiplier > 0 {
		perf = strconv.Itoa(cfg.PerfMultiplier)
	}
	fmt.Fprintf(&b, "- Vault: three nodes of the tools' vault on integrated storage (raft), performance_multiplier %s, every node a voter before each operation; modes %v\n", perf, cfg.modes)
	fmt.Fprintf(&b, "- N=%d bindings per fleet; %d parallel creators; operator `--concurrency=%d` (its own process, leader election on); the disturbance when %.0f %% of the fleet is Ready with the operation; a restarted node stays sealed %s from its kill\n",
		cfg.N, cfg.creators, cfg.concurrency, cfg.disturbAt*100, cfg.SealedFor)
	if os.Getenv("SCALE_HA_DEBUG") != "" {
		fmt.Fprintf(&b, "- the operator logged at debug level (SCALE_HA_DEBUG): why each binding was compared with Vault\n")
	}
	if cfg.Parallel {
		fmt.Fprintf(&b, "- the modes ran at once, each on its own servers\n")
	}
	return b.String()
}

// HATable is the report's body.
func HATable(all []*haModeResult, checks []Check) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n| mode | operation | disturbance | wall s | ×undisturbed | disturbed at s | node | election s | proxy s | sealed s | back s | resumed s | recovery s | Vault R/b | Vault W/b | failed calls | Ready low | Ready=False seen | Stalled | Vault afterwards |\n")
	fmt.Fprintf(&b, "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n")
	for _, m := range all {
		for _, p := range m.Phases {
			ratio := ""
			if base := m.phase("base", p.Op); base != nil && p.Fleet != "base" && base.Wall > 0 {
				ratio = fmt.Sprintf("%.2f", p.Wall.Seconds()/base.Wall.Seconds())
			}
			r, w, failed := "", "", ""
			if p.Vault != nil {
				r = fmt.Sprintf("%.2f", float64(p.Vault.Reads)/float64(p.N))
				w = fmt.Sprintf("%.2f", float64(p.Vault.Writes)/float64(p.N))
				f := 0
				for _, n := range p.Vault.Failed {
					f += n
				}
				failed = strconv.Itoa(f)
			}
			low := ""
			if strings.HasPrefix(p.Op, "rollout") {
				low = strconv.Itoa(p.ReadyLow)
			}
			check := "ok"
			if len(p.Problems) > 0 {
				check = fmt.Sprintf("%d problems", len(p.Problems))
			}
			if p.Err != "" {
				check += "; FAILED: " + firstLine(p.Err)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n",
				m.Mode, p.Op, p.Disturbance, p.Wall.Seconds(), ratio, secOrDash(p.DisturbedAt), dash(p.Node), secOrDash(p.Election), secOrDash(p.ProxyFollowed),
				secOrDash(p.Sealed), secOrDash(p.Back), secOrDash(p.Resumed), secOrDash(p.Recovery), r, w, failed, low, reasons(p.NotReady), len(p.Stalled), check)
		}
	}
	b.WriteString("\nwall: from the operation's start (the first binding created, the template updated) until every binding of the fleet was Ready with it and the template Ready for its generation. ×undisturbed: over the same operation of the undisturbed fleet (base) on the same servers, just before. election: from the disturbance (the SIGKILL sent, the step-down answered) until another node answered sys/health as active (polled every 20 ms); proxy: until the active-following proxy sent new connections there. sealed: from the kill until the unseal. back: from the disturbance until Vault answered a token lookup at the operator's address (the proxy, or its standby) again, polled every 50 ms on new connections: the outage the operator sees. resumed: until the operator's first call about a binding's objects after that, in the audit logs. recovery: from the disturbance until every binding was Ready with the operation. Vault R/W per binding: the operator's calls in every node's file audit log, from the start until its calls stopped after the goal; failed: those answered with an error. Ready low: the fewest bindings Ready at once during a rollout. Ready=False seen: bindings that went through Ready=False, by reason. Vault afterwards: fleetcheck over both fleets, as root (duplicates, orphans, missing objects, role or entity not proven the binding's, Vault differing from the rendering, status).\n")

	b.WriteString("\n## Calls per binding by kind\n\nThe operator's Vault calls per binding of the fleet, by kind; failed: answered with an error; other fleet: calls about the other fleet's objects, which the operation leaves as they are (they wait for their drift checks).\n\n| mode | fleet | operation | Vault (audit logs) | failed | other fleet |\n|---|---|---|---|---|---:|\n")
	for _, m := range all {
		for _, p := range m.Phases {
			if p.Vault == nil {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d |\n", m.Mode, p.Fleet, p.Op, byKindPer(p.Vault.By, p.N), byKindPer(p.Vault.Failed, 1), p.OtherFleet)
		}
	}
	b.WriteString("\n## The VaultConnection's status during each disturbed operation\n\n")
	for _, m := range all {
		for _, p := range m.Phases {
			if p.Fleet == "base" || len(p.Connection) == 0 {
				continue
			}
			fmt.Fprintf(&b, "- %s %s (%s; identity changed %d times): %s\n", m.Mode, p.Op, p.Disturbance, p.IdentityChanges, strings.Join(p.Connection, "; "))
		}
	}
	b.WriteString("\n## The proxy's target over each run\n\n")
	for _, m := range all {
		if len(m.Switches) == 0 {
			continue
		}
		t0 := m.Switches[0].At
		var parts []string
		for _, s := range m.Switches {
			parts = append(parts, fmt.Sprintf("+%s → %s", s.At.Sub(t0).Round(100*time.Millisecond), nodeName(s.To)))
		}
		fmt.Fprintf(&b, "- %s: %s\n", m.Mode, strings.Join(parts, ", "))
	}
	var problems []string
	for _, m := range all {
		if m.Err != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", m.Mode, m.Err))
		}
		for _, p := range m.Phases {
			for _, pr := range p.Problems[:min(len(p.Problems), 20)] {
				problems = append(problems, fmt.Sprintf("%s %s %s: %s", m.Mode, p.Fleet, p.Op, pr))
			}
			for _, s := range p.Stalled {
				problems = append(problems, fmt.Sprintf("%s %s %s: Stalled %s", m.Mode, p.Fleet, p.Op, s))
			}
			for _, s := range p.Panics {
				problems = append(problems, fmt.Sprintf("%s %s %s: panic %s", m.Mode, p.Fleet, p.Op, s))
			}
		}
	}
	if len(problems) > 0 {
		b.WriteString("\n## Problems\n\n")
		for _, p := range problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	if len(checks) > 0 {
		b.WriteString("\n## Goals\n\n| goal | met | measured |\n|---|---|---|\n")
		for _, c := range checks {
			met := "yes"
			if !c.OK {
				met = "**NO**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Goal, met, strings.ReplaceAll(c.Measured, "|", "/"))
		}
	}
	return b.String()
}

func nodeName(i int) string {
	if i < 0 {
		return "none"
	}
	return fmt.Sprintf("vault-%d", i)
}

func secOrDash(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", d.Seconds())
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func reasons(m map[string]int) string {
	if len(m) == 0 {
		return "–"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// byKindPer lists counts by kind divided by n, the largest first.
func byKindPer(by map[string]int, n int) string {
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if by[keys[i]] != by[keys[j]] {
			return by[keys[i]] > by[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		if n == 1 {
			parts[i] = fmt.Sprintf("%s %d", k, by[k])
		} else {
			parts[i] = fmt.Sprintf("%s %.2f", k, float64(by[k])/float64(n))
		}
	}
	return strings.Join(parts, ", ")
}

// HAFromEnv applies the SCALE_HA_* variables.
func HAFromEnv(cfg HAConfig) (HAConfig, error) {
	if v := strings.TrimSpace(os.Getenv(envHAN)); v != "" {
		n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
		if err != nil || n < 10 {
			return cfg, fmt.Errorf("%s: %q is not a size of at least 10", envHAN, v)
		}
		cfg.N = n
	}
	if v := strings.TrimSpace(os.Getenv(envHAModes)); v != "" && v != "both" {
		cfg.modes = nil
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' }) {
			switch {
			case strings.HasPrefix(modeActive, f):
				cfg.modes = append(cfg.modes, modeActive)
			case strings.HasPrefix(modeStandby, f):
				cfg.modes = append(cfg.modes, modeStandby)
			default:
				return cfg, fmt.Errorf("%s: unknown mode %q (%s or %s)", envHAModes, f, modeActive, modeStandby)
			}
		}
		cfg.modes = slices.Compact(cfg.modes)
	}
	if v := os.Getenv(envHASealed); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return cfg, fmt.Errorf("%s: %q is not a duration of at least 1s", envHASealed, v)
		}
		cfg.SealedFor = d
	}
	if v := os.Getenv(envHAPerf); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 10 {
			return cfg, fmt.Errorf("%s: %q is not a performance multiplier from 1 to 10", envHAPerf, v)
		}
		cfg.PerfMultiplier = p
	}
	if v := os.Getenv(envTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", envTimeout, err)
		}
		cfg.PhaseTimeout = d
	}
	cfg.keep = os.Getenv(envHAKeep)
	return cfg, nil
}
