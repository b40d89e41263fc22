package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

const testPolicyBody = "path \"x\" {\n  capabilities = [\"read\"]\n}\n"

// planPolicies decides each observed name once, wanted names first in
// name order, then the stale ones; a name that was not read gets no
// action.
func TestPlanPolicies(t *testing.T) {
	self := testPolicyOwner("t")
	w := policyWork{
		desired: map[string]string{"b_new": testPolicyBody, "a_same": testPolicyBody, "c_foreign": testPolicyBody, "d_unread": testPolicyBody, "e_both": testPolicyBody},
		stale:   []string{"z_ours", "y_foreign", "x_gone", "e_both"},
	}
	observed := map[string]observedPolicy{
		"a_same":    {hcl: self.Header() + testPolicyBody, found: true},
		"b_new":     {},
		"c_foreign": {hcl: testPolicyBody, found: true},
		"e_both":    {hcl: self.Header() + "old", found: true},
		"z_ours":    {hcl: self.Header() + testPolicyBody, found: true},
		"y_foreign": {hcl: testPolicyOwner("u").Header() + testPolicyBody, found: true},
		"x_gone":    {},
	}
	var got []string
	for _, a := range planPolicies(w, observed, self, false) {
		got = append(got, a.name+" "+a.kind.String())
		if a.kind == ownership.PolicyWrite && a.body != self.Header()+testPolicyBody {
			t.Errorf("%s writes %q", a.name, a.body)
		}
	}
	want := []string{"a_same keep", "b_new write", "c_foreign not-owned", "e_both write", "z_ours delete", "y_foreign not-owned", "x_gone absent"}
	if !slices.Equal(got, want) {
		t.Errorf("actions\n %q\nwant\n %q", got, want)
	}
	pass, err := executePolicies(context.Background(), vaulttest.NewFake(), planPolicies(w, observed, self, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's policy is reported only where a binding wants the name.
	if !slices.Equal(pass.notOwned, []string{"c_foreign"}) || !slices.Contains(pass.absent, "y_foreign") || !slices.Contains(pass.absent, "x_gone") {
		t.Errorf("pass %+v", pass)
	}
}

// A failed read ends a sync before anything is written: the names read
// are recorded, the failed one is in no list and stays dirty.
func TestPolicySyncStopsAtAFailedRead(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.NewFake()
	desired := map[string]string{}
	for _, n := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"} {
		desired[n] = testPolicyBody
	}
	v.FailNext("ReadPolicy", &vault.Error{Op: "read sys/policies/acl", StatusCode: 503})
	var owners policyOwners
	pass, err := syncPolicies(ctx, v, testPolicyOwner("t"), false, desired, nil, owners.reader("k"))
	if err == nil || !strings.Contains(err.Error(), "reading ACL policy") {
		t.Fatalf("err %v", err)
	}
	if v.Writes() != 0 || len(pass.written) != 0 || len(pass.owned) != 0 {
		t.Errorf("a sync whose read failed wrote: %d writes, pass %+v", v.Writes(), pass)
	}
	if len(pass.absent)+len(pass.notOwned) >= len(desired) {
		t.Errorf("the failed name was recorded: %+v", pass)
	}
}

// opLog records the order of a client's policy reads and writes.
type opLog struct {
	vault.Client
	mu  sync.Mutex
	ops []string
}

func (l *opLog) ReadPolicy(ctx context.Context, name string) (string, bool, error) {
	l.add("read")
	return l.Client.ReadPolicy(ctx, name)
}

func (l *opLog) WritePolicy(ctx context.Context, name, hcl string) error {
	l.add("write")
	return l.Client.WritePolicy(ctx, name, hcl)
}

func (l *opLog) add(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op)
}

// pipelined holds a sync's first write until a read of a later chunk has
// begun, and those reads until the first write is sent: a sync that
// reads, then writes, then reads the next chunk never gets past either.
type pipelined struct {
	vault.Client
	first map[string]bool // the first chunk's names: never held

	mu                 sync.Mutex
	reads              int
	readsAtFirstWrite  int
	reading, written   chan struct{}
	readOnce, wroteOne sync.Once
}

