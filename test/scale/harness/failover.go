//go:build integration

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// The failover phase: the operator runs with leader election from its
// start, as two replicas would. The phase starts a second instance, the
// standby, which must wait; SIGKILLs the leader, as a node failure would
// (no lease released); and measures the hand-over: when the standby holds
// the Lease and reconciles, that it writes nothing to Vault, that it
// spreads its drift checks over the interval instead of reading every
// binding at once, that no binding stops being Ready, and that a binding
// changed at the takeover reaches Vault at once. The standby then is the
// operator under measurement for the later phases.

// failoverResult is what the failover phase measured besides the row.
type failoverResult struct {
	// LeaseDuration is the lease's; Interval the template's during the
	// phase; Watch how long the new leader's reads were counted.
	LeaseDuration, Interval, Watch time.Duration
	// RenewedBefore is how long before the kill the leader last renewed.
	RenewedBefore time.Duration
	// From the kill: the standby acquired the Lease (its acquireTime),
	// reconciled a first binding, and had reconciled every binding once
	// with nothing queued or running.
	Lease, FirstReconcile, AllReconciled time.Duration
	// Writes are the operator's Vault writes of the bindings' objects and
	// policies from the kill to the end of the watch, the changed
	// binding's aside, by kind in WriteKinds; UpkeepWrites its token's.
	Writes       int
	WriteKinds   map[string]int `json:",omitempty"`
	UpkeepWrites int
	// Minutes are the operator's Vault reads in each minute after the
	// takeover; Steady is N×budgetResyncVaultReads per Interval, the
	// rate of drift checks spread over the interval, per minute.
	Minutes []minuteReads
	Steady  float64
	// ReadyLow is the fewest bindings Ready at once, from the kill to the
	// end of the watch.
	ReadyLow int
	// Changed is the binding whose roles changed at the takeover, Change
	// how long from the patch until its entity in Vault showed them.
	Changed string
	Change  time.Duration
	// ChangeCalls are the operator's Vault calls for the changed binding,
	// from the patch on (audit log timestamps): when its reconcile began
	// and what it waited on.
	ChangeCalls []string `json:",omitempty"`
}

// minuteReads are the operator's Vault reads in one minute: of the
// bindings' objects (the drift checks), of policies, and its upkeep.
type minuteReads struct {
	Bindings, Policies, Upkeep int
}

// maxRatio is the busiest minute's reads of the bindings' objects over the
// steady rate.
func (f *failoverResult) maxRatio() float64 {
	mx := 0
	for _, m := range f.Minutes {
		mx = max(mx, m.Bindings)
	}
	if f.Steady <= 0 {
		return 0
	}
	return float64(mx) / f.Steady
}

func (h *harness) failover(ctx context.Context, r *phaseResult) (time.Duration, error) {
	f := &failoverResult{LeaseDuration: leaseDuration, Interval: failoverInterval, Watch: h.cfg.FailoverWatch,
		Steady: float64(h.n*budgetResyncVaultReads) / failoverInterval.Minutes()}
	r.Failover = f
	restore, err := h.setInterval(ctx, failoverInterval)
	if err != nil {
		return 0, err
	}
	leader, err := h.startStandby(ctx)
	if err != nil {
		return 0, err
	}
	h.track.setPredicate(readyAny)
	before, err := h.lease(ctx)
	if err != nil {
		return 0, err
	}
	from, err := h.w.vaultAudit.offsets()
	if err != nil {
		return 0, err
	}
	old, sb := h.op, h.standby
	killed, err := old.kill(ctx)
	if err != nil {
		return 0, fmt.Errorf("killing the leader: %w", err)
	}
	sb.takeOver(old)
	h.setOperator(sb)
	h.standby = nil
	f.RenewedBefore = killed.Sub(before.renewed)

	// The standby's reconciles, polled while the lease is watched.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reconciled := make(chan error, 1)
	go func() {
		var err error
		f.FirstReconcile, f.AllReconciled, err = h.waitReconciles(rctx, sb, killed)
		reconciled <- err
	}()
	taken, err := h.waitLease(ctx, leader)
	var patched time.Time
	if err == nil {
		f.Lease = taken.acquired.Sub(killed)
		f.Changed, patched, f.Change, err = h.changeAtTakeover(ctx)
	}
	if err != nil {
		cancel()
	}
	if rerr := <-reconciled; err == nil {
		err = rerr
	}
	if err != nil {
		return f.AllReconciled, err
	}

	if err := h.watchUntil(ctx, taken.acquired.Add(h.cfg.FailoverWatch)); err != nil {
		return f.AllReconciled, err
	}
	f.ReadyLow = h.track.lowest()
	to, err := h.w.vaultAudit.offsets()
	if err != nil {
		return f.AllReconciled, err
	}
	calls, err := h.w.vaultAudit.calls(from, to, h.w.accessors, "operator")
	if err != nil {
		return f.AllReconciled, err
	}
	f.Writes, f.WriteKinds, f.UpkeepWrites = writesExcept(calls, f.Changed)
	f.ChangeCalls = callsFor(calls, f.Changed, patched)
	f.Minutes = readsPerMinute(calls, taken.acquired, int(h.cfg.FailoverWatch/time.Minute))
	r.Note = fmt.Sprintf("template interval %s during the phase; the wall time is from the kill until the new leader reconciled every binding once", failoverInterval)
	return f.AllReconciled, restore(ctx)
}

