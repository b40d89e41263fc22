//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/testing/faultproxy"
)

// The fault-injection suite: the operator reaches Vault through a proxy
// that injects each fault of a bad minute for a window (500s, 429 with
// Retry-After, JSON cut short, a stall longer than the client timeout, 20 %
// of connections dropped) while the fleet changes, then turns healthy.
const (
	faultBindings = 30
	// faultWindow is how long each fault lasts (FAULTS_WINDOW overrides).
	faultWindow = 15 * time.Second
	// faultClientTimeout is the connection's request timeout; the stall
	// holds requests longer, so that the client gives up while Vault
	// still carries them out later.
	faultClientTimeout = 3 * time.Second
	faultStall         = 8 * time.Second
	// backoffCeiling is controller-runtime's default per-item backoff cap
	// (5 ms doubling up to 1000 s), which the operator keeps.
	backoffCeiling = 1000 * time.Second
	// templateGrace is how long a template may still say Ready=True after
	// its bindings changed before it has seen the change: binding changes
	// do not move the template's generation, and its status follows them
	// asynchronously.
	templateGrace = 10 * time.Second
)

// faultPhases are the faults in the order they are injected, and whether
// the wave applied at the start of each also changes the template (a full
// scan) or only the bindings (deltas).
var faultPhases = []struct {
	fault          faultproxy.Fault
	changeTemplate bool
}{
	{faultproxy.Fault{Mode: faultproxy.ServerError}, false},
	{faultproxy.Fault{Mode: faultproxy.TooManyRequests, RetryAfter: 2 * time.Second}, false},
	{faultproxy.Fault{Mode: faultproxy.TruncateBody}, true},
	{faultproxy.Fault{Mode: faultproxy.Stall, Stall: faultStall}, false},
	{faultproxy.Fault{Mode: faultproxy.DropConnections, DropFraction: 0.2}, true},
}

// TestVaultFaultsHealWithoutAPoke: after each fault window everything
// converges on its own within a bound derived from the backoff ceiling
// (every binding Ready with its role, entity and alias in Vault, every
// wanted ACL policy present with its current rules and no stale one);
// nothing says Ready=True while Vault lacks what it wants, sampled during
// the fault from Vault directly; the operator sends no more requests per
// second during a fault than it does converging a healthy wave of the same
// size; and Vault's audit log shows no write repeated needlessly.
func TestVaultFaultsHealWithoutAPoke(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("FAULTS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		s.must(err)
		seed = n
	}
	window := faultWindow
	if d, err := time.ParseDuration(os.Getenv("FAULTS_WINDOW")); err == nil && d > 0 {
		window = d
	}
	t.Logf("seed %d (FAULTS_SEED), fault window %s (FAULTS_WINDOW)", seed, window)
	proxy, err := faultproxy.New(s.env.Vault.Addr, seed)
	s.must(err)
	t.Cleanup(func() { _ = proxy.Close() })
	audit := s.vaultAudit(t)
	f := newFaultFleet(t, s, proxy)

	begin := time.Now()
	f.create(t)
	// Before the proxy closes and the operator stops (cleanups run last
	// first), also when the test stops early.
	t.Cleanup(func() { f.cleanup(t, ctx) })
	created, ok := f.waitConverged(t, time.Minute)
	if !ok {
		t.Fatalf("the fleet did not converge through a healthy proxy: %s", created)
	}
	t.Logf("created: %d bindings converged in %s, %d requests through the proxy",
		faultBindings, created.at.Sub(begin).Round(100*time.Millisecond), len(proxy.Between(begin, created.at)))

	// The healthy rate: the same wave as under each fault, through the
	// healthy proxy.
	waveStart := time.Now()
	f.wave(t, 1, true)
	healthy, ok := f.waitConverged(t, time.Minute)
	if !ok {
		t.Fatalf("a healthy wave did not converge: %s", healthy)
	}
	healthyTime := healthy.at.Sub(waveStart)
	healthyRate := proxy.Rate(waveStart, healthy.at)
	healthyReqs := proxy.Between(waveStart, healthy.at)
	t.Logf("healthy wave: converged in %s, %d requests through the proxy, %.1f/s (peak %d in one second), by object %v",
		healthyTime.Round(100*time.Millisecond), len(healthyReqs), healthyRate, peakPerSecond(healthyReqs), byObject(healthyReqs))

	for _, v := range f.takeViolations() {
		t.Errorf("healthy: %s", v)
	}

	mark := audit.mark(t)
	accessor := s.accessorOf(t, f.token)
	for i, phase := range faultPhases {
		f.runPhase(t, i+2, phase.fault, phase.changeTemplate, window, healthyTime, healthyRate)
	}
	audit.settle(t)
	writes, dups := needlessWrites(t, audit.path, mark, accessor)
	t.Logf("Vault's audit log: %d successful writes and deletes by the connection's token during the fault phases, %d repeating the previous one", writes, len(dups))
	if writes < len(faultPhases)*faultBindings {
		t.Errorf("only %d writes in the audit log for %d waves of %d bindings: the log is not read right", writes, len(faultPhases), faultBindings)
	}
	if len(dups) > 0 {
		t.Errorf("Vault's audit log shows %d writes repeating the previous successful write of the same object with the same body: %v",
			len(dups), dups[:min(10, len(dups))])
		for _, d := range dups[:min(2, len(dups))] {
			f.explainWrites(t, audit.path, mark, accessor, strings.TrimPrefix(d, "update "))
		}
	}
}

