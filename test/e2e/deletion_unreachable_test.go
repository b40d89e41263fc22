//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestDeletionWaitsForAnUnreachableVault: a binding deleted while its
// Vault does not answer stays, DeletionBlocked, with its role in Vault,
// and its deletion completes (the role gone) once Vault is back.
func TestDeletionWaitsForAnUnreachableVault(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	ns, down, via, late := "delunreach", "delunreach-down", "delunreach-via-down", "delunreach-late01"
	s.createNamespace(ns)
	s.createVia(down, via, s.env.Vault.Addr)
	lb := binding(ns, late, late, map[string]any{})
	lb.Spec.TemplateRef.Name = via
	s.must(s.c.Create(ctx, lb))

	b := s.waitReady(ns, late)
	s.setAddress(down, unreachableVault)
	s.must(s.c.Delete(ctx, b))
	eventually(t, 30*time.Second, "deletion blocked", func() error {
		b := s.binding(ns, late)
		if b == nil {
			return fmt.Errorf("deleted while Vault was unreachable")
		}
		if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Reason != v1alpha1.DeletionBlockedReason {
			return fmt.Errorf("conditions %+v", b.Status.Conditions)
		}
		return nil
	})
	if s.vaultRead("auth/salt-minions/role/"+late) == nil {
		t.Fatal("role gone although Vault was unreachable")
	}
	s.setAddress(down, s.env.Vault.Addr)
	eventually(t, 60*time.Second, "late01 deleted", func() error {
		if s.binding(ns, late) != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if s.vaultRead("auth/salt-minions/role/"+late) != nil {
		t.Error("role of late01 remains")
	}
}
