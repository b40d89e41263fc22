//go:build integration

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// runShape measures one shape at n bindings: the floors first (no
// operator running), then the operator's phases, each converge on fresh
// servers (see all).
func runShape(ctx context.Context, cfg Config, n int, shape string) *ShapeResult {
	return runRound(ctx, cfg, n, shape, 0)
}

// runRound is runShape as one round of several (0: the only one). Even rounds
// run the operator's phases first.
func runRound(ctx context.Context, cfg Config, n int, shape string, round int) *ShapeResult {
	label := shape
	if round > 0 {
		label = fmt.Sprintf("%s #%d", shape, round)
	}
	res := &ShapeResult{N: n, Shape: label, Base: shape, Round: round}
	h := &harness{cfg: cfg, n: n, shape: shape, label: label, res: res, operatorFirst: round > 0 && round%2 == 0}
	if err := h.all(ctx); err != nil {
		res.Err = err.Error()
	}
	return res
}

// all runs the floors, then the operator's phases (in even rounds the
// operator's first, then the floors). Each converge, the
// floors' and the operator's, begins on servers of its own that nothing
// ran on before: servers that earlier phases have grown are slower (in
// one run, the operator's converge after the three floors on the same
// servers cost Vault 24 % more CPU and the API server 16 % more than the
// baseline's on fresh ones, for the same calls), and a phase that met
// them would be charged for what came before it.
func (h *harness) all(ctx context.Context) error {
	operator := func() error { return h.onFreshServers(ctx, func() error { return h.operatorPhases(ctx) }) }
	if h.operatorFirst {
		if err := operator(); err != nil {
			return err
		}
		_, err := h.allFloors(ctx)
		return err
	}
	if ok, err := h.allFloors(ctx); !ok || err != nil {
		return err // a failed phase is recorded in it
	}
	return operator()
}