// explainWrites logs what led to the writes of path: Vault's audit
// entries for it, the proxy's requests for it, and the operator's log
// lines that name it, so that a needless write found once can be traced.
func (f *faultFleet) explainWrites(t *testing.T, auditPath string, offset int64, accessor, path string) {
	t.Helper()
	(&auditLog{path: auditPath}).scan(t, offset, func(line []byte) {
		var e auditEntry
		if json.Unmarshal(line, &e) != nil || e.Auth.Accessor != accessor || e.Request.Path != path {
			return
		}
		t.Logf("audit %s %s %s %s error=%q data=%s", e.Time, e.Type, e.Request.Operation, e.Request.Path, e.Error, e.Request.Data)
	})
	for _, r := range f.proxy.Requests() {
		if strings.TrimPrefix(r.Path, "/v1/") == path {
			t.Logf("proxy %s %s %s %s", r.At.Format(time.RFC3339Nano), r.Method, r.Path, r.Outcome)
		}
	}
	name := path[strings.LastIndex(path, "/")+1:]
	for _, line := range operatorLines(func(line string) bool { return strings.Contains(line, name) }) {
		t.Logf("operator %s", line[:min(len(line), 600)])
	}
}

// runPhase injects one fault while a wave changes the fleet, then heals
// the proxy and checks convergence, the invariants and the request rate.
func (f *faultFleet) runPhase(t *testing.T, wave int, fault faultproxy.Fault, changeTemplate bool, window, healthyTime time.Duration, healthyRate float64) {
	t.Helper()
	mode := fault.Mode.String()
	f.proxy.Set(fault)
	faultStart := time.Now()
	f.wave(t, wave, changeTemplate)
	f.sampleUntil(t, faultStart.Add(window))
	f.proxy.Set(faultproxy.Fault{Mode: faultproxy.Healthy})
	healed := time.Now()
	during := f.proxy.Between(faultStart, healed)
	rate := float64(len(during)) / healed.Sub(faultStart).Seconds()

	// A key that failed all through the window waits at most about as long
	// again (doubling delays sum to the last one), capped by the ceiling;
	// a stalled request adds its hold; then the work of a healthy wave.
	bound := min(backoffCeiling, window+fault.Stall) + 3*healthyTime + 10*time.Second
	st, ok := f.waitConverged(t, bound)
	outcomes := faultproxy.Outcomes(during)
	t.Logf("%-9s wave %d: %d requests in %s (%.1f/s, peak %d/s, healthy %.1f/s), by object %v, outcomes %v; converged %v in %s after healing (bound %s)",
		mode, wave, len(during), healed.Sub(faultStart).Round(100*time.Millisecond), rate, peakPerSecond(during), healthyRate,
		byObject(during), outcomes, ok, st.at.Sub(healed).Round(100*time.Millisecond), bound.Round(time.Second))
	if !ok {
		t.Errorf("%s: not converged %s after the fault ended, without a poke: %s", mode, bound.Round(time.Second), st)
	}
	if rate > healthyRate {
		t.Errorf("%s: %.1f requests/s during the fault, more than the healthy %.1f/s: a hot loop", mode, rate, healthyRate)
	}
	for _, v := range f.takeViolations() {
		t.Errorf("%s: %s", mode, v)
	}
	// Only a stall holds a request past the client's timeout: under any
	// other fault a write the operator gave up on (a pass cancelling its
	// requests in flight when one failed) would still land in Vault after
	// the next sync read the object, and be written twice.
	if late := abandonedWrites(f.proxy.Between(faultStart, healed)); len(late) > 0 {
		t.Logf("%s: %d writes carried out by Vault after the operator hung up: %v", mode, len(late), late[:min(5, len(late))])
		if fault.Stall == 0 {
			t.Errorf("%s: %d writes carried out by Vault after the operator hung up on them, without a stall: %v", mode, len(late), late[:min(5, len(late))])
		}
	}
}

