//go:build integration

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	vaultpolicy "github.com/minionvault/minion-vault-operator/config/vault"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// TestOwnership: every Vault object the operator writes stays
// owned through partial failures, switches, objects re-created by hand and
// Vault losing its state. The operator runs with the shipped policy; writes
// are counted from Vault's audit log.
func TestOwnership(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)

	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "own"}}))
	s.must(s.c.Create(ctx, tokenConnection("own-vault", s.env.Vault.Addr, "vault-token")))
	// A second AppRole mount, for switches between mounts.
	s.enableMount(t, "salt-minions-b")
	s.must(s.root.Sys().PutPolicyWithContext(ctx, "minionvault-operator",
		strings.ReplaceAll(operatorPolicy(t), "auth/salt-minions/", "auth/+/")))
	ownTemplate := func(name, mount, entity string) *v1alpha1.MinionTemplate {
		tpl := connTemplate(name, "own-vault")
		tpl.Spec.NamespaceSelector = nil
		tpl.Spec.AppRole = &v1alpha1.MinionAppRoleSpec{Mount: mount}
		tpl.Spec.EntityName = entity
		return tpl
	}
	s.must(s.c.Create(ctx, ownTemplate("own-a", "salt-minions", "salt_minion_{minion}")))
	s.must(s.c.Create(ctx, ownTemplate("own-b", "salt-minions-b", "minion_b_{minion}")))
	ownBinding := func(ns, name, minion, tpl string, roles ...string) *v1alpha1.MinionBinding {
		b := binding(ns, name, minion, map[string]any{"roles": roles})
		b.Spec.TemplateRef.Name = tpl
		return b
	}

	s.run("1: a role deleted by hand is re-created and re-aliased to the same entity", func(t *testing.T) {
		s.must(s.c.Create(ctx, ownBinding("own", "re1", "re1", "own-a", "web")))
		b := s.waitReady("own", "re1")
		entityID, oldRoleID := b.Status.Entity.ID, b.Status.AppRole.RoleID

		// By hand: the role is deleted; the operator re-creates it (a new
		// role ID) and renames the entity's alias, not a second alias.
		_, err := s.root.Logical().DeleteWithContext(ctx, "auth/salt-minions/role/re1")
		s.must(err)
		s.requestReconcile("own", "re1")
		b = s.waitReady("own", "re1")
		newRoleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/re1/role-id")["role_id"])
		if newRoleID == oldRoleID || b.Status.AppRole.RoleID != newRoleID || b.Status.Entity.ID != entityID {
			t.Errorf("role ID %s -> %s, status %+v %+v", oldRoleID, newRoleID, b.Status.AppRole, b.Status.Entity)
		}
		s.wantAliases(t, "salt_minion_re1", newRoleID)
		if got := s.loginEntity(t, "salt-minions", "re1"); got != entityID {
			t.Errorf("a fresh login got entity %s, want the operator's %s", got, entityID)
		}

		// Harder: deleted and re-created by someone else, and a minion logs
		// in before the operator looks: Vault gives that login an entity of
		// its own with an alias named by the new role ID. The operator moves
		// that alias to the minion's entity; it is never Stalled.
		_, err = s.root.Logical().DeleteWithContext(ctx, "auth/salt-minions/role/re1")
		s.must(err)
		_, err = s.root.Logical().WriteWithContext(ctx, "auth/salt-minions/role/re1", map[string]any{"token_policies": []string{"default"}})
		s.must(err)
		stranger := s.loginEntity(t, "salt-minions", "re1")
		if stranger == entityID {
			t.Fatalf("the login before the repair already got the minion's entity")
		}
		s.requestReconcile("own", "re1")
		b = s.waitReady("own", "re1")
		roleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/re1/role-id")["role_id"])
		s.wantAliases(t, "salt_minion_re1", roleID)
		if got := s.loginEntity(t, "salt-minions", "re1"); got != entityID {
			t.Errorf("a fresh login got entity %s, want the operator's %s", got, entityID)
		}
		if md := metadataOf(s.vaultRead("identity/entity/id/" + entityID)); md["roles__0"] != "web" {
			t.Errorf("metadata %v", md)
		}
		s.noEvent(t, "re1", v1alpha1.ValidationFailedReason)
	})

	s.run("2: a templateRef switch leaves no old role or entity", func(t *testing.T) {
		s.must(s.c.Create(ctx, ownBinding("own", "sw1", "sw1", "own-a", "web")))
		s.waitReady("own", "sw1")
		oldRoleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/sw1/role-id")["role_id"])
		oldSecret := s.secretID(t, "salt-minions", "sw1")

		s.must(s.patchBinding("own", "sw1", func(b *v1alpha1.MinionBinding) { b.Spec.TemplateRef.Name = "own-b" }))
		b := s.waitReady("own", "sw1")
		if s.vaultRead("auth/salt-minions/role/sw1") != nil || s.vaultRead("identity/entity/name/salt_minion_sw1") != nil {
			t.Error("the old role or entity is still in Vault")
		}
		if _, err := s.anon(t).Logical().WriteWithContext(ctx, "auth/salt-minions/login", map[string]any{"role_id": oldRoleID, "secret_id": oldSecret}); err == nil {
			t.Error("a secret ID of the old role still logs in")
		}
		newRoleID := fmt.Sprint(s.vaultRead("auth/salt-minions-b/role/sw1/role-id")["role_id"])
		s.wantAliases(t, "minion_b_sw1", newRoleID)
		if got := s.loginEntity(t, "salt-minions-b", "sw1"); got != b.Status.Entity.ID {
			t.Errorf("login on the new mount got entity %s, want %s", got, b.Status.Entity.ID)
		}
		if got := b.Annotations[v1alpha1.VaultObjectsAnnotation]; got != `[{"vault":"`+s.vaultKey(t, "own-vault")+`","connection":"own-vault","mount":"salt-minions-b","entity":"minion_b_sw1","deletionPolicy":"Delete"}]` {
			t.Errorf("record after the switch %s", got)
		}
		s.event("sw1", "Removed")

		// A template's entityName changes: the old entity goes, the role
		// and its alias move to the new one.
		s.must(s.patchTemplate("own-b", func(tpl *v1alpha1.MinionTemplate) { tpl.Spec.EntityName = "minion_b2_{minion}" }))
		eventually(t, 30*time.Second, "entity renamed", func() error {
			if s.vaultRead("identity/entity/name/minion_b_sw1") != nil {
				return fmt.Errorf("the old entity is still there")
			}
			if e := s.vaultRead("identity/entity/name/minion_b2_sw1"); e == nil || len(e["aliases"].([]any)) != 1 {
				return fmt.Errorf("new entity %v", e)
			}
			return nil
		})
		s.wantAliases(t, "minion_b2_sw1", newRoleID)
		// Its appRole.mount changes: the old role and its alias go.
		s.must(s.patchTemplate("own-b", func(tpl *v1alpha1.MinionTemplate) { tpl.Spec.AppRole.Mount = "salt-minions" }))
		eventually(t, 30*time.Second, "role moved", func() error {
			if s.vaultRead("auth/salt-minions-b/role/sw1") != nil {
				return fmt.Errorf("the old role is still there")
			}
			if s.vaultRead("auth/salt-minions/role/sw1") == nil {
				return fmt.Errorf("no new role")
			}
			return nil
		})
		s.wantAliases(t, "minion_b2_sw1", fmt.Sprint(s.vaultRead("auth/salt-minions/role/sw1/role-id")["role_id"]))
		s.must(s.patchTemplate("own-b", func(tpl *v1alpha1.MinionTemplate) {
			tpl.Spec.AppRole.Mount, tpl.Spec.EntityName = "salt-minions-b", "minion_b_{minion}"
		}))
	})

	s.run("3: a binding deleted after a half-failed apply leaves nothing in Vault", func(t *testing.T) {
		// A connection whose token may write roles but not entities: the
		// entity write is refused (403), and nothing is written after it
		// (the entity, with its owner marker, comes first: no role is ever
		// written that is not linked to a marked entity).
		policy := operatorPolicy(t) + `
path "identity/entity/name/+" {
  capabilities = ["read", "delete"]
}
`
		policy = strings.Replace(policy, `path "identity/entity/name/+" {`, `path "identity/entity/name/nope" {`, 1)
		s.must(s.root.Sys().PutPolicyWithContext(ctx, "half-role", policy))
		tok, err := s.env.Vault.TokenWithPolicy(ctx, "half-role", "")
		s.must(err)
		s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "half-token", Namespace: operatorNamespace}, StringData: map[string]string{"token": tok}}))
		s.must(s.c.Create(ctx, tokenConnection("half-vault", s.env.Vault.Addr, "half-token")))
		half := ownTemplate("own-half", "salt-minions", "salt_minion_{minion}")
		half.Spec.ConnectionRef.Name = "half-vault"
		s.must(s.c.Create(ctx, half))
		s.must(s.c.Create(ctx, ownBinding("own", "half1", "half1", "own-half", "web")))
		s.waitReason("own", "half1", v1alpha1.AccessDeniedReason)
		if s.vaultRead("auth/salt-minions/role/half1") != nil {
			t.Fatal("the role was written although its entity could not be")
		}
		s.must(s.c.Delete(ctx, s.binding("own", "half1")))
		s.waitGone("own", "half1")
		if s.vaultRead("auth/salt-minions/role/half1") != nil {
			t.Error("a working AppRole was left behind")
		}

		// The entity written, the alias refused (so no role): deletion
		// removes the entity.
		policy = strings.Replace(operatorPolicy(t), `path "identity/entity-alias" {`, `path "identity/entity-alias/nope" {`, 1)
		s.must(s.root.Sys().PutPolicyWithContext(ctx, "half-role", policy))
		s.must(s.c.Create(ctx, ownBinding("own", "half2", "half2", "own-half", "web")))
		s.waitReason("own", "half2", v1alpha1.AccessDeniedReason)
		if s.vaultRead("identity/entity/name/salt_minion_half2") == nil || s.vaultRead("auth/salt-minions/role/half2") != nil {
			t.Fatal("want the entity written and no role before the alias write failed")
		}
		s.must(s.c.Delete(ctx, s.binding("own", "half2")))
		s.waitGone("own", "half2")
		if s.vaultRead("auth/salt-minions/role/half2") != nil || s.vaultRead("identity/entity/name/salt_minion_half2") != nil {
			t.Error("the role or the entity was left behind")
		}
	})

	s.run("4: /32 CIDRs cause no writes over 10 resyncs", func(t *testing.T) {
		cidr := ownTemplate("own-cidr", "salt-minions", "salt_minion_{minion}")
		ttl := intstr.FromString("1h")
		cidr.Spec.AppRole.TokenBoundCIDRs = []string{"127.0.0.1/32", "10.0.0.0/8", "::1/128"}
		cidr.Spec.AppRole.SecretIDBoundCIDRs = []string{"127.0.0.1/32"}
		cidr.Spec.AppRole.TokenTTL = &ttl
		s.must(s.c.Create(ctx, cidr))
		s.must(s.c.Create(ctx, ownBinding("own", "cidr1", "cidr1", "own-cidr", "web")))
		s.waitReady("own", "cidr1")
		mark, before := audit.mark(t), s.writes.writes.Load()
		for range 10 {
			s.requestReconcile("own", "cidr1")
		}
		got := audit.since(t, mark, operator)
		if got.Writes != 0 || s.writes.writes.Load() != before {
			t.Errorf("10 resyncs wrote %d times (audit log: %v)", s.writes.writes.Load()-before, got.Paths)
		}
		if got.Reads == 0 {
			t.Error("no reads in the audit log: the count proves nothing")
		}
		s.noEvent(t, "cidr1", "DriftCorrected")
		t.Logf("10 resyncs of a binding with /32 and /128 CIDRs: %d Vault reads, %d writes (audit log)", got.Reads, got.Writes)
	})

	s.run("5: intervals that would flood Vault are refused", func(t *testing.T) {
		fast := ownTemplate("own-fast", "salt-minions", "salt_minion_{minion}")
		fast.Spec.Interval = &metav1.Duration{Duration: 100 * time.Millisecond}
		if err := s.c.Create(ctx, fast); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "interval must be at least 1m") {
			t.Errorf("interval 100ms: %v", err)
		}
		conn := tokenConnection("own-fast", s.env.Vault.Addr, "vault-token")
		conn.Spec.CheckInterval = &metav1.Duration{Duration: time.Second}
		if err := s.c.Create(ctx, conn); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "checkInterval must be at least 5s") {
			t.Errorf("checkInterval 1s: %v", err)
		}
	})

	s.run("handover: 100 consecutive handovers of one minion ID end consistent", func(t *testing.T) {
		for _, ns := range []string{"hand-a", "hand-b"} {
			s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		}
		holder := ownBinding("hand-a", "h", "handover", "own-a", "a")
		s.must(s.c.Create(ctx, holder))
		s.waitReady("hand-a", "h")
		const handovers = 100
		start := time.Now()
		for i := range handovers {
			from, to, role := "hand-a", "hand-b", "b"
			if i%2 == 1 {
				from, to, role = "hand-b", "hand-a", "a"
			}
			s.must(s.c.Create(ctx, ownBinding(to, "h", "handover", "own-a", role)))
			s.must(s.c.Delete(ctx, s.binding(from, "h")))
			b := s.waitReady(to, "h")
			s.waitGone(from, "h")
			// Vault holds exactly the new holder's minion.
			roleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/handover/role-id")["role_id"])
			e := s.vaultRead("identity/entity/name/salt_minion_handover")
			if e == nil {
				t.Fatalf("handover %d: no entity", i)
			}
			aliases := e["aliases"].([]any)
			if len(aliases) != 1 || aliases[0].(map[string]any)["name"] != roleID || metadataOf(e)["roles"] != role ||
				b.Status.AppRole.RoleID != roleID || b.Status.Entity.ID != e["id"] {
				t.Fatalf("handover %d: role ID %s, entity %v, status %+v %+v", i, roleID, e, b.Status.AppRole, b.Status.Entity)
			}
		}
		t.Logf("%d handovers in %s", handovers, time.Since(start).Round(time.Millisecond))
	})
}