// allFloors runs the floors, each group on fresh servers; false when one
// failed (recorded in its phase).
func (h *harness) allFloors(ctx context.Context) (bool, error) {
	if h.cfg.skipFloors {
		return true, nil
	}
	for _, group := range [](func(context.Context) (bool, error)){h.floors, h.recordFloors, h.proofFloor} {
		ok := false
		if err := h.onFreshServers(ctx, func() (err error) {
			ok, err = h.watchingFloor(ctx, group)
			return err
		}); !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

// onFreshServers starts the servers, runs body against them and stops
// them.
func (h *harness) onFreshServers(ctx context.Context, body func() error) (err error) {
	w, err := setUp(ctx)
	if err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	defer func() {
		if serr := w.env.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stopping the servers: %w", serr)
		}
	}()
	h.w, h.profilers = w, nil
	if h.cfg.ProfileDir != "" {
		h.profilers = w.serverProfilers()
	}
	return body()
}

// watchingFloor runs floor phases with a tracker watching the floor's
// bindings, as one watches the operator's during its phases: the API
// server serves that watch an event per binding write, and the floor
// must pay for the harness's measuring as the operator does, or the
// ratios charge it to the operator.
func (h *harness) watchingFloor(ctx context.Context, phases func(context.Context) (bool, error)) (bool, error) {
	wctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	if _, err := startTracker(wctx, h.w.adminCfg, h.w.env.Scheme, floorNamespace); err != nil {
		return false, fmt.Errorf("watching the floor's bindings: %w", err)
	}
	return phases(ctx)
}

// floors runs the plain floor; false when it failed.
func (h *harness) floors(ctx context.Context) (bool, error) {
	return h.run(ctx, phaseFloor, "floor", h.n, h.floor), nil
}

// recordFloors runs the floor with the finalizer and the ownership record
// (the floor), then the rollouts' floors on its bindings, which
// are as heavy as the operator's (every write of a binding costs the API
// server in proportion), plain, then with the ownership proof.
func (h *harness) recordFloors(ctx context.Context) (bool, error) {
	if !h.run(ctx, phaseFloorRecord, "floor", h.n, h.floorRecord) {
		return false, nil
	}
	// The other floors only when their operator phase runs: they are
	// there for its ratio.
	if h.cfg.runsFloor(phaseFloorForced) && !h.run(ctx, phaseFloorForced, "floor", h.n, func(ctx context.Context, _ *phaseResult) (time.Duration, error) {
		return 0, h.lastFloor.forced(ctx, h.n)
	}) {
		return false, nil
	}
	if h.cfg.runsFloor(phaseFloorTemplate) && !h.run(ctx, phaseFloorTemplate, "floor", h.n, func(ctx context.Context, _ *phaseResult) (time.Duration, error) {
		return 0, h.lastFloor.change(ctx, h.n)
	}) {
		return false, nil
	}
	if h.shape == shapePerMinion && h.cfg.runsFloor(phaseFloorPolicy) && !h.run(ctx, phaseFloorPolicy, "floor", h.n, func(ctx context.Context, _ *phaseResult) (time.Duration, error) {
		return 0, h.lastFloor.policyChange(ctx, h.n)
	}) {
		return false, nil
	}
	// With the ownership proof, on the same bindings: each change is one
	// more (changes, policyChanges), to what Vault does not hold yet.
	h.lastFloor.proof = true
	if h.cfg.runsFloor(phaseFloorTemplateProof) && !h.run(ctx, phaseFloorTemplateProof, "floor", h.n, func(ctx context.Context, _ *phaseResult) (time.Duration, error) {
		return 0, h.lastFloor.change(ctx, h.n)
	}) {
		return false, nil
	}
	if h.shape == shapePerMinion && h.cfg.runsFloor(phaseFloorPolicyProof) && !h.run(ctx, phaseFloorPolicyProof, "floor", h.n, func(ctx context.Context, _ *phaseResult) (time.Duration, error) {
		return 0, h.lastFloor.policyChange(ctx, h.n)
	}) {
		return false, nil
	}
	return true, nil
}

// proofFloor runs the floor that also reads each object before it
// creates it.
func (h *harness) proofFloor(ctx context.Context) (bool, error) {
	return h.run(ctx, phaseFloorProof, "floor", h.n, h.floorProof), nil
}

// operatorPhases starts the operator and runs its phases.
func (h *harness) operatorPhases(ctx context.Context) error {
	defer h.stopOperators()
	h.setOperator(h.newOperator("operator"))
	if err := h.op.start(ctx); err != nil {
		return err
	}
	if err := h.waitConnection(ctx); err != nil {
		return err
	}
	if err := h.w.admin.Create(ctx, template(h.shape)); err != nil {
		return err
	}
	if err := h.waitTemplate(ctx, time.Minute); err != nil {
		return fmt.Errorf("new template: %w", err)
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var err error
	if h.track, err = startTracker(tctx, h.w.adminCfg, h.w.env.Scheme, bindingNamespace); err != nil {
		return err
	}

	phases := []struct {
		name string
		per  int
		body phaseBody
	}{
		{phaseConverge, h.n, h.converge},
		{phaseRestart, h.n, h.restart},
		// The failover runs with a short interval, and its new leader
		// spreads its first checks over it: the forced resync after it
		// checks every binding, so that the rollouts that follow are
		// measured beside the steady rate of the usual interval, not the
		// failover's.
		{phaseFailover, h.n, h.failover},
		{phaseForced, h.n, h.forced},
		{phaseTemplate, h.n, h.templateChange},
		{phasePolicy, h.n, h.policyChange},
		{phaseLatency, h.cfg.changes, h.latency},
		{phaseSweep, h.n, h.sweep},
		{phaseDelete, h.n, h.deleteAll},
	}
	for _, p := range phases {
		if p.name == phasePolicy && h.shape != shapePerMinion {
			continue // no policy per minion to change
		}
		if !h.cfg.runs(p.name) {
			continue // not selected (SCALE_PHASES); the converge always is
		}
		if !h.run(ctx, p.name, "operator", p.per, p.body) {
			return nil // recorded in the phase
		}
	}
	return nil
}

// newOperator prepares an operator instance (not started), in a memory
// cgroup of its own when one can be made: two instances (the failover's
// standby beside the leader) must not share one limit.
func (h *harness) newOperator(label string) *operatorProc {
	o := &operatorProc{label: label, bin: h.cfg.Bin, kubeconfig: h.w.kubeconfig, dir: h.w.env.Dir, concurrency: h.cfg.concurrency, env: h.w.env,
		softLimit: operatorSoftLimit(h.n)}
	cg, err := newMemCgroup(operatorMemory(h.n), label)
	if err != nil {
		if h.res.Memory == "" {
			h.res.Memory = fmt.Sprintf("at N=%d with GOMEMLIMIT=%d (no memory cgroup: %v)", h.n, o.softLimit, err)
		}
		return o
	}
	o.cgroupProcs = cg.procs
	h.cgroups = append(h.cgroups, cg)
	if h.res.Memory == "" {
		h.res.Memory = fmt.Sprintf("at N=%d in a memory cgroup limited to %d MiB (%s; the failover's standby in one of its own); it sets its soft limit to %d %% of that (--memory-limit-percent)",
			h.n, operatorMemory(h.n)>>20, cg.dir, operatorSoftLimit(h.n)*100/operatorMemory(h.n))
	}
	return o
}

// stopOperators stops every instance still running, then removes their
// cgroups.
func (h *harness) stopOperators() {
	for _, o := range []*operatorProc{h.op, h.standby} {
		if o != nil {
			_ = o.stop(context.Background())
		}
	}
	for _, cg := range h.cgroups {
		_ = cg.remove()
	}
	// The floors that follow in an even round measure no operator.
	h.op, h.standby, h.cgroups = nil, nil, nil
}

func (h *harness) floor(ctx context.Context, _ *phaseResult) (time.Duration, error) {
	h.lastFloor = &floor{admin: h.w.admin, status: h.w.floorClient, vault: h.w.floorVault, shape: h.shape, workers: h.cfg.floorWorkers}
	return 0, h.lastFloor.run(ctx, h.n, h.cfg.creators)
}

// floorRecord is the floor plus the ownership record written before Vault
// (ownership): the structural part of the gap between floor and operator.
func (h *harness) floorRecord(ctx context.Context, _ *phaseResult) (time.Duration, error) {
	h.lastFloor = &floor{admin: h.w.admin, status: h.w.floorClient, vault: h.w.floorVault, shape: h.shape, workers: h.cfg.floorWorkers, record: true}
	return 0, h.lastFloor.run(ctx, h.n, h.cfg.creators)
}

// floorProof is the floor plus the record, reading each object before it
// creates it (floor.proof): the converge's floor with the reads Vault's API
// makes an operator that must not overwrite what is not its own make.
func (h *harness) floorProof(ctx context.Context, _ *phaseResult) (time.Duration, error) {
	h.lastFloor = &floor{admin: h.w.admin, status: h.w.floorClient, vault: h.w.floorVault, shape: h.shape, workers: h.cfg.floorWorkers,
		record: true, proof: true}
	return 0, h.lastFloor.run(ctx, h.n, h.cfg.creators)
}

// poll calls f every interval until it returns true or an error, or
// timeout passes.
func poll(ctx context.Context, interval, timeout time.Duration, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not done after %s: %w", timeout, ctx.Err())
		case <-time.After(interval):
		}
	}
}

