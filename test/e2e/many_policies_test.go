//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestManyPolicies: a template whose policy documents are per minion owns as
// many policies as it renders, and nothing in its status grows with them.
// After a restart the operator finds them again from their ownership
// headers (it rewrites none), and deleting the template deletes all of
// them. MANY_POLICIES sets how many (bindings × 50; the default, 2,000, is
// CI's size; a fleet of 10,000 minions may have 50,000).
func TestManyPolicies(t *testing.T) {
	total := 2000
	if v := os.Getenv("MANY_POLICIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 50 {
			t.Fatalf("MANY_POLICIES=%q: want a number of at least 50", v)
		}
		total = n
	}
	const perBinding = 50
	bindings := total / perBinding
	total = bindings * perBinding

	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "many"}}))
	s.must(s.c.Create(ctx, tokenConnection("many-vault", s.env.Vault.Addr, "vault-token")))
	tpl := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "many"}, Spec: v1alpha1.MinionTemplateSpec{
		ConnectionRef: v1alpha1.VaultConnectionReference{Name: "many-vault"},
		Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/{minion}"}},
		PolicyDocuments: []v1alpha1.PolicyDocument{{Name: "many_{minion}_{pillar[slots]}", Rules: []v1alpha1.PolicyRule{
			{Path: "salt/data/minions/{minion}/{pillar[slots]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}},
	}}
	s.must(s.c.Create(ctx, tpl))
	slots := make([]string, perBinding)
	for i := range slots {
		slots[i] = fmt.Sprintf("s%02d", i)
	}
	begin := time.Now()
	for i := range bindings {
		m := fmt.Sprintf("many%05d", i)
		b := binding("many", m, m, map[string]any{"slots": slots})
		b.Spec.TemplateRef.Name = "many"
		s.must(s.c.Create(ctx, b))
	}
	waitPolicies := func(what string, want int) *v1alpha1.MinionTemplate {
		t.Helper()
		mt := &v1alpha1.MinionTemplate{}
		eventually(t, manyTimeout(), what, func() error {
			if err := s.c.Get(ctx, types.NamespacedName{Name: "many"}, mt); err != nil {
				return err
			}
			if p := mt.Status.Policies; p == nil || p.Count != int64(want) || !apimeta.IsStatusConditionTrue(mt.Status.Conditions, v1alpha1.ReadyCondition) {
				return fmt.Errorf("status %+v %+v", mt.Status.Policies, mt.Status.Conditions)
			}
			return nil
		})
		return mt
	}
	mt := waitPolicies("all policies written", total)
	t.Logf("%d bindings, %d policies written and counted in %s", bindings, total, time.Since(begin).Round(time.Second))
	if n := s.vaultPolicies(t, "many_"); n != total {
		t.Errorf("Vault has %d policies of the template, want %d", n, total)
	}
	raw, _ := json.Marshal(mt.Status)
	if len(raw) > 2048 {
		t.Errorf("the template's status is %d bytes with %d policies: it grows with them", len(raw), total)
	}
	t.Logf("the template's status with %d policies: %d bytes", total, len(raw))

	// A restart forgets everything in memory: the first scan reads every
	// policy once (its header says whose it is) and writes nothing.
	// The request is made while the operator is down, so that its first
	// scan is the one that handles it (a scan reads every policy it wants).
	inVault := s.vaultPolicies(t, "") - 1 // root is never read
	// The other tests' bindings and connections resync after the restart too.
	allBindings, conns := &v1alpha1.MinionBindingList{}, &v1alpha1.VaultConnectionList{}
	s.must(s.c.List(ctx, allBindings))
	s.must(s.c.List(ctx, conns))
	s.stopOperator()
	mark := audit.mark(t)
	asked := s.requestTemplateReconcile("many")
	s.runOperator(t)
	eventually(t, manyTimeout(), "the requested scan", func() error {
		mt := &v1alpha1.MinionTemplate{}
		if err := s.c.Get(ctx, types.NamespacedName{Name: "many"}, mt); err != nil {
			return err
		}
		if mt.Status.LastHandledReconcileAt != asked {
			return fmt.Errorf("lastHandledReconcileAt %q, want %q", mt.Status.LastHandledReconcileAt, asked)
		}
		return nil
	})
	final := waitPolicies("after a restart", total)
	audit.settle(t)
	// Every connection's token: another template's first scan may read
	// this template's policies (then its sync does not).
	got := audit.sinceExcept(t, mark, s.accessorOf(t, s.root.Token()))
	// A new process logs in again (kubernetes auth): not a write to what
	// the operator manages.
	writes := slices.DeleteFunc(slices.Clone(got.Paths), func(p string) bool { return strings.HasSuffix(p, "/login") })
	if len(writes) != 0 {
		t.Errorf("the first scans after a restart wrote %d times: %v", len(writes), writes[:min(5, len(writes))])
	}
	// Each policy in Vault once (the other tests' too: their templates
	// scan after a start as well), plus the bindings' own resyncs (3 reads
	// each) and the connections' upkeep.
	if limit := inVault + 3*len(allBindings.Items) + 5*len(conns.Items) + 20; got.Reads < total || got.Reads > limit {
		t.Errorf("the first scans after a restart made %d reads, want %d to %d (%d policies in Vault); read more than once: %v; status %+v",
			got.Reads, total, limit, inVault, got.readTwice(20), final.Status)
	}
	t.Logf("restart: %d reads for %d policies in Vault (%d of the template), %d bindings in the cluster; writes but logins: %d",
		got.Reads, inVault, total, len(allBindings.Items), len(writes))

	// A restart with nothing asked: the template's status says what the
	// last process confirmed, and the new one renders the same, so its own
	// sync reads none of its policies at the start (they are compared over
	// the interval, a slot at a time). Other templates' first scans still
	// read the header of every policy they do not render, this template's
	// among them, to find their own stale ones: in this cluster of many
	// templates each policy is read at most once, and nothing is written.
	s.stopOperator()
	mark = audit.mark(t)
	s.runOperator(t)
	rootAccessor := s.accessorOf(t, s.root.Token())
	eventually(t, manyTimeout(), "the new process's first scan (it lists Vault's policies)", func() error {
		// Vault's audit log names a list with a trailing slash.
		if got := audit.sinceExcept(t, mark, rootAccessor); got.ReadPaths["sys/policies/acl/"]+got.ReadPaths["sys/policies/acl"] == 0 {
			return errors.New("Vault's policies not listed yet")
		}
		return nil
	})
	waitPolicies("after a restart with nothing asked", total)
	audit.settle(t)
	got = audit.sinceExcept(t, mark, rootAccessor)
	manyReads, twice := 0, 0
	for p, n := range got.ReadPaths {
		if strings.HasPrefix(p, "sys/policies/acl/many_") {
			manyReads += n
			if n > 1 {
				twice++
			}
		}
	}
	if twice > 0 || slices.ContainsFunc(got.Paths, func(p string) bool { return !strings.HasSuffix(p, "/login") }) {
		t.Errorf("a restart with nothing asked read %d of the template's %d policies more than once and wrote %v", twice, total, got.Paths)
	}
	t.Logf("restart with nothing asked: %d of the template's %d policies read, %d reads in all", manyReads, total, got.Reads)

	// Deleting the template deletes every policy it owns, however many.
	begin = time.Now()
	s.must(s.c.Delete(ctx, mt))
	eventually(t, manyTimeout(), "template gone", func() error {
		if err := s.c.Get(ctx, types.NamespacedName{Name: "many"}, mt); err == nil {
			return fmt.Errorf("still there: %+v", mt.Status.Conditions)
		}
		return nil
	})
	if n := s.vaultPolicies(t, "many_"); n != 0 {
		t.Errorf("%d of the template's %d policies left in Vault", n, total)
	}
	t.Logf("template deleted with its %d policies in %s", total, time.Since(begin).Round(time.Second))
	// The bindings go too, before the next test's operator starts: their
	// deletion writes to Vault, and the next test counts writes.
	s.must(s.c.DeleteAllOf(ctx, &v1alpha1.MinionBinding{}, client.InNamespace("many")))
	eventually(t, manyTimeout(), "bindings gone", func() error {
		list := &v1alpha1.MinionBindingList{}
		if err := s.c.List(ctx, list, client.InNamespace("many")); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d bindings left", len(list.Items))
		}
		return nil
	})
}

// vaultPolicies counts Vault's ACL policies whose name starts with prefix.
func (s *suite) vaultPolicies(t *testing.T, prefix string) int {
	t.Helper()
	names, err := s.root.Sys().ListPolicies()
	s.must(err)
	n := 0
	for _, p := range names {
		if strings.HasPrefix(p, prefix) {
			n++
		}
	}
	return n
}

// requestTemplateReconcile sets the reconcile annotation of a template and
// returns its value.
func (s *suite) requestTemplateReconcile(name string) string {
	s.t.Helper()
	v := time.Now().Format(time.RFC3339Nano)
	s.must(s.patchTemplate(name, func(tpl *v1alpha1.MinionTemplate) {
		if tpl.Annotations == nil {
			tpl.Annotations = map[string]string{}
		}
		tpl.Annotations[v1alpha1.ReconcileRequestAnnotation] = v
	}))
	return v
}

// manyTimeout bounds each wait of TestManyPolicies (MANY_TIMEOUT, a Go
// duration; default 5m).
func manyTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("MANY_TIMEOUT")); err == nil {
		return d
	}
	return 5 * time.Minute
}
