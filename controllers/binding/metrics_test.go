package binding

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The bindings gauge follows the binding's Ready condition through its
// reconciles, and forgets it when it is gone.
func TestBindingsGaugeFollowsReconciles(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	reg := prometheus.NewRegistry()
	h.r.Metrics = metrics.New(reg)
	want := func(exposition string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP minionvault_bindings MinionBindings by namespace, template, and their Ready condition's status and reason, as this process last reconciled them.
# TYPE minionvault_bindings gauge
`+exposition), "minionvault_bindings"); err != nil {
			t.Fatal(err)
		}
	}
	tpl := h.get("salt", "web01").Spec.TemplateRef.Name
	h.reconcile("salt", "web01")
	want(`minionvault_bindings{namespace="salt",ready="true",reason="Succeeded",template="` + tpl + `"} 1
`)

	h.v.FailNext("ReadRole", &vault.Error{Op: "read auth/salt-minions/role/web01", StatusCode: 503})
	if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "salt", Name: "web01"}}); err == nil {
		t.Fatal("a 503 should be returned for backoff")
	}
	want(`minionvault_bindings{namespace="salt",ready="false",reason="` + v1alpha1.VaultUnavailableReason + `",template="` + tpl + `"} 1
`)

	b := h.get("salt", "web01")
	if err := h.c.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "web01") // finalize: the finalizer goes, and the object
	h.reconcile("salt", "web01") // not found
	if n, err := testutil.GatherAndCount(reg, "minionvault_bindings"); err != nil || n != 0 {
		t.Fatalf("%d series after the binding was deleted (%v), want none", n, err)
	}
}
