//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestRetainedObjectsAreNotHandedToTheDuplicate: the objects of a minion
// whose binding was deleted under deletionPolicy Retain are not handed to
// the binding that waited on the same minion ID; once an administrator
// releases them by hand, they are, clean (a new role ID).
func TestRetainedObjectsAreNotHandedToTheDuplicate(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	f := newSaltMinions(s, "retained")
	f.bind("web01", "web")
	web := f.id("web01")
	f.waitReady("web01")
	// The duplicate waits on the minion ID while web01 holds it; web01 is
	// then deleted, its objects retained.
	dupBinding := binding(f.ns, f.id("dup"), strings.ToUpper(web), map[string]any{"roles": []string{"web"}})
	dupBinding.Spec.TemplateRef.Name = f.tpl
	s.must(s.c.Create(ctx, dupBinding))
	dup := f.id("dup")
	s.waitStalled(f.ns, dup, v1alpha1.DuplicateMinionIDReason, "already bound by MinionBinding "+f.ns+"/"+web)
	retainAndDelete(t, f, "web01")

	b := s.waitReason(f.ns, dup, v1alpha1.MinionIDRetainedReason)
	if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); !strings.Contains(c.Message, f.ns+"/"+web) {
		t.Errorf("the refusal does not name the binding the objects are kept for: %q", c.Message)
	}
	oldRoleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/" + web + "/role-id")["role_id"])
	// An administrator releases the minion ID: deletes role and entity.
	_, err := s.root.Logical().DeleteWithContext(ctx, "auth/salt-minions/role/"+web)
	s.must(err)
	_, err = s.root.Logical().DeleteWithContext(ctx, "identity/entity/name/salt_minion_"+web)
	s.must(err)
	s.requestReconcile(f.ns, dup)
	s.waitReady(f.ns, dup)
	if roleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/" + web + "/role-id")["role_id"]); roleID == oldRoleID || roleID == "<nil>" {
		t.Errorf("the new owner's role ID %s (the old one %s)", roleID, oldRoleID)
	}
}