// readyAny: Ready is True, for whatever generation: a binding changed and
// not reconciled yet is still Ready.
func readyAny(b *v1alpha1.MinionBinding) bool {
	return apimeta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ReadyCondition)
}

// setInterval sets the template's interval and waits until it is Ready
// for that generation; restore sets back what it was. Bindings in sync
// keep the checks they have: only a new process spreads its first ones
// over the new interval.
func (h *harness) setInterval(ctx context.Context, d time.Duration) (restore func(context.Context) error, err error) {
	var was *metav1.Duration
	if err := h.updateTemplate(ctx, func(tpl *v1alpha1.MinionTemplate) {
		was = tpl.Spec.Interval
		tpl.Spec.Interval = &metav1.Duration{Duration: d}
	}); err != nil {
		return nil, err
	}
	if err := h.waitTemplate(ctx, time.Minute); err != nil {
		return nil, fmt.Errorf("interval %s: %w", d, err)
	}
	return func(ctx context.Context) error {
		if err := h.updateTemplate(ctx, func(tpl *v1alpha1.MinionTemplate) { tpl.Spec.Interval = was }); err != nil {
			return err
		}
		if err := h.waitTemplate(ctx, time.Minute); err != nil {
			return fmt.Errorf("interval back to %v: %w", was, err)
		}
		return nil
	}, nil
}

// leaseState is what the harness reads of the operator's Lease.
type leaseState struct {
	holder            string // "" when released
	acquired, renewed time.Time
}

func (h *harness) lease(ctx context.Context) (leaseState, error) {
	l := &coordinationv1.Lease{}
	if err := h.w.admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: leaseName}, l); err != nil {
		return leaseState{}, fmt.Errorf("reading the lease %s/%s: %w", operatorNamespace, leaseName, err)
	}
	var s leaseState
	if l.Spec.HolderIdentity != nil {
		s.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		s.acquired = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		s.renewed = l.Spec.RenewTime.Time
	}
	return s, nil
}

// leaseReleased says, for the restart's note, whether the instance that
// stopped released its lease. When it did not (a release before
// LeaderElectionReleaseOnCancel), the harness deletes the Lease, so that
// the restart measures the new process's start, not the lease's expiry
// (the failover measures that).
func (h *harness) leaseReleased(ctx context.Context) (string, error) {
	s, err := h.lease(ctx)
	if apierrors.IsNotFound(err) {
		return "no lease", nil
	}
	if err != nil {
		return "", err
	}
	if s.holder == "" {
		return "the lease was released on shutdown", nil
	}
	l := &coordinationv1.Lease{}
	l.Namespace, l.Name = operatorNamespace, leaseName
	if err := client.IgnoreNotFound(h.w.admin.Delete(ctx, l)); err != nil {
		return "", fmt.Errorf("deleting the lease: %w", err)
	}
	return "the lease was NOT released on shutdown (the harness deleted it)", nil
}

