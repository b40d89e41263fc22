//go:build integration

package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/fleetcheck"
	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

// The HA runs: the operator (its own process, as in the other phases)
// against a Vault HA cluster of three nodes on integrated storage (raft)
// from the tools' vault (localenv.Cluster), in two modes:
//
//   - active-following: the VaultConnection's address is the cluster's
//     active-following proxy, as a Kubernetes vault-active Service;
//   - standby: the address of one standby node, which forwards every
//     request to the active node; the harness keeps that node a standby
//     (it steps it down before an operation should it have become active).
//
// Each mode runs on fresh servers, two fleets of N bindings one after the
// other: first the undisturbed one (its own namespace and template, base),
// then the disturbed one (ha), each through the same four operations:
//
//  1. converge: N new bindings; disturbed: SIGKILL of the active node once
//     a third of them are Ready;
//  2. rollout 1: a template change that rewrites every binding's role
//     (token_policies), entity (metadata) and the template's policies;
//     disturbed: the operator's node restarts sealed once a third have it
//     (active-following: the active node, SIGKILLed and started again at
//     once; standby: the operator's standby), stays sealed haSealedFor,
//     then is unsealed;
//  3. rollout 2: the same kind of change; disturbed: SIGKILL of the active
//     node at a third;
//  4. rollout 3: the same; disturbed: `vault operator step-down` at a third.
//
// Between two disturbed operations the harness repairs the cluster (the
// killed node started again and unsealed, every node a healthy voter),
// unmeasured. Throughout, every binding's conditions are watched (never
// Stalled); after each operation fleetcheck compares Vault with both fleets
// as root (no duplicate entity or alias, every role and entity proven the
// binding's, every object as the binding renders, status naming them),
// and the operator's Vault calls are counted over every node's audit log.

const (
	modeActive  = "active-following"
	modeStandby = "standby"
)

var allHAModes = []string{modeActive, modeStandby}

// haScenario is one operation and, in the disturbed fleet, what happens
// to the cluster during it.
type haScenario struct {
	op, disturbance string
	// wave is the rollout's template wave ("" for the converge).
	wave    string
	disturb func(r *haRun, ctx context.Context, p *haPhase) error
}

var haScenarios = []haScenario{
	{op: "converge", disturbance: "SIGKILL of the active node", disturb: (*haRun).killActive},
	{op: "rollout 1", wave: "1", disturbance: "the operator's node restarts sealed", disturb: (*haRun).sealedRestart},
	{op: "rollout 2", wave: "2", disturbance: "SIGKILL of the active node", disturb: (*haRun).killActive},
	{op: "rollout 3", wave: "3", disturbance: "step-down of the active node", disturb: (*haRun).stepDown},
}

// HAConfig is what an HA run measures.
type HAConfig struct {
	N     int
	modes []string
	Bin   string
	// creators create bindings in parallel; concurrency is the operator's.
	creators, concurrency int
	// SealedFor is how long the restarted node stays sealed.
	SealedFor time.Duration
	// disturbAt is the share of the fleet Ready with the operation when
	// the disturbance comes.
	disturbAt float64
	// PerfMultiplier is raft's performance_multiplier (0: Vault's default).
	PerfMultiplier int
	PhaseTimeout   time.Duration
	Logf           func(format string, args ...any)
	// keep, when set, is a folder that receives each mode's logs (the
	// operator's, each Vault node's) before its servers go.
	keep string
	// Parallel runs the modes at once, each on its own servers (the CI
	// test: its time is that of the slower mode).
	Parallel bool
}

func DefaultHAConfig() HAConfig {
	return HAConfig{N: 1000, modes: allHAModes, creators: 4, concurrency: 4, SealedFor: 20 * time.Second, disturbAt: 1.0 / 3,
		PhaseTimeout: 10 * time.Minute, Logf: func(string, ...any) {}}
}