func (p *pipelined) ReadPolicy(ctx context.Context, name string) (string, bool, error) {
	if !p.first[name] {
		p.readOnce.Do(func() { close(p.reading) })
		select {
		case <-p.written:
		case <-time.After(5 * time.Second):
			return "", false, fmt.Errorf("read of %s: no write was sent while it waited", name)
		}
	}
	hcl, found, err := p.Client.ReadPolicy(ctx, name)
	p.mu.Lock()
	p.reads++
	p.mu.Unlock()
	return hcl, found, err
}

func (p *pipelined) WritePolicy(ctx context.Context, name, hcl string) error {
	select {
	case <-p.reading:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("write of %s: the next chunk's reads did not begin before it", name)
	}
	p.wroteOne.Do(func() {
		p.mu.Lock()
		p.readsAtFirstWrite = p.reads
		p.mu.Unlock()
		close(p.written)
	})
	return p.Client.WritePolicy(ctx, name, hcl)
}

// A sync of many names (a rollout of a policy per minion) writes its first
// policy after one round of reads (policyWorkers names), and reads the next
// chunk while it writes one; a read that fails in a later chunk leaves
// what the earlier chunks wrote recorded, and nothing after it is sent.
func TestALargeSyncWritesAsItGoes(t *testing.T) {
	ctx := context.Background()
	desired := map[string]string{}
	for i := range 10 * policyChunk {
		desired[fmt.Sprintf("p%05d", i)] = testPolicyBody
	}
	first := map[string]bool{}
	for _, n := range policyChunks(policyWork{desired: desired}.inOrder())[0] {
		first[n] = true
	}
	v := &pipelined{Client: vaulttest.NewFake(), first: first, reading: make(chan struct{}), written: make(chan struct{})}
	var owners policyOwners
	pass, err := syncPolicies(ctx, v, testPolicyOwner("t"), false, desired, nil, owners.reader("k"))
	if err != nil {
		t.Fatal(err)
	}
	if reads := v.readsAtFirstWrite; reads != policyWorkers {
		t.Errorf("the first write came after %d reads, want %d", reads, policyWorkers)
	}
	if len(pass.written) != len(desired) || !slices.IsSorted(pass.written) {
		t.Errorf("%d of %d written (sorted %v)", len(pass.written), len(desired), slices.IsSorted(pass.written))
	}

	fake := vaulttest.NewFake()
	for range policyWorkers + 2*policyChunk + 3 {
		fake.FailNext("ReadPolicy", nil)
	}
	fake.FailNext("ReadPolicy", &vault.Error{Op: "read sys/policies/acl", StatusCode: 503})
	pass, err = syncPolicies(ctx, fake, testPolicyOwner("t"), false, desired, nil, owners.reader("k2"))
	if err == nil {
		t.Fatal("a sync with a failed read succeeded")
	}
	want := policyWorkers + 2*policyChunk
	if len(pass.written) != want || fake.Calls("WritePolicy") != want {
		t.Errorf("a read failing in the fourth chunk: %d recorded written, %d written, want the first three chunks' %d",
			len(pass.written), fake.Calls("WritePolicy"), want)
	}
	if reads := fake.Calls("ReadPolicy"); reads > want+policyChunk {
		t.Errorf("%d reads: the sync read on past the chunk that failed", reads)
	}
}

// policyChunks: one round of reads first, then chunks of policyChunk.
func TestPolicyChunks(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint(i)
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{0, nil},
		{1, []int{1}},
		{policyWorkers, []int{policyWorkers}},
		{policyWorkers + 1, []int{policyWorkers, 1}},
		{policyWorkers + 2*policyChunk + 3, []int{policyWorkers, policyChunk, policyChunk, 3}},
	} {
		var got []int
		for _, c := range policyChunks(names(tc.n)) {
			got = append(got, len(c))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%d names: chunks %v, want %v", tc.n, got, tc.want)
		}
	}
}

