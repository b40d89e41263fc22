//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// TestTwoClustersOnOneVault runs a second real API server (and etcd) with
// its own operator beside the suite's, both on the suite's Vault, with a
// MinionTemplate of the same name in each and the same minion bound in
// both. Roles, entities and ACL policies have one owner: the refused
// binding writes nothing, its template writes no policy for the minion,
// deleting it changes nothing of the holder's, and after a handover (the
// holder deleted) the new holder's policies are all in Vault.
func TestTwoClustersOnOneVault(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	env2, err := testenv.Start(ctx, testenv.Options{NoVault: true, IgnoreEnv: true})
	if err != nil {
		t.Fatalf("starting the second API server: %v", err)
	}
	t.Cleanup(func() { _ = env2.Stop() })
	c2 := env2.Client
	// Cluster B's operator logs in with a token of its own (the same
	// policy), so that the audit log tells the two apart.
	tokenB, err := s.env.Vault.OperatorToken(ctx)
	s.must(err)
	stopB := runSecondOperator(t, env2, tokenB)
	defer stopB()
	opA, opB := s.accessorOf(t, s.token), s.accessorOf(t, tokenB)

	tpl := func() *v1alpha1.MinionTemplate { return minionTemplate("tc", "tc-vault", "salt-minions", "tc") }
	bindingIn := func(roles ...string) *v1alpha1.MinionBinding {
		b := binding("tc", "web", "tc01", map[string]any{"roles": roles})
		b.Spec.TemplateRef.Name = "tc"
		return b
	}
	for _, c := range []client.Client{s.c, c2} {
		s.must(client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tc"}})))
		s.must(c.Create(ctx, tokenConnection("tc-vault", s.env.Vault.Addr, "vault-token")))
		s.must(c.Create(ctx, tpl()))
	}
	clusterOf := func(c client.Client) string {
		ns := &corev1.Namespace{}
		s.must(c.Get(ctx, types.NamespacedName{Name: "kube-system"}, ns))
		return string(ns.UID)
	}
	clusterA, clusterB := clusterOf(s.c), clusterOf(c2)
	if clusterA == clusterB {
		t.Fatal("the two API servers have one cluster identity")
	}
	policyOwner := func(name string) (ownership.PolicyOwner, bool) {
		p := s.vaultRead("sys/policies/acl/" + name)
		if p == nil {
			return ownership.PolicyOwner{}, false
		}
		return ownership.ParseHeader(fmt.Sprint(p["policy"]))
	}

	// Cluster A binds the minion first.
	s.must(s.c.Create(ctx, bindingIn("web")))
	s.waitReady("tc", "web")
	eventually(t, 30*time.Second, "cluster A's policies", func() error {
		for _, name := range []string{"tc_minion_tc01", "tc_role_web"} {
			if o, ok := policyOwner(name); !ok || o.Cluster != clusterA {
				return fmt.Errorf("%s: %+v %v", name, o, ok)
			}
		}
		return nil
	})
	holder := s.snapshot(t, "salt-minions", "tc01", "tc_tc01")

	// Cluster B binds it too: refused, nothing written, no policy either.
	markB := audit.mark(t)
	s.must(c2.Create(ctx, bindingIn("db")))
	waitReasonIn(t, c2, "tc", "web", v1alpha1.MinionIDConflictReason)
	time.Sleep(3 * time.Second) // the template side's deltas, had they anything to do
	audit.settle(t)
	if calls := audit.since(t, markB, opB); calls.Writes != 0 {
		t.Errorf("cluster B wrote for a refused binding: %s", strings.Join(calls.Paths, ", "))
	}
	for _, name := range []string{"tc_minion_tc01", "tc_role_web"} {
		if o, _ := policyOwner(name); o.Cluster != clusterA {
			t.Errorf("%s is not cluster A's any more: %+v", name, o)
		}
	}
	if s.vaultRead("sys/policies/acl/tc_role_db") != nil {
		t.Error("cluster B's template wrote the refused binding's policy tc_role_db")
	}

	// Deleting the refused binding changes nothing of the holder's.
	markB = audit.mark(t)
	s.must(c2.Delete(ctx, &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tc", Name: "web"}}))
	waitGoneIn(t, c2, "tc", "web")
	time.Sleep(3 * time.Second)
	audit.settle(t)
	if calls := audit.since(t, markB, opB); calls.Writes != 0 {
		t.Errorf("deleting cluster B's refused binding wrote: %s", strings.Join(calls.Paths, ", "))
	}
	if after := s.snapshot(t, "salt-minions", "tc01", "tc_tc01"); !holder.equal(after) {
		t.Errorf("the holder's minion changed:\n%+v\n%+v", holder, after)
	}
	for _, name := range []string{"tc_minion_tc01", "tc_role_web"} {
		if o, ok := policyOwner(name); !ok || o.Cluster != clusterA {
			t.Errorf("%s after deleting the refused binding: %+v %v", name, o, ok)
		}
	}

	// The handover: cluster B binds again, cluster A's holder goes; B's
	// binding is Ready and its policies are in Vault, B's.
	s.must(c2.Create(ctx, bindingIn("db")))
	waitReasonIn(t, c2, "tc", "web", v1alpha1.MinionIDConflictReason)
	markA := audit.mark(t)
	s.must(s.c.Delete(ctx, s.binding("tc", "web")))
	s.waitGone("tc", "web")
	requestIn(t, c2, "tc", "web")
	eventually(t, 60*time.Second, "cluster B's binding Ready with its policies", func() error {
		b := &v1alpha1.MinionBinding{}
		if err := c2.Get(ctx, types.NamespacedName{Namespace: "tc", Name: "web"}, b); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions %+v", b.Status.Conditions)
		}
		for _, name := range []string{"tc_minion_tc01", "tc_role_db"} {
			if o, ok := policyOwner(name); !ok || o.Cluster != clusterB {
				return fmt.Errorf("%s: %+v %v", name, o, ok)
			}
		}
		return nil
	})
	if s.vaultRead("sys/policies/acl/tc_role_web") != nil {
		t.Error("cluster A's tc_role_web outlived its last binding")
	}
	audit.settle(t)
	t.Logf("the holder's deletion in cluster A: %s", strings.Join(audit.since(t, markA, opA).Paths, ", "))
	t.Logf("the handover in cluster B: %s", strings.Join(audit.since(t, markA, opB).Paths, ", "))
	md := rawMetadataOf(s.vaultRead("identity/entity/name/tc_tc01"))
	if o, _ := ownership.ParseMarker(md[ownership.MarkerKey]); o.Cluster != clusterB || md["roles"] != "db" {
		t.Errorf("the minion's entity after the handover: %v", md)
	}
}

// runSecondOperator runs the operator's controllers against another API
// server, with a Vault token Secret of its own.
func runSecondOperator(t *testing.T, env *testenv.Env, token string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := env.Client
	must(t, client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})))
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vault-token", Namespace: operatorNamespace}, StringData: map[string]string{"token": token}}))
	mgr := operatorManager(ctx, t, env.Config, env.Scheme, "0", nil, nil)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the second operator: %v", err)
		}
	}
}