// haPhase is one operation of one fleet in one mode.
type haPhase struct {
	Mode, Op, Disturbance, Fleet string
	N                            int
	// Wall is from the operation's start until every binding was Ready
	// with it (and the template Ready for its generation).
	Wall time.Duration
	// DisturbedAt is when the disturbance came, from the start; Node the
	// node disturbed.
	DisturbedAt time.Duration `json:",omitempty"`
	Node        string        `json:",omitempty"`
	// Election is from the disturbance until another node reported
	// itself active (0: none was needed); ProxyFollowed until the proxy
	// sent new connections there (active-following mode).
	Election, ProxyFollowed time.Duration `json:",omitempty"`
	// Sealed is how long the restarted node stayed sealed.
	Sealed time.Duration `json:",omitempty"`
	// Back is from the disturbance until Vault answered at the operator's
	// address again (a token lookup through the proxy, or the standby the
	// connection names, polled every 50 ms): the outage as the operator
	// sees it. Resumed is until the operator's first call about a
	// binding's objects after that, in the audit logs.
	Back, Resumed time.Duration `json:",omitempty"`
	// Recovery is from the disturbance until every binding was Ready with
	// the operation.
	Recovery time.Duration `json:",omitempty"`
	// Vault are the operator's calls over every node's audit log, from the
	// start until the calls stopped after the goal.
	Vault *tally
	// OtherFleet counts those about the other fleet's objects, which the
	// operation does not change (they wait for their drift checks: 0).
	OtherFleet int
	// NotReady counts the bindings that went through Ready=False, by
	// reason; ReadyLow (rollouts) is the fewest bindings Ready at once.
	NotReady map[string]int `json:",omitempty"`
	ReadyLow int
	// Stalled are the bindings seen Stalled during the operation.
	Stalled []string `json:",omitempty"`
	// Panics are the panics the operator's log has from the operation
	// (controller-runtime recovers them: the reconcile fails and is
	// retried with backoff).
	Panics []string `json:",omitempty"`
	// ProxyResets are the connections the proxy reset for want of an
	// active node (active-following mode).
	ProxyResets int `json:",omitempty"`
	// Connection lists the VaultConnection's status as it changed during
	// the operation (polled every 100 ms): its Ready reason, cluster ID
	// and identity, each with its time from the start. A changed identity
	// wakes every binding of the connection for a check of everything.
	Connection []string `json:",omitempty"`
	// IdentityChanges counts the changes of the connection's identity.
	IdentityChanges int
	// Check is fleetcheck's summary afterwards, Problems its problems.
	Check    string
	Problems []string `json:",omitempty"`
	Note     string   `json:",omitempty"`
	Err      string   `json:",omitempty"`

	at       time.Time     // the disturbance
	backDone chan struct{} // closed when Back is known
}

// outage is how long the disturbance kept Vault from the operator: until
// Vault answered at its address again.
func (p *haPhase) outage() time.Duration { return p.Back }

// haModeResult is one mode's run.
type haModeResult struct {
	Mode   string
	N      int
	Phases []*haPhase
	Err    string `json:",omitempty"`
	// Switches are the proxy's changes of target over the run.
	Switches []localenv.ProxySwitch `json:",omitempty"`
}

// phase finds the phase of a fleet and operation.
func (m *haModeResult) phase(fleet, op string) *haPhase {
	for _, p := range m.Phases {
		if p.Fleet == fleet && p.Op == op {
			return p
		}
	}
	return nil
}

// haFleet is one fleet: its namespace, template and minion IDs share the
// name.
type haFleet struct {
	name  string
	track *tracker
}

func (f *haFleet) minion(i int) string { return fmt.Sprintf("%s%05d", f.name, i) }

// haRun is one mode's run on its servers.
type haRun struct {
	cfg  HAConfig
	mode string
	h    *harness
	c    *localenv.Cluster
	// opNode is the node the connection names (standby mode), -1 with the
	// proxy.
	opNode    int
	clusterID string
	fleets    []*haFleet
	res       *haModeResult

	mu       sync.Mutex
	stalled  map[string]string          // bindings seen Stalled, with why
	notReady map[string]map[string]bool // reason -> bindings, this operation
	down     map[string]bool            // bindings not Ready now
	downMax  int
}

