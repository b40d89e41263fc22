//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/testing/faultproxy"
)

// gateBindings is how many bindings TestRevokedTokenWaitsAtTheConnection
// runs (GATE_BINDINGS overrides it).
func gateBindings() int {
	if n, err := strconv.Atoi(os.Getenv("GATE_BINDINGS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// TestRevokedTokenWaitsAtTheConnection: with the operator's token revoked,
// its bindings wait on their connection instead of each trying Vault: the
// operator's Vault requests per 10 s while revoked stay within the rate of
// a healthy fleet's resync, whatever the fleet's size, even with every
// binding asked to reconcile; a new token in the connection's Secret lets
// them all go on within seconds.
func TestRevokedTokenWaitsAtTheConnection(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	n := gateBindings()
	const ns, conn, secret = "gate", "gate-vault", "gate-token"
	newToken := func() string {
		tok, err := s.root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{"minionvault-operator"}, TTL: "2h", NoDefaultPolicy: true})
		s.must(err)
		return tok.Auth.ClientToken
	}
	setToken := func(token string) {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: operatorNamespace}}
		_, err := controllerutil.CreateOrUpdate(ctx, s.c, sec, func() error {
			sec.StringData = map[string]string{"token": token}
			return nil
		})
		s.must(err)
	}
	token := newToken()
	setToken(token)
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	s.must(s.c.Create(ctx, tokenConnection(conn, s.env.Vault.Addr, secret)))
	tpl := minionTemplate("gate", conn, "salt-minions", "gate")
	s.must(s.c.Create(ctx, tpl))
	for i := 0; i < n; i++ {
		b := binding(ns, fmt.Sprintf("g%04d", i), fmt.Sprintf("gate%04d", i), map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = "gate"
		s.must(s.c.Create(ctx, b))
	}
	ready := func() (readyN, waiting int) {
		list := &v1alpha1.MinionBindingList{}
		s.must(s.c.List(ctx, list, client.InNamespace(ns)))
		for _, b := range list.Items {
			c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
			switch {
			case c == nil:
			case c.Status == metav1.ConditionTrue:
				readyN++
			case strings.Contains(c.Message, fmt.Sprintf("VaultConnection %q cannot be used", conn)):
				waiting++
			}
		}
		return readyN, waiting
	}
	begin := time.Now()
	eventually(t, 10*time.Minute, "every binding Ready", func() error {
		if r, _ := ready(); r != n {
			return fmt.Errorf("%d of %d Ready", r, n)
		}
		return nil
	})
	t.Logf("%d bindings Ready in %s", n, time.Since(begin).Round(time.Second))
	requests := func() int64 { return s.writes.reads.Load() + s.writes.writes.Load() }

	// The token is revoked, and every binding is asked to reconcile (as a
	// resync, or a template change, would). The first window counts from
	// the revocation.
	// Vault's audit log counts what the revoked token costs: the requests
	// made with it and those refused for want of a valid token. The
	// operator's own count is every connection's, the other tests' healthy
	// fleets' checks included, so it is reported, not bounded.
	audit := s.vaultAudit(t)
	revoked := s.accessorOf(t, token)
	deadToken := func(accessor string) bool { return accessor == revoked || accessor == "" }
	windowStart, before, mark := time.Now(), requests(), audit.mark(t)
	revokedTime := time.Now()
	s.must(s.root.Auth().Token().RevokeTreeWithContext(ctx, token))
	list := &v1alpha1.MinionBindingList{}
	s.must(s.c.List(ctx, list, client.InNamespace(ns)))
	stamp := time.Now().Format(time.RFC3339Nano)
	for i := range list.Items {
		b := &list.Items[i]
		patch := client.MergeFrom(b.DeepCopy())
		if b.Annotations == nil {
			b.Annotations = map[string]string{}
		}
		b.Annotations[v1alpha1.ReconcileRequestAnnotation] = stamp
		s.must(s.c.Patch(ctx, b, patch))
	}
	var windows, audited []int64
	revokedAt := mark
	for w := 0; w < 3; w++ {
		time.Sleep(time.Until(windowStart.Add(10 * time.Second)))
		now, at := requests(), audit.mark(t)
		windows = append(windows, now-before)
		audited = append(audited, int64(audit.responses(t, mark, deadToken))-int64(audit.responses(t, at, deadToken)))
		windowStart, before, mark = windowStart.Add(10*time.Second), now, at
	}
	_, waiting := ready()
	// A healthy fleet resyncs each binding with three reads an interval
	// (1 h): n*3/360 requests per 10 s, and never less than the
	// connection's own check (every 30 s) and a binding's check of it
	// (at most every 5 s).
	limit := int64(max(n*3/360, 1) + 3)
	t.Logf("revoked token, %d bindings asked to reconcile: per 10 s, Vault's audit log %v with the revoked token (limit %d), operator Vault requests over every connection %v; %d bindings waiting on %s", n, audited, limit, windows, waiting, conn)
	for i := range audited {
		if audited[i] > limit {
			t.Errorf("window %d: %d Vault requests with the revoked token in 10 s, more than %d", i, audited[i], limit)
		}
	}
	if t.Failed() {
		t.Logf("Vault's audit log from the revocation on, the revoked token's: %s", strings.Join(audit.requestsAfter(t, revokedAt, deadToken), "; "))
	}
	if waiting == 0 {
		t.Errorf("no binding says it waits on %s", conn)
	}
	// One event says it, the connection's: none per waiting binding (a
	// thousand Warnings would fill client-go's queue, which then drops
	// events, the connection's own among them).
	s.event(conn, v1alpha1.AccessDeniedReason)
	events := &eventsv1.EventList{}
	s.must(s.c.List(ctx, events, client.InNamespace(ns)))
	warned := 0
	for _, e := range events.Items {
		if e.Regarding.Kind == "MinionBinding" && e.Type == corev1.EventTypeWarning && e.EventTime.After(revokedTime) {
			warned++
		}
	}
	if warned > 0 {
		t.Errorf("%d Warning events of bindings waiting on %s, want none (the connection's event says it)", warned, conn)
	}

	// A new token: the connection's check passes and every binding goes on.
	setToken(newToken())
	healed := time.Now()
	eventually(t, 2*time.Minute, "every binding Ready again", func() error {
		if r, _ := ready(); r != n {
			return fmt.Errorf("%d of %d Ready", r, n)
		}
		return nil
	})
	t.Logf("all %d Ready %s after the new token", n, time.Since(healed).Round(100*time.Millisecond))
}

