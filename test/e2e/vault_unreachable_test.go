//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestUnreachableVaultIsSaidAndConverges: a binding whose connection's
// Vault does not answer says so in its conditions (VaultUnavailable,
// Reconciling), and becomes Ready once the connection points at a Vault.
func TestUnreachableVaultIsSaidAndConverges(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	ns, down, via, late := "unreach", "unreach-down", "unreach-via-down", "unreach-late01"
	s.createNamespace(ns)

	s.createVia(down, via, unreachableVault)
	b := binding(ns, late, late, map[string]any{})
	b.Spec.TemplateRef.Name = via
	s.must(s.c.Create(ctx, b))
	eventually(t, 30*time.Second, "VaultUnavailable", func() error {
		b := s.binding(ns, late)
		ready := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
		rec := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReconcilingCondition)
		if ready == nil || ready.Reason != v1alpha1.VaultUnavailableReason || rec == nil || rec.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions %+v", b.Status.Conditions)
		}
		return nil
	})
	s.setAddress(down, s.env.Vault.Addr)
	s.waitReady(ns, late)
}