// RunHA runs every mode, one after the other, or at once (cfg.parallel),
// each on servers of its own.
func RunHA(ctx context.Context, cfg HAConfig) []*haModeResult {
	out := make([]*haModeResult, len(cfg.modes))
	var wg sync.WaitGroup
	for i, mode := range cfg.modes {
		out[i] = &haModeResult{Mode: mode, N: cfg.N}
		run := func() {
			if err := runHAMode(ctx, cfg, mode, out[i]); err != nil {
				out[i].Err = err.Error()
			}
		}
		if !cfg.Parallel {
			run()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
	wg.Wait()
	return out
}

func runHAMode(ctx context.Context, cfg HAConfig, mode string, res *haModeResult) (err error) {
	cfg.Logf("HA %s: starting the servers (a three-node raft cluster)", mode)
	w, err := setUpWith(ctx, localenv.ClusterOptions{Nodes: 3, PerformanceMultiplier: cfg.PerfMultiplier})
	if err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	defer func() {
		if serr := w.env.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stopping the servers: %w", serr)
		}
	}()
	h := &harness{
		cfg: Config{Bin: cfg.Bin, creators: cfg.creators, concurrency: cfg.concurrency, Logf: cfg.Logf,
			phaseTimeout: func(int) time.Duration { return cfg.PhaseTimeout }},
		n: cfg.N, shape: shapeShared, label: mode, res: &ShapeResult{}, w: w,
	}
	r := &haRun{cfg: cfg, mode: mode, h: h, c: w.env.Vault.Cluster, opNode: -1, res: res, stalled: map[string]string{}}
	if cfg.keep != "" {
		// Before the servers stop (deferred above, so run after this).
		defer func() {
			if err := keepLogs(w.env.Dir, filepath.Join(cfg.keep, mode)); err != nil {
				cfg.Logf("HA %s: keeping the logs: %v", mode, err)
			}
		}()
	}
	defer func() { res.Switches = r.c.Proxy.Switches() }()
	ks := &corev1.Namespace{}
	if err := w.admin.Get(ctx, types.NamespacedName{Name: "kube-system"}, ks); err != nil {
		return err
	}
	r.clusterID = string(ks.UID)
	if mode == modeStandby {
		if r.opNode, err = r.c.Standby(ctx); err != nil {
			return err
		}
		vc := &v1alpha1.VaultConnection{}
		if err := w.admin.Get(ctx, types.NamespacedName{Name: connectionName}, vc); err != nil {
			return err
		}
		vc.Spec.Address = r.c.Nodes[r.opNode].Addr
		if err := w.admin.Update(ctx, vc); err != nil {
			return err
		}
	}
	defer h.stopOperators()
	// A label of the mode's own: two modes may run at once (parallel), and
	// each instance's memory cgroup is named after it.
	h.setOperator(h.newOperator("operator-" + strings.SplitN(mode, "-", 2)[0]))
	if os.Getenv("SCALE_HA_DEBUG") != "" {
		h.op.extraArgs = []string{"--zap-log-level=debug"}
	}
	if err := h.op.start(ctx); err != nil {
		return err
	}
	if err := h.waitConnection(ctx); err != nil {
		return err
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, name := range []string{"base", "ha"} {
		f, err := r.newFleet(tctx, name)
		if err != nil {
			return err
		}
		r.fleets = append(r.fleets, f)
	}
	for i, f := range r.fleets {
		disturbed := i == 1
		for _, sc := range haScenarios {
			p := r.phase(ctx, f, sc, disturbed)
			res.Phases = append(res.Phases, p)
			cfg.Logf("HA %s: %s %s (%s): %s, %s%s", mode, f.name, sc.op, p.Disturbance, p.Wall.Round(time.Millisecond), p.Check, errSuffix(p.Err))
			if p.Err != "" {
				return nil // recorded in the phase
			}
			if disturbed {
				if err := r.repair(ctx); err != nil {
					return fmt.Errorf("repairing the cluster after %s: %w", sc.op, err)
				}
			}
		}
	}
	return nil
}

// panicsIn lists the panics the operator logged from the offset on: the
// message and the operator's own frame nearest to it, once each.
func panicsIn(path string, from int64) []string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < from {
		return nil
	}
	seen := map[string]int{}
	var order []string
	for _, line := range strings.Split(string(data[from:]), "\n") {
		if !strings.Contains(line, `"msg":"Observed a panic"`) {
			continue
		}
		var e struct {
			Controller string `json:"controller"`
			Panic      string `json:"panic"`
			Stack      string `json:"stacktrace"`
		}
		_ = json.Unmarshal([]byte(line), &e)
		at := ""
		for _, l := range strings.Split(e.Stack, "\n") {
			if strings.Contains(l, localenv.ModulePath+"/") && !strings.HasPrefix(strings.TrimSpace(l), "/") {
				at = strings.TrimSpace(l)
				break
			}
		}
		key := fmt.Sprintf("%s: %s in %s", e.Controller, e.Panic, at)
		if seen[key] == 0 {
			order = append(order, key)
		}
		seen[key]++
	}
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = fmt.Sprintf("%s (%d times)", k, seen[k])
	}
	return out
}

