//go:build integration

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// TestApplyWritesWhatTheBindingsRender: Vault holds exactly what the
// bindings render (role, entity with its metadata and owner, alias), the
// status matches Vault, the template writes each concrete policy once with
// its header, and the connection is Ready.
func TestApplyWritesWhatTheBindingsRender(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	f := newSaltMinions(s, "apply")
	f.bind("web01", "web", "db")
	f.bind("db01", "db")
	web := f.id("web01")

	b := f.waitReady("web01")
	f.waitReady("db01")
	role := s.vaultRead("auth/salt-minions/role/" + web)
	if got := strs(role["token_policies"]); !slices.Equal(got, []string{"saltstack/minions", "saltstack/" + web, f.role + "web", f.role + "db"}) {
		t.Errorf("token_policies %q", got)
	}
	if fmt.Sprint(role["secret_id_ttl"]) != "60" || fmt.Sprint(role["token_num_uses"]) != "10" {
		t.Errorf("role params %v", role)
	}
	entity := s.vaultRead("identity/entity/name/salt_minion_" + web)
	want := map[string]string{"minion-id": web, "roles": "db,web", "roles__0": "db", "roles__1": "web"}
	if got := metadataOf(entity); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("metadata %v, want %v", got, want)
	}
	raw := rawMetadataOf(entity)
	if owner, ok := ownership.ParseMarker(raw[ownership.MarkerKey]); !ok || owner.Namespace != f.ns || owner.Name != web ||
		owner.UID != string(s.binding(f.ns, web).UID) || raw[ownership.KeysKey] != "minion-id,roles" {
		t.Errorf("the operator's own metadata: %v", raw)
	}
	roleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/" + web + "/role-id")["role_id"])
	aliases, _ := entity["aliases"].([]any)
	if len(aliases) != 1 || aliases[0].(map[string]any)["name"] != roleID {
		t.Errorf("aliases %v, want one named %s", aliases, roleID)
	}
	// Status matches Vault.
	if b.Status.Entity == nil || b.Status.Entity.ID != entity["id"] || b.Status.AppRole == nil || b.Status.AppRole.RoleID != roleID {
		t.Errorf("status %+v %+v", b.Status.Entity, b.Status.AppRole)
	}
	if !slices.Equal(b.Status.Policies, []string{"saltstack/minions", "saltstack/" + web, f.role + "web", f.role + "db"}) {
		t.Errorf("status policies %q", b.Status.Policies)
	}
	// The template wrote each concrete policy once, with its header.
	f.waitPolicies(t, 2, "db", "web")
	pol := s.vaultRead("sys/policies/acl/" + f.role + "web")
	if p := fmt.Sprint(pol["policy"]); !strings.HasPrefix(p, "# Managed by minion-vault-operator") || !strings.Contains(p, `path "salt/data/roles/web"`) {
		t.Errorf("policy %s", p)
	}
	s.event(f.tpl, "PoliciesWritten") // the first write of a binding is no event; its policies are
	eventually(t, 20*time.Second, "connection Ready", func() error {
		vc := &v1alpha1.VaultConnection{}
		if err := s.c.Get(ctx, types.NamespacedName{Name: f.conn}, vc); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(vc.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue || vc.Status.VaultVersion == "" {
			return fmt.Errorf("status %+v", vc.Status)
		}
		return nil
	})
}