// vaultKey is the Vault a connection reaches, as the binding's record names it.
func (s *suite) vaultKey(t *testing.T, conn string) string {
	t.Helper()
	vc := &v1alpha1.VaultConnection{}
	s.must(s.c.Get(context.Background(), types.NamespacedName{Name: conn}, vc))
	return ownership.VaultKey(vc.Status.ClusterID, vc.Spec.Namespace)
}

// operatorPolicy is the shipped policy (config/vault/operator-policy.hcl).
func operatorPolicy(t testing.TB) string {
	t.Helper()
	if !strings.Contains(vaultpolicy.OperatorPolicy, `path "identity/entity/name/+" {`) || !strings.Contains(vaultpolicy.OperatorPolicy, `path "identity/entity-alias" {`) {
		t.Fatal("the shipped policy changed: adapt the test's edits of it")
	}
	return vaultpolicy.OperatorPolicy
}

// wantAliases: the entity has exactly one alias, named name.
func (s *suite) wantAliases(t *testing.T, entity string, names ...string) {
	t.Helper()
	e := s.vaultRead("identity/entity/name/" + entity)
	if e == nil {
		t.Fatalf("entity %s does not exist", entity)
	}
	var got []string
	for _, a := range e["aliases"].([]any) {
		got = append(got, fmt.Sprint(a.(map[string]any)["name"]))
	}
	if !slices.Equal(got, names) {
		t.Errorf("entity %s has aliases %q, want %q", entity, got, names)
	}
}