// keepLogs copies the operator's log, each Vault node's log and audit log
// of an environment's folder to dst.
func keepLogs(envDir, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	logs, _ := filepath.Glob(filepath.Join(envDir, "*.log"))
	nodes, _ := filepath.Glob(filepath.Join(envDir, "vault-*", "*.log"))
	for _, l := range append(logs, nodes...) {
		if strings.HasPrefix(filepath.Base(l), "kube-audit") {
			continue
		}
		data, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		name := filepath.Base(l)
		if dir := filepath.Base(filepath.Dir(l)); strings.HasPrefix(dir, "vault-") {
			name = dir + "-" + name // vault-0-vault.log, vault-0-vault-audit.log
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// newFleet creates the fleet's namespace and template and watches its
// bindings.
func (r *haRun) newFleet(ctx context.Context, name string) (*haFleet, error) {
	f := &haFleet{name: name}
	if err := r.h.w.admin.Create(ctx, namespace(name)); err != nil {
		return nil, err
	}
	if err := r.h.w.admin.Create(ctx, haTemplate(name)); err != nil {
		return nil, err
	}
	if err := r.waitTemplate(ctx, name, time.Minute); err != nil {
		return nil, err
	}
	var err error
	if f.track, err = startTracker(ctx, r.h.w.adminCfg, r.h.w.env.Scheme, name); err != nil {
		return nil, err
	}
	f.track.setObserver(r.observe)
	return f, nil
}

// observe sees every binding as the watch delivers it: Stalled ever, the
// reasons of Ready=False, and how many are not Ready at once.
func (r *haRun) observe(b *v1alpha1.MinionBinding) {
	key := b.Namespace + "/" + b.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
		r.stalled[key] = c.Reason + ": " + c.Message
	}
	ready := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	if ready != nil && ready.Status == metav1.ConditionFalse && r.notReady != nil {
		if r.notReady[ready.Reason] == nil {
			r.notReady[ready.Reason] = map[string]bool{}
		}
		r.notReady[ready.Reason][key] = true
	}
	if r.down != nil {
		if ready != nil && ready.Status == metav1.ConditionTrue {
			delete(r.down, key)
		} else {
			r.down[key] = true
		}
		r.downMax = max(r.downMax, len(r.down))
	}
}

// haTemplate is a fleet's template: its policies and its policy document
// named after it, so that two fleets share nothing in Vault.
func haTemplate(name string) *v1alpha1.MinionTemplate {
	return &v1alpha1.MinionTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: connectionName},
			Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/{minion}", name + "_role_{pillar[roles]}"}},
			Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			PolicyDocuments: []v1alpha1.PolicyDocument{{
				Name:  name + "_role_{pillar[roles]}",
				Rules: []v1alpha1.PolicyRule{{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}},
			}},
		},
	}
}