// startStandby starts the second instance beside the leader and checks
// that it waits: for three retry periods the lease stays the leader's and
// the standby reconciles nothing. It returns the leader's identity.
func (h *harness) startStandby(ctx context.Context) (string, error) {
	s, err := h.lease(ctx)
	if err != nil {
		return "", err
	}
	if s.holder == "" {
		return "", fmt.Errorf("no one holds the lease %s/%s", operatorNamespace, leaseName)
	}
	h.standby = h.newOperator("standby")
	if err := h.standby.start(ctx); err != nil {
		return "", fmt.Errorf("the standby: %w", err)
	}
	// A standby waits for the Lease only once its caches are filled, and
	// client-go counts the lease from when it first saw the leader's
	// renewal, not from the renewal's time: a standby killed into before it
	// polls would take the Lease a lease after its first poll, not after
	// the leader's last renewal. Replicas wait long before a failover, so
	// the kill waits for the standby's first poll.
	if err := h.standby.waitLog(ctx, "attempting to acquire leader lease", 2*time.Minute); err != nil {
		return "", fmt.Errorf("the standby: %w", err)
	}
	deadline := time.Now().Add(3 * leaseRetry)
	for time.Now().Before(deadline) {
		now, err := h.lease(ctx)
		if err != nil {
			return "", err
		}
		if now.holder != s.holder {
			return "", fmt.Errorf("the lease went from %q to %q while the leader ran", s.holder, now.holder)
		}
		rec, _, _, err := reconcileState(ctx, h.standby)
		if err != nil {
			return "", fmt.Errorf("the standby: %w", err)
		}
		if rec > 0 {
			return "", fmt.Errorf("the standby reconciled %v bindings while the leader ran", rec)
		}
		if err := h.op.alive(); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return s.holder, nil
}

// waitLease polls the lease every 50 ms until someone other than old holds
// it.
func (h *harness) waitLease(ctx context.Context, old string) (leaseState, error) {
	var s leaseState
	err := poll(ctx, 50*time.Millisecond, 4*leaseDuration, func() (bool, error) {
		var err error
		if s, err = h.lease(ctx); err != nil {
			return false, err
		}
		return s.holder != "" && s.holder != old, h.op.alive()
	})
	if err != nil {
		return s, fmt.Errorf("the standby did not take the lease (holder %q): %w", s.holder, err)
	}
	if s.acquired.IsZero() {
		s.acquired = time.Now() // no acquireTime: when the harness saw it
	}
	return s, nil
}

// waitReconciles polls o's metrics every 50 ms from the kill: when it
// reconciled a first binding, and when it had reconciled every binding
// once with nothing queued or running (as the restart), both from killed.
func (h *harness) waitReconciles(ctx context.Context, o *operatorProc, killed time.Time) (first, all time.Duration, err error) {
	var rec, depth, active float64
	err = poll(ctx, 50*time.Millisecond, h.cfg.phaseTimeout(h.n)+2*leaseDuration, func() (bool, error) {
		var err error
		if rec, depth, active, err = reconcileState(ctx, o); err != nil {
			return false, err
		}
		if rec > 0 && first == 0 {
			first = time.Since(killed)
		}
		if rec >= float64(h.n) && depth == 0 && active == 0 {
			all = time.Since(killed)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return first, all, fmt.Errorf("the new leader reconciled %v of %d (queue %v, running %v): %w", rec, h.n, depth, active, err)
	}
	return first, all, nil
}

// changeAtTakeover changes one binding's roles to another existing role
// (no new policy) as soon as the standby holds the lease, and times how
// long until its entity in Vault shows them: the new leader's first pass
// over every binding must not hold up a change.
func (h *harness) changeAtTakeover(ctx context.Context) (string, time.Time, time.Duration, error) {
	k := h.n / 4
	name := minionID(k)
	roles := []string{rolesOf(k + 1)[0], "web"}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"pillar": map[string]any{"roles": roles}}})
	if err != nil {
		return name, time.Time{}, 0, err
	}
	obj := &v1alpha1.MinionBinding{}
	obj.Namespace, obj.Name = bindingNamespace, name
	start := time.Now()
	if err := h.w.admin.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return name, start, 0, fmt.Errorf("changing %s at the takeover: %w", name, err)
	}
	var md map[string]string
	err = poll(ctx, 20*time.Millisecond, time.Minute, func() (bool, error) {
		var err error
		md, err = h.entityMetadata(ctx, name)
		return md["roles"] == metadataRoles(roles), err
	})
	if err != nil {
		return name, start, 0, fmt.Errorf("%s changed at the takeover: entity roles %q: %w", name, md["roles"], err)
	}
	return name, start, time.Since(start), nil
}

// callsFor lists the calls for minion's objects after patched, each with
// its time from the patch, for the report: a change that reaches Vault
// late either began late (the first call) or waited between its calls.
func callsFor(calls []vaultCall, minion string, patched time.Time) []string {
	var out []string
	for _, c := range calls {
		if c.At.Before(patched) || !strings.Contains(c.Path, minion) || len(out) == 12 {
			continue
		}
		rw := "R"
		if c.Write {
			rw = "W"
		}
		out = append(out, fmt.Sprintf("%s %s +%s", rw, c.Path, c.At.Sub(patched).Round(time.Millisecond)))
	}
	return out
}

// watchUntil waits until t, checking every second that the operator runs.
func (h *harness) watchUntil(ctx context.Context, t time.Time) error {
	for time.Now().Before(t) {
		if err := h.op.alive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Second, time.Until(t))):
		}
	}
	return nil
}

// writesExcept counts the writes of the bindings' objects and policies
// among calls, except those whose path names minion, by kind; and the
// upkeep's writes (a token renewal).
func writesExcept(calls []vaultCall, minion string) (n int, kinds map[string]int, upkeep int) {
	kinds = map[string]int{}
	for _, c := range calls {
		switch {
		case !c.Write:
		case !slices.Contains(objectClasses, c.Class):
			upkeep++
		case !strings.Contains(c.Path, minion):
			n++
			kinds[c.Class+" W"]++
		}
	}
	return n, kinds, upkeep
}

// readsPerMinute counts the reads among calls in each of the minutes
// from start.
func readsPerMinute(calls []vaultCall, start time.Time, minutes int) []minuteReads {
	out := make([]minuteReads, minutes)
	for _, c := range calls {
		if c.Write || c.At.Before(start) {
			continue
		}
		i := int(c.At.Sub(start) / time.Minute)
		if i >= minutes {
			continue
		}
		switch {
		case c.Class == "policy":
			out[i].Policies++
		case slices.Contains(objectClasses, c.Class):
			out[i].Bindings++
		default:
			out[i].Upkeep++
		}
	}
	return out
}
