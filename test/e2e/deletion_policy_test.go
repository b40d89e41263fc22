//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestDeletionRemovesVaultObjects: deleting a binding (deletionPolicy
// Delete, the default) removes its role, entity and alias from Vault.
func TestDeletionRemovesVaultObjects(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	f := newSaltMinions(s, "removes")
	f.bind("db01", "db")
	db := f.id("db01")

	d := f.waitReady("db01")
	roleID := d.Status.AppRole.RoleID
	s.must(s.c.Delete(ctx, d))
	eventually(t, 20*time.Second, "db01 gone", func() error {
		if err := s.c.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: db}, &v1alpha1.MinionBinding{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	if s.vaultRead("auth/salt-minions/role/"+db) != nil || s.vaultRead("identity/entity/name/salt_minion_"+db) != nil {
		t.Error("Vault objects of db01 remain")
	}
	sec, err := s.root.Logical().Write("identity/lookup/entity", map[string]any{"alias_name": roleID, "alias_mount_accessor": s.accessor()})
	if err != nil || sec != nil {
		t.Errorf("alias of db01 remains: %v %v", sec, err)
	}
}

// TestDeletionRetainsVaultObjects: with deletionPolicy Retain, deleting a
// binding leaves its role in Vault.
func TestDeletionRetainsVaultObjects(t *testing.T) {
	s := start(t)
	f := newSaltMinions(s, "retains")
	f.bind("web01", "web")
	web := f.id("web01")
	f.waitReady("web01")

	retainAndDelete(t, f, "web01")
	if s.vaultRead("auth/salt-minions/role/"+web) == nil {
		t.Error("Retain deleted the role")
	}
}

// retainAndDelete sets the scene's template to deletionPolicy Retain and
// deletes the binding of the story's minion name, waiting until it is gone.
func retainAndDelete(t *testing.T, f *saltMinions, name string) {
	t.Helper()
	s, ctx := f.s, context.Background()
	// The operator patches the template's status meanwhile: retry on a
	// conflict rather than fail on it.
	s.must(s.patchTemplate(f.tpl, func(mt *v1alpha1.MinionTemplate) { mt.Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain }))
	time.Sleep(200 * time.Millisecond)
	s.must(s.c.Delete(ctx, s.binding(f.ns, f.id(name))))
	eventually(t, 20*time.Second, name+" gone", func() error {
		if s.binding(f.ns, f.id(name)) != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}
