//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestAForeignPolicyIsNotOverwritten: a policy the template renders but the
// operator does not own (no header of its own) is left alone; the
// template says PolicyNotOwned, naming it, with an event, and the binding
// is Ready.
func TestAForeignPolicyIsNotOverwritten(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	f := newSaltMinions(s, "foreign")
	ops := f.role + "ops"

	_, err := s.root.Logical().Write("sys/policies/acl/"+ops, map[string]any{"policy": `path "secret/*" { capabilities = ["read"] }`})
	s.must(err)
	f.bind("ops01", "ops")
	f.waitReady("ops01")
	eventually(t, 20*time.Second, "PolicyNotOwned", func() error {
		mt := &v1alpha1.MinionTemplate{}
		if err := s.c.Get(ctx, types.NamespacedName{Name: f.tpl}, mt); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(mt.Status.Conditions, v1alpha1.ReadyCondition)
		if c == nil || c.Reason != v1alpha1.PolicyNotOwnedReason || !strings.Contains(c.Message, ops) {
			return fmt.Errorf("conditions %+v", mt.Status.Conditions)
		}
		return nil
	})
	if p := fmt.Sprint(s.vaultRead("sys/policies/acl/" + ops)["policy"]); strings.Contains(p, "minion-vault-operator") {
		t.Errorf("foreign policy overwritten: %s", p)
	}
	s.event(f.tpl, v1alpha1.PolicyNotOwnedReason)
}