// The plan of a template's policies is the sync's: the same reads, the same
// decisions; converged, it is empty.
func TestPlannerPlansWhatTheSyncDoes(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.NewFake()
	self := testPolicyOwner("t")
	for name, hcl := range map[string]string{
		"t_keep":    self.Header() + testPolicyBody,
		"t_change":  self.Header() + "path \"old\" {\n  capabilities = [\"read\"]\n}\n",
		"t_stale":   self.Header() + testPolicyBody,
		"t_legacy":  ownership.PolicyOwner{Template: "t"}.Header() + testPolicyBody,
		"t_foreign": testPolicyBody,
		"u_other":   testPolicyOwner("u").Header() + testPolicyBody,
	} {
		if err := v.WritePolicy(ctx, name, hcl); err != nil {
			t.Fatal(err)
		}
	}
	tpl := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	bindings := map[types.NamespacedName]*render.Result{
		{Namespace: "salt", Name: "web01"}: {PolicyDocuments: []render.RenderedPolicy{{Name: "t_keep", HCL: testPolicyBody}, {Name: "t_change", HCL: testPolicyBody}}},
		{Namespace: "salt", Name: "web02"}: {PolicyDocuments: []render.RenderedPolicy{{Name: "t_new", HCL: testPolicyBody}, {Name: "t_foreign", HCL: testPolicyBody}, {Name: "t_keep", HCL: testPolicyBody}}},
	}
	v.ResetCalls()
	planner := &Planner{Vault: vault.ReadOnly(v)}
	pp, err := planner.Plan(ctx, tpl, "", bindings)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range pp.Changes {
		got = append(got, c.Action+" "+c.Path)
	}
	want := []string{"create sys/policies/acl/t_new", "update sys/policies/acl/t_change",
		"delete sys/policies/acl/t_legacy", "delete sys/policies/acl/t_stale"}
	if !slices.Equal(got, want) || !slices.Equal(pp.NotOwned, []string{"t_foreign"}) || len(pp.Warnings) != 0 {
		t.Errorf("plan %q, not owned %q, warnings %q; want %q", got, pp.NotOwned, pp.Warnings, want)
	}
	// Every policy in Vault read once (the built-in root and default
	// aside: the six above), the plan's discovery and reads together, and
	// t_new, absent.
	if n := v.Calls("ReadPolicy"); n != 7 {
		t.Errorf("%d policy reads, want 7", n)
	}
	if err := executePlan(ctx, v, pp); err != nil {
		t.Fatal(err)
	}
	if pp, err = (&Planner{Vault: v}).Plan(ctx, tpl, testCluster, bindings); err != nil || len(pp.Changes) != 0 {
		t.Errorf("converged, yet %+v %v", pp.Changes, err)
	}
}

// A plan told no cluster takes the one its template's headers name; with
// two, it warns and takes none as the template's.
func TestPlannerLearnsTheCluster(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.NewFake()
	tpl := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	write := func(name string, o ownership.PolicyOwner) {
		if err := v.WritePolicy(ctx, name, o.Header()+testPolicyBody); err != nil {
			t.Fatal(err)
		}
	}
	write("t_a", ownership.PolicyOwner{Cluster: "c-1", Template: "t"})
	pp, err := (&Planner{Vault: v}).Plan(ctx, tpl, "", nil)
	if err != nil || len(pp.Changes) != 1 || pp.Changes[0].Action != "delete" || len(pp.Warnings) != 0 {
		t.Errorf("one cluster: %+v %v", pp, err)
	}
	write("t_b", ownership.PolicyOwner{Cluster: "c-2", Template: "t"})
	pp, err = (&Planner{Vault: v}).Plan(ctx, tpl, "", nil)
	if err != nil || len(pp.Changes) != 0 || len(pp.Warnings) != 1 || !strings.Contains(pp.Warnings[0], "c-1, c-2") {
		t.Errorf("two clusters: %+v %v", pp, err)
	}
	pp, err = (&Planner{Vault: v}).Plan(ctx, tpl, "c-2", nil)
	if err != nil || len(pp.Changes) != 1 || pp.Changes[0].Path != "sys/policies/acl/t_b" {
		t.Errorf("told c-2: %+v %v", pp, err)
	}
}