// abandonedWrites are the requests that change Vault which Vault carried
// out after their client had hung up.
func abandonedWrites(reqs []faultproxy.Request) []string {
	var out []string
	for _, r := range reqs {
		p := strings.TrimPrefix(r.Path, "/v1/")
		if !r.ClientGone || r.Method == http.MethodGet || r.Method == "LIST" || !changesObjects(p) {
			continue
		}
		out = append(out, r.Method+" "+p)
	}
	return out
}

// faultFleet is the test's fleet: what it asked for, to compare with
// what the operator says and what Vault holds.
type faultFleet struct {
	s     *suite
	proxy *faultproxy.Proxy
	token string
	// roles is each minion's pillar roles, gen the binding's generation
	// that asks for them.
	roles map[string][]string
	gen   map[string]int64
	// caps are the capabilities of the template's policy document,
	// tplGen the template generation that asks for them.
	caps   []v1alpha1.PolicyCapability
	tplGen int64

	violations map[string]string // subject -> the first violation seen in a phase
	badSince   time.Time         // since when the template says Ready=True while Vault differs
}

const (
	faultNamespace  = "faults"
	faultTemplate   = "faults"
	faultConnection = "faults-vault"
	faultPolicy     = "flt_role_"
)

func newFaultFleet(t *testing.T, s *suite, proxy *faultproxy.Proxy) *faultFleet {
	t.Helper()
	return &faultFleet{s: s, proxy: proxy, token: s.operatorToken(context.Background()),
		roles: map[string][]string{}, gen: map[string]int64{}, caps: []v1alpha1.PolicyCapability{"read"}}
}

func faultMinion(i int) string { return fmt.Sprintf("flt%02d", i) }

// waveRoles are a minion's roles in a wave: one shared by all, one of four
// that each wave renames (four new policies wanted, four made stale).
func waveRoles(wave, i int) []string {
	return []string{"base", fmt.Sprintf("w%dr%d", wave, i%4)}
}

