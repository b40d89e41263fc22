//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// TestAPlaceInAResetVaultIsForgotten (issue 48): two VaultConnections to
// one Vault, which is reset (a dev server restarted: its state lost). The
// first connection's token is re-created, the second one's is dead for
// good, and its status goes on naming a Vault that no longer exists. The
// bindings' places in the old Vault are forgotten, with an event, and not
// waited on through the dead connection: one binding of the first
// connection that a change made write again, and one moved from the dead
// connection's template to the first's, are Ready within seconds of their
// change, their objects in the new Vault left alone.
func TestAPlaceInAResetVaultIsForgotten(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	v := startOwnVault(t, s)
	const ns, connA, connB = "deadvault", "deadvault-a", "deadvault-b"
	tokB, err := v.root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{"minionvault-operator"}, TTL: "1h", NoDefaultPolicy: true})
	s.must(err)
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "conn"}}}))
	for conn, tok := range map[string]string{connA: v.operatorToken, connB: tokB.Auth.ClientToken} {
		s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: conn, Namespace: operatorNamespace},
			StringData: map[string]string{"token": tok}}))
		c := tokenConnection(conn, v.addr, conn)
		c.Spec.CheckInterval = &metav1.Duration{Duration: 5 * time.Second}
		s.must(s.c.Create(ctx, c))
		s.must(s.c.Create(ctx, connTemplate(conn, conn)))
	}
	// dv01 writes through the first connection, dv02 through the second.
	for minion, tpl := range map[string]string{"dv01": connA, "dv02": connB} {
		b := binding(ns, minion, minion, map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = tpl
		s.must(s.c.Create(ctx, b))
	}
	s.waitReady(ns, "dv01")
	s.waitReady(ns, "dv02")
	// A binding may be Ready before its connection's first check wrote
	// the Vault it found into status.
	s.waitConnectionReady(connA)
	s.waitConnectionReady(connB)
	oldVault := s.vaultKey(t, connA)
	if k := s.vaultKey(t, connB); k != oldVault {
		t.Fatalf("the two connections report Vaults %s and %s, want one", oldVault, k)
	}

	v.restart(t)
	var newVault string
	eventually(t, 60*time.Second, "the first connection Ready in the new Vault, the second one refused", func() error {
		if newVault = s.vaultKey(t, connA); newVault == oldVault || !s.connReady(connA) {
			return fmt.Errorf("%s: Vault %s, Ready %v", connA, newVault, s.connReady(connA))
		}
		if s.connReady(connB) {
			return fmt.Errorf("%s still Ready", connB)
		}
		return nil
	})
	// The first connection's change of identity rewrote dv01 in the new
	// Vault; its place in the old one is stale.
	eventually(t, 60*time.Second, "dv01 written in the new Vault", func() error {
		if r, err := v.root.Logical().Read("auth/salt-minions/role/dv01"); err != nil || r == nil {
			return fmt.Errorf("role dv01: %v", err)
		}
		return nil
	})

	// A change of each: dv01's pillar, dv02 to the first connection's
	// template. Each is Ready for what it renders now within seconds.
	s.must(s.patchBinding(ns, "dv01", func(b *v1alpha1.MinionBinding) {
		b.Spec.Pillar = doc(map[string]any{"roles": []string{"db"}})
	}))
	s.must(s.patchBinding(ns, "dv02", func(b *v1alpha1.MinionBinding) { b.Spec.TemplateRef.Name = connA }))
	changed := time.Now()
	for _, name := range []string{"dv01", "dv02"} {
		eventually(t, 15*time.Second, name+" Ready after its change", func() error {
			if b := s.binding(ns, name); !isReady(b) {
				return fmt.Errorf("conditions %+v", b.Status.Conditions)
			}
			return nil
		})
		t.Logf("%s Ready %s after its change", name, time.Since(changed).Round(10*time.Millisecond))
		b := s.binding(ns, name)
		inv, err := ownership.Decode(b.Annotations[v1alpha1.VaultObjectsAnnotation])
		s.must(err)
		if len(inv) != 1 || inv[0].Vault != newVault || inv[0].Connection != connA {
			t.Errorf("%s: record %+v, want its one place in Vault %s through %s", name, inv, newVault, connA)
		}
		// Forgetting the old place deleted nothing: the names are the
		// same in the new Vault.
		if r, err := v.root.Logical().Read("auth/salt-minions/role/" + name); err != nil || r == nil {
			t.Errorf("role %s in the new Vault: %v", name, err)
		}
		if e, err := v.root.Logical().Read("identity/entity/name/salt_minion_" + name); err != nil || e == nil {
			t.Errorf("entity salt_minion_%s in the new Vault: %v", name, err)
		}
		// client-go delivers events best-effort (see
		// TestVaultRestartWithLostState): the emission is the operator's.
		if !s.eventNamed(20*time.Second, name, "Forgotten", oldVault) {
			lines := operatorLines(func(l string) bool {
				return strings.Contains(l, `"reason": "Forgotten"`) && strings.Contains(l, `"name":"`+name+`"`) && strings.Contains(l, oldVault)
			})
			if len(lines) == 0 {
				t.Errorf("no event Forgotten naming Vault %s for %s, delivered or emitted", oldVault, name)
			} else {
				t.Logf("Forgotten for %s emitted (operator log), not delivered", name)
			}
		}
	}
}

// eventNamed waits up to timeout for an event of reason about the object
// name whose note says what.
func (s *suite) eventNamed(timeout time.Duration, name, reason, what string) bool {
	deadline := time.Now().Add(timeout)
	for {
		list := &eventsv1.EventList{}
		if err := s.c.List(context.Background(), list); err == nil {
			for _, e := range list.Items {
				if e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, what) {
					s.t.Logf("event %s %s: %s", e.Type, e.Reason, e.Note)
					return true
				}
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// connReady: the connection's last check passed.
func (s *suite) connReady(name string) bool {
	c := &v1alpha1.VaultConnection{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Name: name}, c); err != nil {
		return false
	}
	return apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ReadyCondition)
}