// setWave makes the template's rollout: a policy assigned to every role
// (token_policies rewritten), an entity metadata key (every entity
// rewritten), a rule in the policy document (its policies rewritten).
func setWave(tpl *v1alpha1.MinionTemplate, wave string) {
	tpl.Spec.Metadata.Entity["wave"] = wave
	tpl.Spec.Policies.Assign = []string{"saltstack/{minion}", tpl.Name + "_role_{pillar[roles]}", tpl.Name + "_wave_" + wave}
	d := &tpl.Spec.PolicyDocuments[0]
	d.Rules = []v1alpha1.PolicyRule{d.Rules[0], {Path: "salt/data/waves/" + wave, Capabilities: []v1alpha1.PolicyCapability{"read"}}}
}

func haBinding(f *haFleet, i int) *v1alpha1.MinionBinding {
	m := f.minion(i)
	return &v1alpha1.MinionBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.name, Name: m},
		Spec: v1alpha1.MinionBindingSpec{
			MinionID:    m,
			TemplateRef: v1alpha1.MinionTemplateReference{Name: f.name},
			Grains:      doc(map[string]any{"id": m, "os": "Debian"}),
			Pillar:      doc(map[string]any{"roles": rolesOf(i)}),
		},
	}
}

// waitTemplate waits until the template is Ready for its generation.
func (r *haRun) waitTemplate(ctx context.Context, name string, timeout time.Duration) error {
	tpl := &v1alpha1.MinionTemplate{}
	err := poll(ctx, 100*time.Millisecond, timeout, func() (bool, error) {
		if err := r.h.w.admin.Get(ctx, types.NamespacedName{Name: name}, tpl); err != nil {
			return false, err
		}
		return tpl.Status.ObservedGeneration == tpl.Generation && apimeta.IsStatusConditionTrue(tpl.Status.Conditions, v1alpha1.ReadyCondition), r.h.op.alive()
	})
	if err != nil {
		return fmt.Errorf("template %s Ready: %w (generation %d, status %+v)", name, err, tpl.Generation, tpl.Status.Conditions)
	}
	return nil
}

// start begins the operation on the fleet: it creates the bindings, or
// updates the template.
func (r *haRun) start(ctx context.Context, f *haFleet, sc haScenario) error {
	if sc.wave == "" {
		return forEachIndex(ctx, r.cfg.N, r.cfg.creators, func(ctx context.Context, i int) error {
			return r.h.w.admin.Create(ctx, haBinding(f, i))
		})
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tpl := &v1alpha1.MinionTemplate{}
		if err := r.h.w.admin.Get(ctx, types.NamespacedName{Name: f.name}, tpl); err != nil {
			return err
		}
		setWave(tpl, sc.wave)
		return r.h.w.admin.Update(ctx, tpl)
	})
}

// goal is what every binding of the fleet must show for the operation.
func goal(f *haFleet, sc haScenario) func(*v1alpha1.MinionBinding) bool {
	if sc.wave == "" {
		return readyCurrent
	}
	policy := f.name + "_wave_" + sc.wave
	return func(b *v1alpha1.MinionBinding) bool {
		return readyCurrent(b) && b.Status.Entity != nil && b.Status.Entity.Metadata["wave"] == sc.wave && slices.Contains(b.Status.Policies, policy)
	}
}

