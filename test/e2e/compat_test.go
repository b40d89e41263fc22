//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vaultversion"
)

// TestCompatibilityRestart is the part of the compatibility suite (`make
// compat`, docs/compatibility.md) that no other test tells against every
// Vault line: the connection reads and judges the server's version, and an
// operator restarted against Vault writes nothing, reads each minion once,
// and finds every object still provably its own. The other parts of the
// suite (creation, drift, switch, deletion, the Kubernetes auth login, the
// Salt master's scenario A, the access audit) are the tests the Makefile
// names beside it.
func TestCompatibilityRestart(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	const ns, fleet = "compat", 5

	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "conn"}}}))
	s.must(s.c.Create(ctx, tokenConnection("compat", s.env.Vault.Addr, "vault-token")))
	s.must(s.c.Create(ctx, connTemplate("compat", "compat")))
	for i := range fleet {
		b := binding(ns, fmt.Sprintf("cmp%d", i), fmt.Sprintf("cmp%d", i), map[string]any{"roles": []string{"web", "db"}})
		b.Spec.TemplateRef.Name = "compat"
		s.must(s.c.Create(ctx, b))
	}

	s.run("the connection reports the server's version, a tested one", func(t *testing.T) {
		// The version the binary says it is; an existing Vault (no binary
		// started) answers with what sys/health reports to the root token,
		// a path the operator's client does not take.
		var want string
		if s.env.Vault.Bin != "" {
			want = serverVersion(t, s.env.Vault.Bin)
		} else {
			h, err := s.root.Sys().HealthWithContext(ctx)
			s.must(err)
			v, err := vaultversion.Parse(h.Version)
			s.must(err)
			want = v.String()
		}
		var reported string
		eventually(t, 30*time.Second, "connection version", func() error {
			vc := &v1alpha1.VaultConnection{}
			if err := s.c.Get(ctx, types.NamespacedName{Name: "compat"}, vc); err != nil {
				return err
			}
			reported = vc.Status.VaultVersion
			if got, err := vaultversion.Parse(reported); err != nil || got.String() != want {
				return fmt.Errorf("status.vaultVersion %q, want %s (the binary's `vault version`)", reported, want)
			}
			if c := apimeta.FindStatusCondition(vc.Status.Conditions, v1alpha1.UntestedVersionCondition); c != nil {
				return fmt.Errorf("UntestedVersion %s: %s", c.Reason, c.Message)
			}
			return nil
		})
		if state, _ := vault.TestingOf(want); state != vault.Tested {
			t.Errorf("Vault %s is not in pkg/vault/tested-versions.txt: the suite runs only tested lines", want)
		}
		if n := s.metric(fmt.Sprintf(`minionvault_vault_server_info{connection="compat",tested="release",version=%q}`, reported)); n != 1 {
			t.Errorf("server-info metric %v, want 1", n)
		}
	})

	held := map[string]ourMinion{}
	s.run("every minion is Ready and provably the operator's", func(t *testing.T) {
		for i := range fleet {
			name := fmt.Sprintf("cmp%d", i)
			b := s.waitReady(ns, name)
			m := s.provablyOurs(t, ns, name, "salt_minion_"+name)
			if b.Status.Entity == nil || b.Status.Entity.ID != m.entityID || b.Status.AppRole == nil || b.Status.AppRole.RoleID != m.roleID {
				t.Errorf("%s: status %+v %+v, Vault %+v", name, b.Status.Entity, b.Status.AppRole, m)
			}
			held[name] = m
		}
	})

	s.run("a restarted operator writes nothing and finds every object its own", func(t *testing.T) {
		audit := s.vaultAudit(t)
		operator := s.accessorOf(t, s.token)
		audit.settle(t)
		mark := audit.mark(t)
		s.restartOperator(t)
		for i := range fleet {
			s.requestReconcile(ns, fmt.Sprintf("cmp%d", i))
		}
		for i := range fleet {
			name := fmt.Sprintf("cmp%d", i)
			eventually(t, 30*time.Second, name+" handled after the restart", func() error {
				if got := requestIn(t, s.c, ns, name); got == "" {
					return fmt.Errorf("request not handled yet")
				}
				return nil
			})
			m := s.provablyOurs(t, ns, name, "salt_minion_"+name)
			if was := held[name]; m != was {
				t.Errorf("%s: Vault holds %+v after the restart, %+v before", name, m, was)
			}
		}
		audit.settle(t)
		calls := audit.since(t, mark, operator)
		if calls.Writes != 0 {
			t.Errorf("the restarted operator wrote %d times: %v", calls.Writes, calls.Paths)
		}
		if calls.Denied != 0 {
			t.Errorf("Vault refused %d requests: %v", calls.Denied, calls.DeniedPaths)
		}
	})
}

// ourMinion is what proves a minion the operator's in Vault.
type ourMinion struct{ entityID, roleID string }

// provablyOurs checks what the operator alone writes: the entity's marker
// names the binding (its UID), the entity's one alias is the role's role
// ID, and a login with the role lands in that entity.
func (s *suite) provablyOurs(t *testing.T, ns, name, entity string) ourMinion {
	t.Helper()
	e := s.vaultRead("identity/entity/name/" + entity)
	if e == nil {
		t.Fatalf("%s: no entity %s", name, entity)
	}
	raw := rawMetadataOf(e)
	b := s.binding(ns, name)
	if owner, ok := ownership.ParseMarker(raw[ownership.MarkerKey]); !ok || owner.Namespace != ns || owner.Name != name || b == nil || owner.UID != string(b.UID) {
		t.Errorf("%s: marker %q does not name the binding", name, raw[ownership.MarkerKey])
	}
	roleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/" + name + "/role-id")["role_id"])
	s.wantAliases(t, entity, roleID)
	id := fmt.Sprint(e["id"])
	if got := s.loginEntity(t, "salt-minions", name); got != id {
		t.Errorf("%s: a login got entity %s, want the operator's %s", name, got, id)
	}
	md := metadataOf(e)
	if md["roles"] != "db,web" || md["roles__0"] != "db" || md["roles__1"] != "web" || md["minion-id"] != name {
		t.Errorf("%s: metadata %v", name, md)
	}
	role := s.vaultRead("auth/salt-minions/role/" + name)
	if got := strs(role["token_policies"]); !slices.Equal(got, []string{"saltstack/" + name, "salt_role_web", "salt_role_db"}) {
		t.Errorf("%s: token_policies %q", name, got)
	}
	return ourMinion{entityID: id, roleID: roleID}
}

// serverVersion is what `vault version` of the binary the suite started
// says, as sys/seal-status reports it ("1.21.4").
func serverVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	// "Vault v1.21.4+minionvault-minimal ('…'), built …"
	f := strings.Fields(string(out))
	if len(f) < 2 {
		t.Fatalf("%s version: %q", bin, out)
	}
	v := strings.TrimPrefix(f[1], "v")
	if i := strings.IndexAny(v, "+-"); i >= 0 {
		v = v[:i]
	}
	return v
}