func (h *harness) waitConnection(ctx context.Context) error {
	vc := &v1alpha1.VaultConnection{}
	return poll(ctx, 200*time.Millisecond, time.Minute, func() (bool, error) {
		if err := h.w.admin.Get(ctx, types.NamespacedName{Name: connectionName}, vc); err != nil {
			return false, err
		}
		if err := h.op.alive(); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(vc.Status.Conditions, v1alpha1.ReadyCondition), nil
	})
}

// waitTemplate waits until the template is Ready for its current generation.
func (h *harness) waitTemplate(ctx context.Context, timeout time.Duration) error {
	return h.waitTemplateEvery(ctx, 100*time.Millisecond, timeout)
}

// waitTemplateEvery is waitTemplate polling every interval: a phase whose
// wall time is the template's (the policy change at small N lasts a few
// hundred milliseconds) polls closer.
func (h *harness) waitTemplateEvery(ctx context.Context, interval, timeout time.Duration) error {
	tpl := &v1alpha1.MinionTemplate{}
	err := poll(ctx, interval, timeout, func() (bool, error) {
		if err := h.w.admin.Get(ctx, types.NamespacedName{Name: templateName}, tpl); err != nil {
			return false, err
		}
		if err := h.op.alive(); err != nil {
			return false, err
		}
		return tpl.Status.ObservedGeneration == tpl.Generation &&
			apimeta.IsStatusConditionTrue(tpl.Status.Conditions, v1alpha1.ReadyCondition), nil
	})
	if err != nil {
		return fmt.Errorf("template %s Ready: %w (generation %d, status %+v)", templateName, err, tpl.Generation, tpl.Status.Conditions)
	}
	return nil
}

