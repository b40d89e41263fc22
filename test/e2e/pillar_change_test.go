//go:build integration

package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestPillarChangeIsFollowed: when a binding's pillar changes, Vault
// follows (metadata, token policies), stale keys go, and a role policy no
// binding renders any more is deleted.
func TestPillarChangeIsFollowed(t *testing.T) {
	s := start(t)
	f := newSaltMinions(s, "pillar")
	f.bind("web01", "web", "db")
	f.bind("db01", "db")
	f.waitReady("web01")
	f.waitReady("db01")
	f.waitPolicies(t, 2, "db", "web")
	web, db := f.id("web01"), f.id("db01")

	// A merge patch: the operator may write the binding's status meanwhile.
	s.must(s.patchBinding(f.ns, web, func(b *v1alpha1.MinionBinding) { b.Spec.Pillar = doc(map[string]any{"roles": []string{"web"}}) }))
	eventually(t, 20*time.Second, "metadata follows", func() error {
		got := metadataOf(s.vaultRead("identity/entity/name/salt_minion_" + web))
		if fmt.Sprint(got) != fmt.Sprint(map[string]string{"minion-id": web, "roles": "web", "roles__0": "web"}) {
			return fmt.Errorf("metadata %v", got)
		}
		return nil
	})
	if got := strs(s.vaultRead("auth/salt-minions/role/" + web)["token_policies"]); !slices.Equal(got, []string{"saltstack/minions", "saltstack/" + web, f.role + "web"}) {
		t.Errorf("token_policies %q", got)
	}
	s.event(web, "Updated")
	// db01 still renders the db role's policy; moving it to cache frees it.
	s.must(s.patchBinding(f.ns, db, func(d *v1alpha1.MinionBinding) { d.Spec.Pillar = doc(map[string]any{"roles": []string{"cache"}}) }))
	eventually(t, 20*time.Second, "unused policy deleted", func() error {
		if s.vaultRead("sys/policies/acl/"+f.role+"db") != nil {
			return fmt.Errorf("%sdb still exists", f.role)
		}
		if s.vaultRead("sys/policies/acl/"+f.role+"cache") == nil {
			return fmt.Errorf("%scache missing", f.role)
		}
		return nil
	})
}
