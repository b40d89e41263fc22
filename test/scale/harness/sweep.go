//go:build integration

package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// sweepPrefix names the objects the sweep phase adds beside the fleet:
// an administrator's entities and roles, which no binding accounts for.
const sweepPrefix = "sweep-extra-"

// sweepInterval is the sweep phase's --lost-minion-sweep-interval
// (BENCH_SWEEP, default 2 minutes): the phase waits one sweep out.
func sweepInterval() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("BENCH_SWEEP")); err == nil && d >= 10*time.Second {
		return d
	}
	return 2 * time.Minute
}

// sweepResult is what the sweep phase measured of one sweep.
type sweepResult struct {
	Interval time.Duration
	// Extras are the objects nobody accounts for (entities and roles, as
	// many of each), Lists the sweep's LISTs, ExtraReads its reads of them.
	Extras, Lists, ExtraReads int
	// OtherReads are the operator's other reads meanwhile (its drift
	// checks), Writes all its writes (none is lost: 0).
	OtherReads, Writes int
	// Buckets counts the extras' reads in each tenth of the interval from
	// the sweep's first list; Last is when the last one came.
	Buckets []int
	Last    time.Duration
}

// sweep measures one sweep for lost minions at fleet size, nothing lost:
// beside the N bindings, N/10 entities and N/10 roles an administrator
// made (no binding accounts for them, so the sweep reads each once). The
// operator restarts with the interval of sweepInterval; the phase ends
// when every extra object was read. What the sweep may cost: a LIST of the
// entities and one of the roles, a read per extra object, spread over the
// interval, and no write.
func (h *harness) sweep(ctx context.Context, r *phaseResult) (time.Duration, error) {
	extras := max(h.n/10, 10)
	interval := sweepInterval()
	if err := h.sweepExtras(ctx, extras, false); err != nil {
		return 0, err
	}
	defer func() { _ = h.sweepExtras(context.Background(), extras, true) }()
	from, err := h.w.vaultAudit.offsets()
	if err != nil {
		return 0, err
	}
	if err := h.op.stop(ctx); err != nil {
		return 0, err
	}
	h.op.extraArgs = []string{"--lost-minion-sweep-interval=" + interval.String()}
	t0 := time.Now()
	if err := h.op.start(ctx); err != nil {
		return 0, err
	}
	res := &sweepResult{Interval: interval, Extras: extras}
	err = poll(ctx, 2*time.Second, interval+interval/2+time.Minute, func() (bool, error) {
		to, err := h.w.vaultAudit.offsets()
		if err != nil {
			return false, err
		}
		calls, err := h.w.vaultAudit.calls(from, to, h.w.accessors, "operator")
		if err != nil {
			return false, err
		}
		*res = tallySweep(calls, extras, interval)
		return res.ExtraReads >= 2*extras, nil
	})
	wall := time.Since(t0)
	r.Note = res.String()
	if err != nil {
		return wall, fmt.Errorf("%d of %d extra objects read: %w", res.ExtraReads, 2*extras, err)
	}
	if res.Writes > 0 {
		return wall, fmt.Errorf("%d Vault writes with nothing lost", res.Writes)
	}
	return wall, nil
}

// tallySweep reads a sweep's calls: its lists, its reads of the extra
// objects (an entity read by name, a role's role ID) and when they came.
func tallySweep(calls []vaultCall, extras int, interval time.Duration) sweepResult {
	res := sweepResult{Interval: interval, Extras: extras, Buckets: make([]int, 10)}
	var start time.Time
	for _, c := range calls {
		switch {
		case c.Write:
			res.Writes++
		case c.Class == "entity list" || c.Class == "role list":
			res.Lists++
			if start.IsZero() {
				start = c.At
			}
		case strings.Contains(c.Path, sweepPrefix):
			res.ExtraReads++
			at := c.At.Sub(start)
			res.Last = max(res.Last, at)
			res.Buckets[min(max(int(at*10/interval), 0), 9)]++
		default:
			res.OtherReads++
		}
	}
	return res
}

func (s sweepResult) String() string {
	lo, hi := slices.Min(s.Buckets), slices.Max(s.Buckets)
	return fmt.Sprintf("one sweep, interval %s: %d lists, %d reads of the %d+%d objects no binding accounts for (%.2f per object), "+
		"the last %s after the first list; per tenth of the interval %v (min %d, max %d); %d other reads (drift checks), %d writes",
		s.Interval, s.Lists, s.ExtraReads, s.Extras, s.Extras, float64(s.ExtraReads)/float64(2*s.Extras), s.Last.Round(time.Second),
		s.Buckets, lo, hi, s.OtherReads, s.Writes)
}

// sweepExtras creates (or deletes) the administrator's entities and roles
// the sweep phase adds, as root, with the creators' parallelism.
func (h *harness) sweepExtras(ctx context.Context, n int, remove bool) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range n {
		name := fmt.Sprintf("%s%05d", sweepPrefix, i)
		g.Go(func() error {
			for _, p := range []string{"identity/entity/name/" + name, "auth/salt-minions/role/" + name} {
				var err error
				if remove {
					_, err = h.w.root.Logical().DeleteWithContext(ctx, p)
				} else if strings.HasPrefix(p, "identity/") {
					_, err = h.w.root.Logical().WriteWithContext(ctx, p, map[string]any{"metadata": map[string]string{"owner": "admin"}})
				} else {
					_, err = h.w.root.Logical().WriteWithContext(ctx, p, map[string]any{"token_policies": []string{"default"}})
				}
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}
