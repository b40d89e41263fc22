//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestDeletionDoesNotHangWithoutAConnection: a binding whose
// VaultConnection was deleted is still deleted (with a DeletionBlocked
// event on the way), not left hanging on its finalizer.
func TestDeletionDoesNotHangWithoutAConnection(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	ns, down, via, late := "noconn", "noconn-down", "noconn-via-down", "noconn-late02"
	s.createNamespace(ns)
	s.createVia(down, via, s.env.Vault.Addr)

	b := binding(ns, late, late, map[string]any{})
	b.Spec.TemplateRef.Name = via
	s.must(s.c.Create(ctx, b))
	s.waitReady(ns, late)
	s.must(s.c.Delete(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: down}}))
	s.must(s.c.Delete(ctx, s.binding(ns, late)))
	eventually(t, 30*time.Second, "late02 gone", func() error {
		if s.binding(ns, late) != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	s.event(late, v1alpha1.DeletionBlockedReason)
}