// Bindings that render one name differently: the template's own Stalled
// verdict, and nothing planned.
func TestPlannerRefusesAConflict(t *testing.T) {
	tpl := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	bindings := map[types.NamespacedName]*render.Result{
		{Namespace: "b", Name: "web02"}: {PolicyDocuments: []render.RenderedPolicy{{Name: "p", HCL: "two"}}},
		{Namespace: "a", Name: "web01"}: {PolicyDocuments: []render.RenderedPolicy{{Name: "p", HCL: "one"}}},
	}
	v := vaulttest.NewFake()
	_, err := (&Planner{Vault: v}).Plan(context.Background(), tpl, "", bindings)
	var verdict *admission.Verdict
	if !errors.As(err, &verdict) || verdict.Reason != v1alpha1.ValidationFailedReason ||
		verdict.Message != `policy "p" renders differently for MinionBindings a/web01 and b/web02` {
		t.Fatalf("err %v", err)
	}
	if v.Calls("*") != 0 {
		t.Errorf("a refused plan made %d Vault calls", v.Calls("*"))
	}
}

// failFirstWrite fails the first write it is sent once policyWorkers
// writes are in flight; the others then give up only if their context is
// cancelled (a client abandoning a request that Vault may still carry
// out), and otherwise land.
type failFirstWrite struct {
	vault.Client
	mu       sync.Mutex
	started  int
	inFlight chan struct{} // closed when policyWorkers writes began
	failed   chan struct{} // closed when the first write has failed
	given    int           // writes abandoned on a cancelled context
}

func (f *failFirstWrite) WritePolicy(ctx context.Context, name, hcl string) error {
	f.mu.Lock()
	f.started++
	first := f.started == 1
	if f.started == policyWorkers {
		close(f.inFlight)
	}
	f.mu.Unlock()
	if first {
		select {
		case <-f.inFlight:
		case <-time.After(5 * time.Second):
			return fmt.Errorf("write of %s: the other writes never began", name)
		}
		defer close(f.failed)
		return &vault.Error{Op: "write sys/policies/acl/" + name, StatusCode: 500}
	}
	<-f.failed
	select {
	case <-ctx.Done():
		f.mu.Lock()
		f.given++
		f.mu.Unlock()
		return ctx.Err()
	case <-time.After(200 * time.Millisecond):
	}
	return f.Client.WritePolicy(ctx, name, hcl)
}

// A failed write stops the sync, but the writes already in flight are
// answered, not cancelled: a write the client abandons may still land in
// Vault after the next sync read the name, which then writes the same body
// again (found twice in Vault's audit log by the fault suite, under dropped
// connections). Their outcome is recorded, and nothing more is sent.
func TestAFailedWriteLetsTheWritesInFlightFinish(t *testing.T) {
	desired := map[string]string{}
	for i := range 3 * policyWorkers {
		desired[fmt.Sprintf("p%02d", i)] = testPolicyBody
	}
	v := &failFirstWrite{Client: vaulttest.NewFake(), inFlight: make(chan struct{}), failed: make(chan struct{})}
	var owners policyOwners
	pass, err := syncPolicies(context.Background(), v, testPolicyOwner("t"), false, desired, nil, owners.reader("k"))
	if err == nil {
		t.Fatal("the sync succeeded with a failed write")
	}
	if v.given != 0 {
		t.Errorf("%d writes in flight were cancelled when another failed", v.given)
	}
	if len(pass.written) != policyWorkers-1 {
		t.Errorf("recorded written %v, want the %d writes in flight beside the failed one", pass.written, policyWorkers-1)
	}
	if v.started != policyWorkers {
		t.Errorf("%d writes sent, want the %d in flight when the first failed, none after", v.started, policyWorkers)
	}
}

// executePlan makes a plan's writes against vc, as the template
// reconciler would.
func executePlan(ctx context.Context, vc vault.Client, pp Plan) error {
	_, err := executePolicies(ctx, vc, pp.actions, nil)
	return err
}