// secretID issues a secret ID for a role (as the Salt master would).
func (s *suite) secretID(t *testing.T, mount, role string) string {
	t.Helper()
	sec, err := s.root.Logical().Write("auth/"+mount+"/role/"+role+"/secret-id", nil)
	s.must(err)
	return fmt.Sprint(sec.Data["secret_id"])
}

// loginEntity logs in as the minion would and returns the entity its token
// belongs to.
func (s *suite) loginEntity(t *testing.T, mount, role string) string {
	t.Helper()
	roleID := fmt.Sprint(s.vaultRead("auth/" + mount + "/role/" + role + "/role-id")["role_id"])
	sec, err := s.anon(t).Logical().Write("auth/"+mount+"/login", map[string]any{"role_id": roleID, "secret_id": s.secretID(t, mount, role)})
	s.must(err)
	if sec == nil || sec.Auth == nil {
		t.Fatal("login: no auth")
	}
	return sec.Auth.EntityID
}

// anon is a client without a token.
func (s *suite) anon(t *testing.T) *vaultapi.Client {
	t.Helper()
	c, err := s.root.Clone()
	s.must(err)
	c.ClearToken()
	return c
}

// patchTemplate changes a template's spec, again on a conflict: the
// operator patches the template's status meanwhile.
func (s *suite) patchTemplate(name string, f func(*v1alpha1.MinionTemplate)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tpl := &v1alpha1.MinionTemplate{}
		if err := s.c.Get(context.Background(), types.NamespacedName{Name: name}, tpl); err != nil {
			return err
		}
		f(tpl)
		return s.c.Update(context.Background(), tpl)
	})
}

