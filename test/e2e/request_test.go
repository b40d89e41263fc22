//go:build integration

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
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

// TestARequestComparesWithVaultBeforeItIsHandled: a reconcile request on
// templates and their bindings is reported handled only once Vault holds
// every policy as rendered. Policies edited by hand (one deleted, one with
// its body replaced under the operator's header) are put back by the
// request, and by the time every object echoes its request there is
// nothing left to wait for: an administrator who reads
// status.lastHandledReconcileAt may trust Vault at once.
//
// The edits follow a restart, as they may in any cluster: the new
// process's first scans read each other's policies to learn whose they
// are (another template's discovery reads this one's), and a request
// must not take such a read, made before the edits, for Vault as it is.
func TestARequestComparesWithVaultBeforeItIsHandled(t *testing.T) {
	const (
		ns, conn = "rqst", "rqst-vault"
		// The template whose policies are edited, and another one on the
		// same Vault.
		tplName, other = "rqst", "rqst-other"
		// A minion's own policy, and a role's that several minions share.
		deleted, edited = tplName + "_minion_rqst02", tplName + "_role_web"
	)
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, tokenConnection(conn, s.env.Vault.Addr, "vault-token"))))
	roles := map[string]struct {
		template string
		roles    []string
	}{
		"rqst01": {tplName, []string{"web"}}, "rqst02": {tplName, []string{"web", "db"}},
		"rqst03": {tplName, []string{"db"}}, "rqst04": {tplName, []string{"web"}},
		"rqsto01": {other, []string{"web"}},
	}
	minions := slices.Sorted(maps.Keys(roles))
	// Before the operator stops: the deletions write to Vault, and the
	// next test may count writes.
	t.Cleanup(func() {
		s.must(s.c.DeleteAllOf(ctx, &v1alpha1.MinionBinding{}, client.InNamespace(ns)))
		for _, m := range minions {
			s.waitGone(ns, m)
		}
		for _, name := range []string{tplName, other} {
			s.must(client.IgnoreNotFound(s.c.Delete(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}})))
			eventually(t, time.Minute, "template "+name+" gone", func() error {
				if err := s.c.Get(ctx, types.NamespacedName{Name: name}, &v1alpha1.MinionTemplate{}); err == nil {
					return fmt.Errorf("still there")
				}
				return nil
			})
		}
	})
	s.must(s.c.Create(ctx, minionTemplate(tplName, conn, "salt-minions", tplName)))
	s.must(s.c.Create(ctx, minionTemplate(other, conn, "salt-minions", other)))
	for _, m := range minions {
		b := binding(ns, m, m, map[string]any{"roles": roles[m].roles})
		b.Spec.TemplateRef.Name = roles[m].template
		s.must(s.c.Create(ctx, b))
	}
	for _, m := range minions {
		s.waitReady(ns, m)
	}
	// A policy per minion, and one per role (web, db) that several share.
	wantPolicies := map[string]int{tplName: 4 + 2, other: 1 + 1}
	waitTemplateReady := func(name string) {
		t.Helper()
		eventually(t, time.Minute, "template "+name+" Ready with its policies", func() error {
			tpl := s.template(name)
			if p := tpl.Status.Policies; p == nil || p.Count != int64(wantPolicies[name]) || !apimeta.IsStatusConditionTrue(tpl.Status.Conditions, v1alpha1.ReadyCondition) {
				return fmt.Errorf("policies %+v, conditions %+v", tpl.Status.Policies, tpl.Status.Conditions)
			}
			return nil
		})
	}
	waitTemplateReady(tplName)
	waitTemplateReady(other)
	rendered := s.policiesIn(t, tplName+"_")
	if len(rendered) != wantPolicies[tplName] {
		t.Fatalf("Vault has %d policies of template %s, want %d: %v", len(rendered), tplName, wantPolicies[tplName], slices.Sorted(maps.Keys(rendered)))
	}

	// A new process: its first scans read the policies whose owner they
	// learn (and keep their bodies a while), unless status lets a template
	// take its own as confirmed; either way a request must read them anew.
	mark := audit.mark(t)
	s.restartOperator(t)
	var unread []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		read := audit.since(t, mark, operator).ReadPaths
		unread = unread[:0]
		for name := range rendered {
			if read["sys/policies/acl/"+name] == 0 {
				unread = append(unread, name)
			}
		}
		if len(unread) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitTemplateReady(tplName)
	waitTemplateReady(other)
	t.Logf("after the restart, %d of the template's %d policies read before the edits (unread: %v)", len(rendered)-len(unread), len(rendered), unread)

	mark = audit.mark(t)
	s.must(s.root.Sys().DeletePolicyWithContext(ctx, deleted))
	header, _, _ := strings.Cut(rendered[edited], "\n")
	s.must(s.root.Sys().PutPolicyWithContext(ctx, edited, header+"\npath \"secret/data/*\" {\n  capabilities = [\"read\", \"list\"]\n}\n"))

	// Every request at once, as an administrator after a hand edit would.
	asked := map[string]string{}
	for _, name := range []string{tplName, other} {
		asked["template "+name] = s.requestTemplateReconcile(name)
	}
	for _, m := range minions {
		asked["binding "+m] = requestIn(t, s.c, ns, m)
	}
	handledBy := func(what string) string {
		kind, name, _ := strings.Cut(what, " ")
		if kind == "template" {
			return s.template(name).Status.LastHandledReconcileAt
		}
		return s.binding(ns, name).Status.LastHandledReconcileAt
	}
	begin := time.Now()
	eventually(t, time.Minute, "every request reported handled", func() error {
		var waiting []string
		for _, what := range slices.Sorted(maps.Keys(asked)) {
			if handledBy(what) != asked[what] {
				waiting = append(waiting, what)
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("not handled yet: %s", strings.Join(waiting, ", "))
		}
		return nil
	})
	handledIn := time.Since(begin).Round(time.Millisecond)
	// No wait here: handled means compared with Vault and repaired.
	now := s.policiesIn(t, tplName+"_")
	for _, name := range slices.Sorted(maps.Keys(rendered)) {
		if got, ok := now[name]; !ok {
			t.Errorf("every request handled after %s, and policy %s is missing from Vault", handledIn, name)
		} else if got != rendered[name] {
			t.Errorf("every request handled after %s, and policy %s holds %q, want %q", handledIn, name, got, rendered[name])
		}
	}

	audit.settle(t)
	calls := audit.since(t, mark, operator)
	policyWrites := slices.DeleteFunc(slices.Clone(calls.Paths), func(p string) bool { return !strings.Contains(p, " sys/policies/acl/") })
	t.Logf("requests handled in %s; the operator's Vault calls since the hand edits: %d reads, %d writes (%d of policies): %s",
		handledIn, calls.Reads, calls.Writes, len(policyWrites), strings.Join(calls.Paths, ", "))
	if len(policyWrites) != 2 {
		t.Errorf("the repair made %d policy writes, want 2 (%s and %s): %v", len(policyWrites), deleted, edited, policyWrites)
	}
	if calls.Writes != len(policyWrites) {
		t.Errorf("requests on bindings in sync wrote to Vault: %v", calls.Paths)
	}
}

// template gets a MinionTemplate (empty when it cannot be read).
func (s *suite) template(name string) *v1alpha1.MinionTemplate {
	tpl := &v1alpha1.MinionTemplate{}
	_ = s.c.Get(context.Background(), types.NamespacedName{Name: name}, tpl)
	return tpl
}

// policiesIn reads Vault's ACL policies whose name starts with prefix:
// name -> text.
func (s *suite) policiesIn(t *testing.T, prefix string) map[string]string {
	t.Helper()
	names, err := s.root.Sys().ListPolicies()
	s.must(err)
	out := map[string]string{}
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		body, err := s.root.Sys().GetPolicy(n)
		s.must(err)
		out[n] = body
	}
	return out
}