// waitAll waits until all n bindings satisfy the tracker's predicate.
func (h *harness) waitAll(ctx context.Context, what string) error {
	err := h.track.wait(ctx, func(total, ok int) bool { return total == h.n && ok == h.n }, h.op.alive)
	if err != nil {
		total, ok := h.track.counts()
		return fmt.Errorf("%d of %d bindings %s (%d exist), for example %v: %w", ok, h.n, what, total, h.track.failing(3), err)
	}
	return nil
}

// policies lists the ACL policies in Vault whose name starts with prefix.
func (h *harness) policies(ctx context.Context, prefix string) ([]string, error) {
	sec, err := h.w.root.Logical().ListWithContext(ctx, "sys/policies/acl")
	if err != nil {
		return nil, err
	}
	return keysWithPrefix(sec, prefix), nil
}

// keysWithPrefix are the keys of a LIST response that start with prefix.
func keysWithPrefix(sec *vaultapi.Secret, prefix string) []string {
	if sec == nil {
		return nil
	}
	keys, _ := sec.Data["keys"].([]any)
	var out []string
	for _, k := range keys {
		if s := fmt.Sprint(k); strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func (h *harness) waitPolicies(ctx context.Context, want int) error {
	var got []string
	err := poll(ctx, 100*time.Millisecond, h.cfg.phaseTimeout(h.n), func() (bool, error) {
		var err error
		got, err = h.policies(ctx, policyPrefix+"_")
		return len(got) == want, err
	})
	if err != nil {
		return fmt.Errorf("%d of %d policies %s_* in Vault: %w", len(got), want, policyPrefix, err)
	}
	return nil
}

func (h *harness) converge(ctx context.Context, _ *phaseResult) (time.Duration, error) {
	h.track.setPredicate(readyCurrent)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return createBindings(gctx, h.w.admin, bindingNamespace, h.n, h.cfg.creators, nil) })
	g.Go(func() error { return h.waitAll(gctx, "Ready") })
	if err := g.Wait(); err != nil {
		return 0, err
	}
	if err := h.waitTemplate(ctx, h.cfg.phaseTimeout(h.n)); err != nil {
		return 0, err
	}
	return 0, h.waitPolicies(ctx, expectedPolicies(h.shape, h.n))
}