// phase runs one operation on the fleet, disturbed or not, and checks
// Vault afterwards.
func (r *haRun) phase(ctx context.Context, f *haFleet, sc haScenario, disturbed bool) *haPhase {
	p := &haPhase{Mode: r.mode, Op: sc.op, Disturbance: "none", Fleet: f.name, N: r.cfg.N}
	if disturbed {
		p.Disturbance = sc.disturbance
	}
	if err := r.ensureStandby(ctx); err != nil {
		p.Err = err.Error()
		return p
	}
	r.h.settle(ctx)
	from, err := r.h.w.vaultAudit.offsets()
	if err != nil {
		p.Err = err.Error()
		return p
	}
	_, resets := r.c.Proxy.Counts()
	logFrom, _ := fileSize(r.h.op.logPath)
	r.mu.Lock()
	r.notReady, r.down, r.downMax = map[string]map[string]bool{}, map[string]bool{}, 0
	stalledBefore := len(r.stalled)
	r.mu.Unlock()
	f.track.setPredicate(goal(f, sc))

	pctx, cancel := context.WithTimeout(ctx, r.cfg.PhaseTimeout)
	defer cancel()
	t0 := time.Now()
	watched := r.watchConnection(pctx, t0, p)
	started := make(chan error, 1)
	go func() { started <- r.start(pctx, f, sc) }()
	disturbDone := make(chan error, 1)
	if disturbed {
		go func() {
			threshold := int(math.Ceil(float64(r.cfg.N) * r.cfg.disturbAt))
			err := f.track.wait(pctx, func(_, ok int) bool { return ok >= threshold }, r.h.op.alive)
			if err == nil {
				err = sc.disturb(r, pctx, p)
			}
			disturbDone <- err
		}()
	} else {
		disturbDone <- nil
	}
	err = f.track.wait(pctx, func(total, ok int) bool { return total == r.cfg.N && ok == r.cfg.N }, r.h.op.alive)
	if err != nil {
		total, ok := f.track.counts()
		err = fmt.Errorf("%d of %d bindings (%d exist) with %s, for example %v: %w", ok, r.cfg.N, total, sc.op, f.track.failing(3), err)
	}
	if err == nil {
		err = r.waitTemplate(pctx, f.name, r.cfg.PhaseTimeout)
	}
	p.Wall = time.Since(t0)
	err = errors.Join(err, <-started, <-disturbDone)
	if p.backDone != nil {
		<-p.backDone
	}
	cancel()
	<-watched
	if !p.at.IsZero() {
		p.DisturbedAt = p.at.Sub(t0)
		p.Recovery = p.Wall - p.DisturbedAt
	}
	if err != nil {
		p.Err = err.Error() + tail(r.h.op.logPath)
	}
	r.h.settle(ctx)
	to, err := r.h.w.vaultAudit.offsets()
	if err == nil {
		var tallies map[string]*tally
		if tallies, err = r.h.w.vaultAudit.read(from, to, r.h.w.accessors); err == nil {
			p.Vault = tallies["operator"]
		}
	}
	if err == nil {
		var calls []vaultCall
		if calls, err = r.h.w.vaultAudit.calls(from, to, r.h.w.accessors, "operator"); err == nil {
			back := p.at.Add(p.Back)
			for _, c := range calls {
				if p.Back > 0 && p.Resumed == 0 && !c.At.Before(back) && slices.Contains(objectClasses, c.Class) {
					p.Resumed = c.At.Sub(p.at)
				}
				for _, other := range r.fleets {
					if other != f && strings.Contains(c.Path, other.name+"0") {
						p.OtherFleet++
					}
				}
			}
		}
	}
	if err != nil && p.Err == "" {
		p.Err = "measuring: " + err.Error()
	}
	_, resetsAfter := r.c.Proxy.Counts()
	p.ProxyResets = resetsAfter - resets
	p.Panics = panicsIn(r.h.op.logPath, logFrom)
	r.mu.Lock()
	p.NotReady = map[string]int{}
	for reason, names := range r.notReady {
		p.NotReady[reason] = len(names)
	}
	if sc.wave != "" {
		p.ReadyLow = r.cfg.N - r.downMax
	}
	if len(r.stalled) > stalledBefore {
		for k, why := range r.stalled {
			p.Stalled = append(p.Stalled, k+" ("+why+")")
		}
		sort.Strings(p.Stalled)
	}
	r.notReady, r.down = nil, nil
	r.mu.Unlock()
	rep, err := r.check(ctx)
	if err != nil {
		p.Check = "check failed: " + err.Error()
		p.Problems = []string{p.Check}
		return p
	}
	p.Check, p.Problems = rep.String(), rep.Problems()
	return p
}

