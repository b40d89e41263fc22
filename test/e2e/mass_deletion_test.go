//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// massBindings is how many holders TestMassDeletionLeavesNothing deletes
// (E2E_MASS_BINDINGS), with a tenth as many claimants.
func massBindings() int {
	if n, err := strconv.Atoi(os.Getenv("E2E_MASS_BINDINGS")); err == nil && n >= 10 {
		return n
	}
	return 1000
}

// TestMassDeletionLeavesNothing deletes every binding at once, as a
// namespace teardown or a GitOps prune does: 1,000 holders and 100
// claimants of their minion IDs in two other namespaces (half of them
// differing only in case), each namespace's bindings in one call, the three
// calls at once. A claimant woken by its holder's deletion may take the
// minion over while it still exists, never once it is being deleted:
// Vault's audit log has no write to a role, entity or alias after the
// calls returned (every binding was being deleted or gone by then), only
// deletes; afterwards nothing of theirs is left in Vault.
func TestMassDeletionLeavesNothing(t *testing.T) {
	n := massBindings()
	claimants := n / 10
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, tokenConnection("md-vault", s.env.Vault.Addr, "vault-token"))))
	s.waitConnectionReady("md-vault")
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, minionTemplate("md-t", "md-vault", "salt-minions", "md"))))
	namespaces := []string{"md-a", "md-b", "md-c"}
	for _, ns := range namespaces {
		s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	}
	create := func(ns, name, minion string) {
		b := binding(ns, name, minion, map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = "md-t"
		s.must(s.c.Create(ctx, b))
	}
	started := time.Now()
	for i := range n {
		create("md-a", fmt.Sprintf("h%04d", i), fmt.Sprintf("md%04d", i))
	}
	s.waitReasons(t, "md-a", n, v1alpha1.SucceededReason, 5*time.Minute)
	for i := range claimants {
		ns, minion := "md-b", fmt.Sprintf("MD%04d", i) // the holder's ID in upper case
		if i%2 == 1 {
			ns, minion = "md-c", fmt.Sprintf("md%04d", i)
		}
		create(ns, fmt.Sprintf("c%04d", i), minion)
	}
	s.waitReasons(t, "md-b", claimants/2, v1alpha1.DuplicateMinionIDReason, 2*time.Minute)
	s.waitReasons(t, "md-c", claimants-claimants/2, v1alpha1.DuplicateMinionIDReason, 2*time.Minute)
	t.Logf("%d holders Ready and %d claimants refused in %s", n, claimants, time.Since(started).Round(time.Second))

	mark := audit.mark(t)
	var wg sync.WaitGroup
	errs := make([]error, len(namespaces))
	for i, ns := range namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.c.DeleteAllOf(ctx, &v1alpha1.MinionBinding{}, client.InNamespace(ns))
		}()
	}
	wg.Wait()
	deletedAt := time.Now()
	for _, err := range errs {
		s.must(err)
	}
	eventually(t, 5*time.Minute, "every binding gone", func() error {
		for _, ns := range namespaces {
			list := &v1alpha1.MinionBindingList{}
			if err := s.c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d bindings left in %s, e.g. %s: %+v", len(list.Items), ns, list.Items[0].Name, list.Items[0].Status.Conditions)
			}
		}
		return nil
	})
	t.Logf("deleted in %s", time.Since(deletedAt).Round(time.Second))
	audit.settle(t)

	var writes, deletes, late []string
	for _, line := range audit.requestsAfter(t, mark, func(acc string) bool { return acc == operator }) {
		at, rest, _ := strings.Cut(line, " ")
		op, path, _ := strings.Cut(rest, " ")
		if !minionObject(path) {
			continue
		}
		switch op {
		case "delete":
			deletes = append(deletes, rest)
			continue
		case "create", "update":
			writes = append(writes, rest)
		default:
			continue // reads
		}
		if when, err := time.Parse(time.RFC3339Nano, at); err == nil && when.After(deletedAt) {
			late = append(late, line)
		}
	}
	all := n + claimants
	t.Logf("the deletion of %d bindings: %d writes and %d deletes of roles, entities and aliases by the operator (%.2f writes, %.2f deletes per binding)",
		all, len(writes), len(deletes), float64(len(writes))/float64(all), float64(len(deletes))/float64(all))
	if len(late) > 0 {
		t.Errorf("%d writes after every binding was being deleted or gone, e.g. %v", len(late), late[:min(len(late), 5)])
	}
	roles, err := s.root.Logical().List("auth/salt-minions/role")
	s.must(err)
	entities, err := s.root.Logical().List("identity/entity/name")
	s.must(err)
	var left []string
	for _, sec := range []*vaultapi.Secret{roles, entities} {
		if sec == nil {
			continue
		}
		keys, _ := sec.Data["keys"].([]any)
		for _, k := range keys {
			if name := fmt.Sprint(k); strings.HasPrefix(strings.ToLower(name), "md") {
				left = append(left, name)
			}
		}
	}
	if len(left) > 0 {
		t.Errorf("%d roles and entities left in Vault, e.g. %v", len(left), left[:min(len(left), 10)])
	}
	eventually(t, 2*time.Minute, "the minions' policies deleted", func() error {
		names, err := s.root.Sys().ListPolicies()
		if err != nil {
			return err
		}
		for _, name := range names {
			if strings.HasPrefix(name, "md_minion_") {
				return fmt.Errorf("policy %s is left", name)
			}
		}
		return nil
	})
	s.must(s.c.Delete(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "md-t"}}))
}

// minionObject: the path is a minion's AppRole role, entity or alias.
func minionObject(path string) bool {
	return strings.HasPrefix(path, "auth/salt-minions/role/") || strings.HasPrefix(path, "identity/entity/name/") ||
		strings.HasPrefix(path, "identity/entity-alias")
}

// waitReasons waits until want bindings of the namespace have Ready's
// reason (observed for their generation).
func (s *suite) waitReasons(t *testing.T, ns string, want int, reason string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d bindings of %s with reason %s", want, ns, reason), func() error {
		list := &v1alpha1.MinionBindingList{}
		if err := s.c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		got, other := 0, ""
		for _, b := range list.Items {
			c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
			if c != nil && c.Reason == reason && c.ObservedGeneration == b.Generation {
				got++
			} else if other == "" && c != nil {
				other = b.Name + ": " + c.Reason + " " + c.Message
			}
		}
		if got < want {
			return fmt.Errorf("%d of %d (e.g. %s)", got, want, other)
		}
		return nil
	})
}