// restart stops the operator and starts it again; the phase lasts from
// the new process's start until it has reconciled every binding once
// (controller-runtime's reconcile count) with nothing queued or running.
func (h *harness) restart(ctx context.Context, r *phaseResult) (time.Duration, error) {
	names, err := h.w.root.Sys().ListPoliciesWithContext(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing Vault's policies: %w", err)
	}
	r.VaultPolicies = len(slices.DeleteFunc(names, func(n string) bool { return n == "root" }))
	t := time.Now()
	if err := h.op.stop(ctx); err != nil {
		return 0, err
	}
	stopped := time.Since(t)
	released, err := h.leaseReleased(ctx)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := h.op.start(ctx); err != nil {
		return 0, err
	}
	var rec, depth, active float64
	err = poll(ctx, 200*time.Millisecond, h.cfg.phaseTimeout(h.n), func() (bool, error) {
		var err error
		rec, depth, active, err = reconcileState(ctx, h.op)
		return rec >= float64(h.n) && depth == 0 && active == 0, err
	})
	wall := time.Since(t0)
	r.Note = fmt.Sprintf("stopping took %s; the time is from the new process's start; %s", stopped.Round(time.Millisecond), released)
	if err != nil {
		return wall, fmt.Errorf("%v of %d reconciled (queue %v, running %v): %w", rec, h.n, depth, active, err)
	}
	h.track.setPredicate(readyCurrent)
	if _, ok := h.track.counts(); ok != h.n {
		return wall, fmt.Errorf("after the restart %d of %d bindings Ready, for example %v", ok, h.n, h.track.failing(3))
	}
	return wall, nil
}