// create makes the connection (through the proxy, with its own token, so
// that the audit log tells its requests apart), the template and the
// bindings of wave 0.
func (f *faultFleet) create(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	s := f.s
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: faultNamespace, Labels: map[string]string{"team": "faults"}}}))
	s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "faults-token", Namespace: operatorNamespace},
		StringData: map[string]string{"token": f.token}}))
	conn := tokenConnection(faultConnection, f.proxy.URL(), "faults-token")
	conn.Spec.Timeout = &metav1.Duration{Duration: faultClientTimeout}
	s.must(s.c.Create(ctx, conn))
	tpl := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: faultTemplate}, Spec: v1alpha1.MinionTemplateSpec{
		ConnectionRef:     v1alpha1.VaultConnectionReference{Name: faultConnection},
		Policies:          &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/{minion}", faultPolicy + "{pillar[roles]}"}},
		Metadata:          &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
		PolicyDocuments:   []v1alpha1.PolicyDocument{f.document()},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "faults"}},
		AllowedPolicies:   []string{"saltstack/*", faultPolicy + "*"},
	}}
	s.must(s.c.Create(ctx, tpl))
	f.tplGen = tpl.Generation
	for i := range faultBindings {
		m := faultMinion(i)
		f.roles[m] = waveRoles(0, i)
		b := binding(faultNamespace, m, m, map[string]any{"roles": f.roles[m]})
		b.Spec.TemplateRef.Name = faultTemplate
		s.must(s.c.Create(ctx, b))
		f.gen[m] = b.Generation
	}
}

func (f *faultFleet) document() v1alpha1.PolicyDocument {
	return v1alpha1.PolicyDocument{Name: faultPolicy + "{pillar[roles]}", Rules: []v1alpha1.PolicyRule{
		{Path: "salt/data/roles/{pillar[roles]}", Capabilities: f.caps}}}
}

// wave moves every binding to the wave's roles (each role, entity and
// four policies change; four policies become stale) and, with
// changeTemplate, flips the policy document's capabilities (every policy
// is rewritten).
func (f *faultFleet) wave(t *testing.T, wave int, changeTemplate bool) {
	t.Helper()
	ctx := context.Background()
	s := f.s
	for i := range faultBindings {
		m := faultMinion(i)
		b := s.binding(faultNamespace, m)
		if b == nil {
			t.Fatalf("binding %s is gone", m)
		}
		patch := client.MergeFrom(b.DeepCopy())
		b.Spec.Pillar = doc(map[string]any{"roles": waveRoles(wave, i)})
		s.must(s.c.Patch(ctx, b, patch))
		f.roles[m], f.gen[m] = waveRoles(wave, i), b.Generation
	}
	if !changeTemplate {
		return
	}
	if len(f.caps) == 1 {
		f.caps = []v1alpha1.PolicyCapability{"read", "list"}
	} else {
		f.caps = []v1alpha1.PolicyCapability{"read"}
	}
	tpl := &v1alpha1.MinionTemplate{}
	s.must(s.c.Get(ctx, client.ObjectKey{Name: faultTemplate}, tpl))
	patch := client.MergeFrom(tpl.DeepCopy())
	tpl.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{f.document()}
	s.must(s.c.Patch(ctx, tpl, patch))
	f.tplGen = tpl.Generation
}

// cleanup deletes the bindings and the template through the healthy
// proxy, then the connection, so that the next test's operator finds
// nothing of this one to do.
func (f *faultFleet) cleanup(t *testing.T, ctx context.Context) {
	t.Helper()
	s := f.s
	f.proxy.Set(faultproxy.Fault{Mode: faultproxy.Healthy})
	s.must(s.c.DeleteAllOf(ctx, &v1alpha1.MinionBinding{}, client.InNamespace(faultNamespace)))
	s.must(client.IgnoreNotFound(s.c.Delete(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: faultTemplate}})))
	eventually(t, 2*time.Minute, "the fault suite's bindings and template gone", func() error {
		list := &v1alpha1.MinionBindingList{}
		if err := s.c.List(ctx, list, client.InNamespace(faultNamespace)); err != nil {
			return err
		}
		tpl := &v1alpha1.MinionTemplate{}
		if err := s.c.Get(ctx, client.ObjectKey{Name: faultTemplate}, tpl); err == nil || len(list.Items) > 0 {
			return fmt.Errorf("%d bindings left, template there: %v", len(list.Items), err == nil)
		}
		return nil
	})
	// A connection to the closed proxy would fail its checks in every
	// later test's operator.
	s.must(s.c.Delete(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: faultConnection}}))
	s.must(s.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "faults-token", Namespace: operatorNamespace}}))
}