// waitReason waits for Ready=False with the reason.
func (s *suite) waitReason(ns, name, reason string) *v1alpha1.MinionBinding {
	s.t.Helper()
	return waitReasonIn(s.t, s.c, ns, name, reason)
}

// waitReasonIn waits for a binding of the API server c to have the Ready
// reason.
func waitReasonIn(t *testing.T, c client.Client, ns, name, reason string) *v1alpha1.MinionBinding {
	t.Helper()
	var b *v1alpha1.MinionBinding
	eventually(t, 30*time.Second, "binding "+name+" "+reason, func() error {
		b = &v1alpha1.MinionBinding{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, b); err != nil {
			return err
		}
		if r := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); r == nil || r.Reason != reason {
			return fmt.Errorf("conditions %+v", b.Status.Conditions)
		}
		return nil
	})
	return b
}

func (s *suite) waitGone(ns, name string) {
	s.t.Helper()
	waitGoneIn(s.t, s.c, ns, name)
}

// waitGoneIn waits until a binding of the API server c is gone.
func waitGoneIn(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "binding "+name+" gone", func() error {
		b := &v1alpha1.MinionBinding{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, b); err != nil {
			return client.IgnoreNotFound(err)
		}
		return fmt.Errorf("still there: finalizers %v, conditions %+v", b.Finalizers, b.Status.Conditions)
	})
}

// noEvent fails when the object has an event with this reason.
func (s *suite) noEvent(t *testing.T, name, reason string) {
	t.Helper()
	list := &eventsv1.EventList{}
	s.must(s.c.List(context.Background(), list))
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			t.Errorf("event %s: %s", reason, e.Note)
		}
	}
}