// reconcileState is what o's running instance has reconciled of the
// bindings, and how many are queued and running.
func reconcileState(ctx context.Context, o *operatorProc) (rec, depth, active float64, err error) {
	if err := o.alive(); err != nil {
		return 0, 0, 0, err
	}
	m, err := o.scrapeCurrent(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	return m.sum("controller_runtime_reconcile_total", `controller="minionbinding"`),
		m.sum("workqueue_depth", `name="minionbinding"`),
		m.sum("controller_runtime_active_workers", `controller="minionbinding"`), nil
}

// patchAll sends a merge patch to every binding, with the creators'
// parallelism.
func (h *harness) patchAll(ctx context.Context, patch []byte) error {
	names := h.track.names()
	g, ctx := errgroup.WithContext(ctx)
	next := make(chan string)
	g.Go(func() error {
		defer close(next)
		for _, n := range names {
			select {
			case next <- n:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	for i := 0; i < h.cfg.creators; i++ {
		g.Go(func() error {
			for name := range next {
				obj := &v1alpha1.MinionBinding{}
				obj.Namespace, obj.Name = bindingNamespace, name
				if err := h.w.admin.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
					return fmt.Errorf("patching %s: %w", name, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// forced asks every binding for a reconcile through the annotation, until
// each reports it handled.
func (h *harness) forced(ctx context.Context, _ *phaseResult) (time.Duration, error) {
	stamp := time.Now().UTC().Format(time.RFC3339Nano)
	h.track.setPredicate(func(b *v1alpha1.MinionBinding) bool {
		return b.Status.LastHandledReconcileAt == stamp && readyCurrent(b)
	})
	patch, err := requestPatch(stamp)
	if err != nil {
		return 0, err
	}
	if err := h.patchAll(ctx, patch); err != nil {
		return 0, err
	}
	return 0, h.waitAll(ctx, "handled "+stamp)
}

// templateChange adds an entity metadata key to the template, until every
// binding reports it written (status.entity.metadata) and Ready, and a
// sample of entities in Vault has it; r.Rollout is when the entities
// were written.
func (h *harness) templateChange(ctx context.Context, r *phaseResult) (time.Duration, error) {
	h.track.setPredicate(func(b *v1alpha1.MinionBinding) bool {
		return readyCurrent(b) && b.Status.Entity != nil && b.Status.Entity.Metadata[changedKey] == changedValue
	})
	from, err := h.w.vaultAudit.offsets()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := h.updateTemplate(ctx, func(tpl *v1alpha1.MinionTemplate) { tpl.Spec.Metadata.Entity[changedKey] = changedValue }); err != nil {
		return 0, err
	}
	if err := h.waitAll(ctx, "with the new metadata"); err != nil {
		return 0, err
	}
	if err := h.waitTemplate(ctx, h.cfg.phaseTimeout(h.n)); err != nil {
		return 0, err
	}
	for _, i := range sample(h.n, 10) {
		md, err := h.entityMetadata(ctx, minionID(i))
		if err != nil {
			return 0, err
		}
		if md[changedKey] != changedValue {
			return 0, fmt.Errorf("binding %s reports the new metadata, but its entity in Vault has %v", minionID(i), md)
		}
	}
	r.Rollout, err = h.rolloutSince(from, t0, "entity")
	r.Note = r.Rollout.String()
	return 0, err
}

// updateTemplate applies change to the template, again on a conflict.
func (h *harness) updateTemplate(ctx context.Context, change func(*v1alpha1.MinionTemplate)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tpl := &v1alpha1.MinionTemplate{}
		if err := h.w.admin.Get(ctx, types.NamespacedName{Name: templateName}, tpl); err != nil {
			return err
		}
		change(tpl)
		return h.w.admin.Update(ctx, tpl)
	})
	if err != nil {
		return fmt.Errorf("changing the template: %w", err)
	}
	return nil
}

// rollout is how a template change reached Vault, from the operator's
// writes in Vault's audit log: the first and the last write of the class
// the change is about, after the template update was sent.
type rollout struct {
	Class       string
	First, Last time.Duration
	Writes      int
}

// String is the rollout for a phase's note.
func (r *rollout) String() string {
	if r == nil || r.Writes == 0 {
		return ""
	}
	return fmt.Sprintf("first %s written %s after the template update, the last after %s", r.Class,
		r.First.Round(time.Millisecond), r.Last.Round(time.Millisecond))
}

// rolloutSince reads the operator's writes of class in Vault's audit log
// from the offset from, taken before the template update sent at t0.
func (h *harness) rolloutSince(from auditOffsets, t0 time.Time, class string) (*rollout, error) {
	to, err := h.w.vaultAudit.offsets()
	if err != nil {
		return nil, err
	}
	calls, err := h.w.vaultAudit.calls(from, to, h.w.accessors, "operator")
	if err != nil {
		return nil, err
	}
	return rolloutOf(calls, class, t0), nil
}

// rolloutOf is the first and last write of class among calls, after t0.
func rolloutOf(calls []vaultCall, class string, t0 time.Time) *rollout {
	r := &rollout{Class: class}
	for _, c := range calls {
		if !c.Write || c.Class != class || c.At.Before(t0) {
			continue
		}
		d := c.At.Sub(t0)
		if r.Writes == 0 || d < r.First {
			r.First = d
		}
		r.Last = max(r.Last, d)
		r.Writes++
	}
	return r
}

// policyChange adds a rule to the per-minion policy document, so that
// every per-minion policy's body changes and nothing a binding's status
// holds does: until the template is Ready for its new generation and a
// sample of the policies in Vault has the new body. The operator should
// read and write each changed policy once, and read no binding's objects.
func (h *harness) policyChange(ctx context.Context, r *phaseResult) (time.Duration, error) {
	from, err := h.w.vaultAudit.offsets()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	err = h.updateTemplate(ctx, func(tpl *v1alpha1.MinionTemplate) {
		for i := range tpl.Spec.PolicyDocuments {
			if d := &tpl.Spec.PolicyDocuments[i]; d.Name == policyPrefix+"_minion_{minion}" {
				d.Rules = append(d.Rules, v1alpha1.PolicyRule{Path: changedPolicyPath, Capabilities: []v1alpha1.PolicyCapability{"list"}})
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if err := h.waitTemplateEvery(ctx, 20*time.Millisecond, h.cfg.phaseTimeout(h.n)); err != nil {
		return 0, err
	}
	var state string
	// The template's status says every policy was synced; the sample says
	// Vault agrees.
	err = poll(ctx, 20*time.Millisecond, h.cfg.phaseTimeout(h.n), func() (bool, error) {
		for _, i := range sample(h.n, 10) {
			m := minionID(i)
			body, err := h.policyBody(ctx, policyPrefix+"_minion_"+m)
			if err != nil {
				return false, err
			}
			if !strings.Contains(body, changedPolicy(m)) {
				state = fmt.Sprintf("policy %s_minion_%s: %q", policyPrefix, m, body)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("the template is Ready, but not every sampled policy has the new body: %s: %w", state, err)
	}
	r.Rollout, err = h.rolloutSince(from, t0, "policy")
	r.Note = r.Rollout.String()
	return 0, err
}

// policyBody is an ACL policy's body in Vault, "" when there is none.
func (h *harness) policyBody(ctx context.Context, name string) (string, error) {
	sec, err := h.w.root.Logical().ReadWithContext(ctx, "sys/policies/acl/"+name)
	if err != nil || sec == nil {
		return "", err
	}
	body, _ := sec.Data["policy"].(string)
	return body, nil
}

// sample is k indexes spread over 0..n-1, the first and last among them.
func sample(n, k int) []int {
	if k > n {
		k = n
	}
	out := make([]int, 0, k)
	for j := 0; j < k; j++ {
		if k == 1 {
			return []int{0}
		}
		out = append(out, j*(n-1)/(k-1))
	}
	return slices.Compact(out)
}

func (h *harness) entityMetadata(ctx context.Context, minion string) (map[string]string, error) {
	sec, err := h.w.root.Logical().ReadWithContext(ctx, "identity/entity/name/"+entityName(minion))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if sec == nil {
		return out, nil
	}
	md, _ := sec.Data["metadata"].(map[string]any)
	for k, v := range md {
		out[k] = fmt.Sprint(v)
	}
	return out, nil
}

// latency changes one binding's roles, each time to a role no binding had
// (so the change needs a new policy too), and times how long until Vault
// shows it: the entity's metadata, the role's token policies and the new
// policy.
func (h *harness) latency(ctx context.Context, r *phaseResult) (time.Duration, error) {
	t0 := time.Now()
	k := h.n / 2
	name := minionID(k)
	for i := 0; i < h.cfg.changes; i++ {
		role := fmt.Sprintf("lat%d", i)
		roles := []string{rolesOf(k)[0], role}
		policy := policyPrefix + "_role_" + role
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"pillar": map[string]any{"roles": roles}}})
		if err != nil {
			return 0, err
		}
		obj := &v1alpha1.MinionBinding{}
		obj.Namespace, obj.Name = bindingNamespace, name
		start := time.Now()
		if err := h.w.admin.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return 0, err
		}
		var state string
		err = poll(ctx, 20*time.Millisecond, time.Minute, func() (bool, error) {
			md, err := h.entityMetadata(ctx, name)
			if err != nil {
				return false, err
			}
			sec, err := h.w.root.Logical().ReadWithContext(ctx, "auth/"+operatorMount+"/role/"+name)
			if err != nil {
				return false, err
			}
			var tp []string
			if sec != nil {
				if l, ok := sec.Data["token_policies"].([]any); ok {
					for _, p := range l {
						tp = append(tp, fmt.Sprint(p))
					}
				}
			}
			pol, err := h.w.root.Logical().ReadWithContext(ctx, "sys/policies/acl/"+policy)
			if err != nil {
				return false, err
			}
			state = fmt.Sprintf("entity roles %q, token_policies %v, policy %s exists: %v", md["roles"], tp, policy, pol != nil)
			return md["roles"] == metadataRoles(roles) && slices.Contains(tp, policy) && pol != nil, nil
		})
		if err != nil {
			return 0, fmt.Errorf("change %d of %s: %s: %w", i+1, name, state, err)
		}
		r.Latency = append(r.Latency, time.Since(start))
		// The next change starts once the binding reports this one.
		gen := obj.Generation
		err = poll(ctx, 20*time.Millisecond, time.Minute, func() (bool, error) {
			b := h.track.get(name)
			return b != nil && b.Generation >= gen && readyCurrent(b), nil
		})
		if err != nil {
			return 0, fmt.Errorf("change %d of %s: not Ready: %w", i+1, name, err)
		}
	}
	// The earlier changes' policies are rendered by no binding any more:
	// the operator should have deleted them (the delete phase shows it too).
	wall := time.Since(t0)
	h.settle(ctx)
	stale, err := h.policies(ctx, policyPrefix+"_role_lat")
	if err != nil {
		return wall, err
	}
	stale = slices.DeleteFunc(stale, func(p string) bool { return p == fmt.Sprintf("%s_role_lat%d", policyPrefix, h.cfg.changes-1) })
	if len(stale) > 0 {
		r.Note = fmt.Sprintf("policies of earlier changes still in Vault after the last: %v", stale)
	}
	return wall, nil
}

// deleteBindings deletes the named bindings of ns one by one, with the
// creators' parallelism, as `kubectl delete mb --all` does (a single
// deletecollection of 10,000 bindings outlasts the API server's 60 s
// request timeout).
func (h *harness) deleteBindings(ctx context.Context, ns string, names []string) error {
	g, ctx := errgroup.WithContext(ctx)
	next := make(chan string)
	g.Go(func() error {
		defer close(next)
		for _, n := range names {
			select {
			case next <- n:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	for i := 0; i < h.cfg.creators; i++ {
		g.Go(func() error {
			for name := range next {
				obj := &v1alpha1.MinionBinding{}
				obj.Namespace, obj.Name = ns, name
				if err := client.IgnoreNotFound(h.w.admin.Delete(ctx, obj)); err != nil {
					return fmt.Errorf("deleting %s/%s: %w", ns, name, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// deleteAll deletes every binding and the template, until both are gone;
// then counts what is left in Vault.
func (h *harness) deleteAll(ctx context.Context, r *phaseResult) (time.Duration, error) {
	h.track.setPredicate(func(*v1alpha1.MinionBinding) bool { return false })
	t0 := time.Now()
	if err := h.deleteBindings(ctx, bindingNamespace, h.track.names()); err != nil {
		return 0, err
	}
	tpl := &v1alpha1.MinionTemplate{}
	tpl.Name = templateName
	if err := h.w.admin.Delete(ctx, tpl); err != nil {
		return 0, err
	}
	if err := h.track.wait(ctx, func(total, _ int) bool { return total == 0 }, h.op.alive); err != nil {
		total, _ := h.track.counts()
		return 0, fmt.Errorf("%d of %d bindings still there: %w", total, h.n, err)
	}
	err := poll(ctx, 100*time.Millisecond, h.cfg.phaseTimeout(h.n), func() (bool, error) {
		err := h.w.admin.Get(ctx, types.NamespacedName{Name: templateName}, &v1alpha1.MinionTemplate{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return 0, fmt.Errorf("template still there: %w", err)
	}
	wall := time.Since(t0)
	r.Left = map[string]int{}
	lists := []struct{ what, path, prefix string }{
		{"policies", "sys/policies/acl", policyPrefix + "_"},
		{"entities", "identity/entity/name", "salt_minion_"},
		{"roles", "auth/" + operatorMount + "/role", ""},
	}
	for _, l := range lists {
		sec, err := h.w.root.Logical().ListWithContext(ctx, l.path)
		if err != nil {
			return wall, fmt.Errorf("listing %s: %w", l.path, err)
		}
		keys := keysWithPrefix(sec, l.prefix)
		r.Left[l.what] = len(keys)
		if len(keys) > 0 {
			r.Note = strings.TrimPrefix(fmt.Sprintf("%s; %s left: %s", r.Note, l.what, strings.Join(keys[:min(len(keys), 5)], ", ")), "; ")
		}
	}
	return wall, nil
}