// TestAGateReopenedByACheckWakesItsBindings: a binding's failed request
// and the token check it leads to (Verify) close the connection's gate
// while the connection still says Ready; the connection controller's own
// check, sent at once, passes. The connection's Ready condition never
// changes, so no watch of it wakes the binding: the gate opening must (in
// CI, a dropped connection in the fault suite left two bindings waiting
// outcome.WaitAfter, two minutes).
func TestAGateReopenedByACheckWakesItsBindings(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	const ns, conn, secret, tplName, minion = "reopen", "reopen-vault", "reopen-token", "reopen", "reopen01"
	proxy, err := faultproxy.New(s.env.Vault.Addr, 1)
	s.must(err)
	t.Cleanup(func() { _ = proxy.Close() })
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: operatorNamespace},
		StringData: map[string]string{"token": s.operatorToken(ctx)}}))
	s.must(s.c.Create(ctx, tokenConnection(conn, proxy.URL(), secret)))
	s.must(s.c.Create(ctx, minionTemplate(tplName, conn, "salt-minions", "reopen")))
	b := binding(ns, minion, minion, map[string]any{"roles": []string{"web"}})
	b.Spec.TemplateRef.Name = tplName
	s.must(s.c.Create(ctx, b))
	// Before the proxy closes: a connection to a closed proxy would fail
	// its checks in every later test's operator.
	t.Cleanup(func() {
		s.must(client.IgnoreNotFound(s.c.Delete(ctx, b)))
		s.must(client.IgnoreNotFound(s.c.Delete(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: tplName}})))
		eventually(t, time.Minute, "the binding and template gone", func() error {
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(b), &v1alpha1.MinionBinding{}); err == nil {
				return fmt.Errorf("the binding is still there")
			}
			if err := s.c.Get(ctx, client.ObjectKey{Name: tplName}, &v1alpha1.MinionTemplate{}); err == nil {
				return fmt.Errorf("the template is still there")
			}
			return nil
		})
		s.must(s.c.Delete(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: conn}}))
		s.must(s.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: operatorNamespace}}))
	})
	s.waitReady(ns, minion)
	readyOf := func() (metav1.Condition, error) {
		vc := &v1alpha1.VaultConnection{}
		if err := s.c.Get(ctx, client.ObjectKey{Name: conn}, vc); err != nil {
			return metav1.Condition{}, err
		}
		c := apimeta.FindStatusCondition(vc.Status.Conditions, v1alpha1.ReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue {
			return metav1.Condition{}, fmt.Errorf("connection %s: Ready %+v", conn, c)
		}
		return *c, nil
	}
	// The binding needs only the connection's gate open, which it is
	// before the connection's first check is in its status.
	var before metav1.Condition
	eventually(t, 30*time.Second, "the connection Ready", func() (err error) {
		before, err = readyOf()
		return err
	})

	// The binding's first request for its role and the token check after
	// it fail, each with the client's retries of a read (three tries);
	// everything else, the connection's next check first, passes.
	const tries = 3
	proxy.Set(faultproxy.Fault{Mode: faultproxy.ServerError, Paths: []string{"/role/" + minion, "/auth/token/lookup-self"}, Times: 2 * tries})
	changed := time.Now()
	s.must(s.c.Get(ctx, client.ObjectKeyFromObject(b), b))
	patch := client.MergeFrom(b.DeepCopy())
	b.Spec.Pillar = doc(map[string]any{"roles": []string{"db"}})
	s.must(s.c.Patch(ctx, b, patch))
	// Far below outcome.WaitAfter; the binding's own backoff does not
	// apply: it waits on the gate, without a retry of its own.
	eventually(t, 20*time.Second, "the binding Ready at its new generation", func() error {
		got := s.binding(ns, minion)
		c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("conditions %+v at generation %d/%d", got.Status.Conditions, got.Status.ObservedGeneration, got.Generation)
		}
		return nil
	})
	t.Logf("Ready %s after the change", time.Since(changed).Round(100*time.Millisecond))

	// The case under test happened: the refusals were the binding's
	// request and the check after it (each with its retries), and the
	// connection never said it could not be used.
	var refused []string
	for _, r := range proxy.Between(changed, time.Now()) {
		if r.Outcome == faultproxy.Refused {
			refused = append(refused, r.Method+" "+r.Path)
		}
	}
	want := slices.Repeat([]string{"GET /v1/auth/salt-minions/role/" + minion}, tries)
	want = append(want, slices.Repeat([]string{"GET /v1/auth/token/lookup-self"}, tries)...)
	// Compared as counts: the client's retries of the role read and the
	// checks after them interleave when the client gives up early (CI:
	// role, check, role, check, role, check), and either order is the case.
	got := slices.Sorted(slices.Values(refused))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("refused %v, want the binding's request for its role and a token check, each %d times", refused, tries)
		for _, r := range proxy.Between(changed, time.Now()) {
			t.Logf("%s %s %s %v", r.At.Format("15:04:05.000"), r.Method, r.Path, r.Outcome)
		}
	}
	if after, err := readyOf(); err != nil || !after.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Errorf("the connection's Ready changed (%+v %v, was %+v): its own check failed, which is not the case under test", after, err, before)
	}
}
