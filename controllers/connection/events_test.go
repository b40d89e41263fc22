package connection

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The connection tells its failures and its recovery, once each: its
// bindings wait on it without an event of their own, so this is the one
// event a revoked token or a sealed Vault makes.
func TestConnectionEvents(t *testing.T) {
	revoked := &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 403, Messages: []string{"permission denied"}}
	sealed := &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 503, Messages: []string{"Vault is sealed"}}
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: 1}, Spec: v1alpha1.VaultConnectionSpec{Address: "http://vault"}}
	h := newHarness(t, conn)
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.conns}
	checks := []struct {
		name string
		fail error
		want string // the event, "" for none
	}{
		{"first check passes", nil, ""},
		{"token revoked", revoked, "Warning AccessDenied "},
		{"still revoked", revoked, ""},
		{"Vault sealed", sealed, "Warning VaultUnavailable "},
		{"back", nil, "Normal Connected "},
		{"still well", nil, ""},
	}
	for _, c := range checks {
		if c.fail != nil {
			h.v.FailNext("CheckToken", c.fail)
		}
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := testkit.Drain(h.rec)
		switch {
		case c.want == "" && got != "":
			t.Errorf("%s: events %q, want none", c.name, got)
		case c.want != "" && (strings.Count(got, "\n") != 0 || !strings.HasPrefix(got, c.want)):
			t.Errorf("%s: events %q, want one %q", c.name, got, c.want)
		case strings.HasPrefix(c.want, "Warning") && !strings.Contains(got, "its bindings and templates wait on it"):
			t.Errorf("%s: event %q does not say the bindings wait", c.name, got)
		}
	}
}
