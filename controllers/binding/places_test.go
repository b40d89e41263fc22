package binding

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/patch"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

func vaultConn(name, clusterID, namespace string) v1alpha1.VaultConnection {
	return v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.VaultConnectionSpec{Namespace: namespace}, Status: v1alpha1.VaultConnectionStatus{ClusterID: clusterID}}
}

// Which connections a stale placement is tried through, and, when none,
// whether its Vault is one no connection reports any more (forgotten) or
// its connection is gone (left, with a warning).
func TestRouteFor(t *testing.T) {
	place := ownership.Placement{Vault: "old", Connection: "a", Mount: "salt-minions", Entity: "salt_minion_web01"}
	tests := []struct {
		name     string
		p        ownership.Placement
		conns    []v1alpha1.VaultConnection
		want     []string
		replaced bool // when want is empty
	}{
		{name: "its connection reports its Vault: first, then the others that do", p: place,
			conns: []v1alpha1.VaultConnection{vaultConn("b", "old", ""), vaultConn("a", "old", ""), vaultConn("c", "other", "")},
			want:  []string{"a", "b"}},
		{name: "its connection not checked yet: asked", p: place,
			conns: []v1alpha1.VaultConnection{vaultConn("a", "", ""), vaultConn("b", "", "")},
			want:  []string{"a"}},
		{name: "Vault reset: its connection reports the new one, so does the other (its token dead)", p: place,
			conns:    []v1alpha1.VaultConnection{vaultConn("a", "new", ""), vaultConn("b", "new", "")},
			replaced: true},
		{name: "its connection reports another Vault, another still reports its Vault (unreachable since): waited on through it", p: place,
			conns: []v1alpha1.VaultConnection{vaultConn("a", "new", ""), vaultConn("b", "old", "")},
			want:  []string{"b"}},
		{name: "another Vault namespace of the same cluster is not its Vault", p: place,
			conns:    []v1alpha1.VaultConnection{vaultConn("a", "old", "tenant")},
			replaced: true},
		{name: "in a Vault namespace", p: ownership.Placement{Vault: "old/tenant", Connection: "a"},
			conns: []v1alpha1.VaultConnection{vaultConn("a", "old", "/tenant/")},
			want:  []string{"a"}},
		{name: "its connection deleted, none reports its Vault: gone, not replaced (connections to other Vaults say nothing of it)", p: place,
			conns: []v1alpha1.VaultConnection{vaultConn("c", "other", "")}},
		{name: "its connection deleted, another reports its Vault", p: place,
			conns: []v1alpha1.VaultConnection{vaultConn("b", "old", "")},
			want:  []string{"b"}},
		{name: "a record of the previous release: its connection", p: ownership.Placement{Connection: "a"},
			conns: nil, want: []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := routeFor(tc.p, tc.conns)
			if !slices.Equal(rt.candidates, tc.want) {
				t.Fatalf("candidates %v, want %v", rt.candidates, tc.want)
			}
			if len(tc.want) > 0 {
				return
			}
			if g := rt.gone(tc.p); g.replaced != tc.replaced || !strings.Contains(g.Error(), "Vault "+tc.p.Vault) {
				t.Errorf("gone %+v, want replaced %v", g, tc.replaced)
			}
		})
	}
}

// Issue 48: a stale place in the Vault a reset took away, recorded through
// either of two connections to that Vault, the second one's token dead
// since. When the dead connection reports the new Vault (its check reads
// the cluster ID without a token), the place is forgotten with an event
// and the binding is Ready; while it still reports the old one (Vault
// unreachable, or the same Vault with a refused token), the place is waited
// on, never forgotten: it may hold a role that logs in.
func TestAStalePlaceInAResetVault(t *testing.T) {
	const oldVault = "vault-cluster-0"
	for _, recorded := range []string{"vault", "vault-b"} {
		for _, reports := range []string{testVaultID, oldVault} {
			forget := reports == testVaultID
			t.Run("written through "+recorded+", vault-b reports "+reports, func(t *testing.T) {
				objs := fixtures(map[string]any{"roles": []string{"web"}})
				objs = append(objs, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault-b"}, Status: v1alpha1.VaultConnectionStatus{ClusterID: reports}})
				h := newHarness(t, objs...)
				ctx := context.Background()
				h.reconcile("salt", "web01")
				// vault-b's token is dead: its check failed.
				if err := h.r.Connections.Probe(ctx, "vault-b", func(vault.Client) error { return errRevoked }); err == nil {
					t.Fatal("the check passed")
				}
				// The same names, in the Vault that was.
				stale := ownership.Placement{Vault: oldVault, Connection: recorded, Mount: "salt-minions", Entity: "salt_minion_web01", DeletionPolicy: "Delete"}
				b := h.get("salt", "web01")
				inv, err := ownership.Decode(b.Annotations[v1alpha1.VaultObjectsAnnotation])
				if err != nil || len(inv) != 1 {
					t.Fatalf("record %+v: %v", inv, err)
				}
				if err := patch.Metadata(ctx, h.c, b, func() bool { setInventory(b, append(inv, stale)); return true }); err != nil {
					t.Fatal(err)
				}
				h.events()
				h.v.ResetCalls()
				h.reconcile("salt", "web01")

				b = h.get("salt", "web01")
				after, _ := ownership.Decode(b.Annotations[v1alpha1.VaultObjectsAnnotation])
				ready, ev := outcome.ReadyOf(b), h.events()
				if h.v.Calls("delete") != 0 {
					t.Errorf("%d deletions in Vault", h.v.Calls("delete"))
				}
				if !forget {
					if ready.Status == metav1.ConditionTrue || !strings.Contains(ready.Message, `VaultConnection "vault-b" cannot be used`) {
						t.Errorf("Ready %+v, want waiting on vault-b", ready)
					}
					if !slices.ContainsFunc(after, stale.Same) {
						t.Errorf("record %+v forgot the place in a Vault vault-b still reports", after)
					}
					if strings.Contains(ev, "Forgotten") {
						t.Errorf("events %q", ev)
					}
					return
				}
				if ready.Status != metav1.ConditionTrue {
					t.Errorf("Ready %+v", ready)
				}
				if len(after) != 1 || after[0].Vault != testVaultID {
					t.Errorf("record %+v, want the current place only", after)
				}
				if !strings.Contains(ev, "Normal Forgotten") || !strings.Contains(ev, "in Vault "+oldVault+" forgotten, not deleted") ||
					!strings.Contains(ev, "no VaultConnection reports Vault "+oldVault) {
					t.Errorf("events %q, want Forgotten naming the place and why", ev)
				}
			})
		}
	}
}