// check compares Vault with every fleet.
func (r *haRun) check(ctx context.Context) (fleetcheck.Report, error) {
	f := fleetcheck.Fleet{Cluster: r.clusterID}
	for _, fl := range r.fleets {
		tpl := &v1alpha1.MinionTemplate{}
		if err := r.h.w.admin.Get(ctx, types.NamespacedName{Name: fl.name}, tpl); err != nil {
			return fleetcheck.Report{}, err
		}
		list := &v1alpha1.MinionBindingList{}
		if err := r.h.w.admin.List(ctx, list, client.InNamespace(fl.name)); err != nil {
			return fleetcheck.Report{}, err
		}
		f.Templates = append(f.Templates, tpl)
		f.Bindings = append(f.Bindings, list.Items...)
	}
	return fleetcheck.Check(ctx, r.h.w.root, f)
}

// killActive SIGKILLs the active node and waits for the election.
func (r *haRun) killActive(ctx context.Context, p *haPhase) error {
	a, err := r.c.Active(ctx)
	if err != nil {
		return err
	}
	at, err := r.c.Kill(a)
	p.at, p.Node = at, r.c.Nodes[a].ID
	if err != nil {
		return err
	}
	r.watchBack(ctx, p)
	return r.waitElection(ctx, p, a, at)
}

// stepDown asks the active node to step down and waits for another.
func (r *haRun) stepDown(ctx context.Context, p *haPhase) error {
	a, at, err := r.c.StepDown(ctx)
	if a >= 0 {
		p.Node = r.c.Nodes[a].ID
	}
	p.at = at
	if err != nil {
		return err
	}
	r.watchBack(ctx, p)
	return r.waitElection(ctx, p, a, at)
}

// sealedRestart kills the operator's node (active-following: the active
// node; standby: the standby the connection names) and starts it again
// at once: it comes back sealed, stays so for sealedFor from the kill,
// then is unsealed.
func (r *haRun) sealedRestart(ctx context.Context, p *haPhase) error {
	node := r.opNode
	if node < 0 {
		var err error
		if node, err = r.c.Active(ctx); err != nil {
			return err
		}
	}
	wasActive := r.c.Health(ctx, node) == localenv.NodeActive
	at, err := r.c.Kill(node)
	p.at, p.Node = at, r.c.Nodes[node].ID
	if err != nil {
		return err
	}
	r.watchBack(ctx, p)
	if err := r.c.Restart(ctx, node, false); err != nil {
		return err
	}
	if wasActive {
		if err := r.waitElection(ctx, p, node, at); err != nil {
			return err
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(at.Add(r.cfg.SealedFor))):
	}
	if st := r.c.Health(ctx, node); st != localenv.NodeSealed {
		return fmt.Errorf("%s is %s before its unseal, not sealed", p.Node, st)
	}
	p.Sealed = time.Since(at)
	return r.c.Unseal(ctx, node)
}

// watchConnection records the connection's status as it changes, every
// update the API server sends (a watch) from t0 until ctx ends (the
// channel closes then).
func (r *haRun) watchConnection(ctx context.Context, t0 time.Time, p *haPhase) <-chan struct{} {
	done := make(chan struct{})
	var mu sync.Mutex
	last, identity := "", ""
	seen := func(o any) {
		vc, ok := o.(*v1alpha1.VaultConnection)
		if !ok || vc.Name != connectionName {
			return
		}
		reason := "no Ready"
		if c := apimeta.FindStatusCondition(vc.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
			reason = string(c.Status) + " " + c.Reason
		}
		st := fmt.Sprintf("%s, cluster %.8s, identity %.8s", reason, vc.Status.ClusterID, vc.Status.Identity)
		mu.Lock()
		defer mu.Unlock()
		if st != last {
			p.Connection = append(p.Connection, fmt.Sprintf("+%s %s", time.Since(t0).Round(10*time.Millisecond), st))
			last = st
		}
		if identity != "" && vc.Status.Identity != "" && vc.Status.Identity != identity {
			p.IdentityChanges++
		}
		if vc.Status.Identity != "" {
			identity = vc.Status.Identity
		}
	}
	go func() {
		defer close(done)
		c, err := cache.New(r.h.w.adminCfg, cache.Options{Scheme: r.h.w.env.Scheme})
		if err != nil {
			p.Connection = append(p.Connection, "watch: "+err.Error())
			return
		}
		inf, err := c.GetInformer(ctx, &v1alpha1.VaultConnection{})
		if err != nil {
			p.Connection = append(p.Connection, "watch: "+err.Error())
			return
		}
		_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }})
		_ = c.Start(ctx) // until ctx ends
		mu.Lock()
		defer mu.Unlock()
	}()
	return done
}

// watchBack polls the operator's address with a token lookup every 50 ms
// from the disturbance on, each on a new connection, until Vault answers:
// p.Back.
func (r *haRun) watchBack(ctx context.Context, p *haPhase) {
	addr := r.c.Proxy.URL
	if r.opNode >= 0 {
		addr = r.c.Nodes[r.opNode].Addr
	}
	p.backDone = make(chan struct{})
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(p.backDone)
		_ = poll(ctx, 50*time.Millisecond, r.cfg.PhaseTimeout, func() (bool, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/auth/token/lookup-self", nil)
			if err != nil {
				return false, err
			}
			req.Header.Set("X-Vault-Token", r.c.RootToken)
			resp, err := hc.Do(req)
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.Back = time.Since(p.at)
				return true, nil
			}
			return false, nil
		})
	}()
}

// waitElection waits until a node other than old is active, and (with the
// proxy) until the proxy sends new connections there.
func (r *haRun) waitElection(ctx context.Context, p *haPhase, old int, since time.Time) error {
	next, at, err := r.c.WaitActive(ctx, 2*time.Minute, old)
	if err != nil {
		return err
	}
	p.Election = at.Sub(since)
	if r.mode != modeActive {
		return nil
	}
	err = poll(ctx, 10*time.Millisecond, time.Minute, func() (bool, error) { return r.c.Proxy.Active() == next, nil })
	p.ProxyFollowed = time.Since(since)
	return err
}

// repair brings every node back, unsealed, the cluster healthy: between
// two disturbed operations, unmeasured.
func (r *haRun) repair(ctx context.Context) error {
	for i := range r.c.Nodes {
		switch {
		case !r.c.Running(i):
			if err := r.c.Restart(ctx, i, true); err != nil {
				return err
			}
		case r.c.Health(ctx, i) == localenv.NodeSealed:
			if err := r.c.Unseal(ctx, i); err != nil {
				return err
			}
		}
	}
	return r.c.WaitHealthy(ctx, 2*time.Minute)
}

// ensureStandby keeps the operator's node a standby (standby mode): should
// it be active, it steps down until another node is.
func (r *haRun) ensureStandby(ctx context.Context) error {
	if r.opNode < 0 {
		return nil
	}
	for attempt := 0; attempt < 5; attempt++ {
		a, err := r.c.Active(ctx)
		if err != nil {
			if _, _, err = r.c.WaitActive(ctx, time.Minute); err != nil {
				return err
			}
			continue
		}
		if a != r.opNode {
			return nil
		}
		if _, _, err := r.c.StepDown(ctx); err != nil {
			return err
		}
		if _, _, err := r.c.WaitActive(ctx, time.Minute, a); err != nil {
			return err
		}
		// A node that stepped down does not take the HA lock again for
		// 10 s (Vault's manualStepDownSleepPeriod): should raft elect it
		// at the next disturbance, Vault would have no active node until
		// then. The disturbances measured come after that.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(11 * time.Second):
		}
	}
	return fmt.Errorf("%s stays the active node after 5 step-downs", r.c.Nodes[r.opNode].ID)
}
