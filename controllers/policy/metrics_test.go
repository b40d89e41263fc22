package policy

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
)

// A template whose policy Vault holds under no owner is not Ready, with
// its reason on the gauge and a policy failure counted; once the foreign
// policy is gone it is Ready, the old reason's series gone with it.
func TestTemplateMetricsFollowReconciles(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	tplObj := objs[2].(*v1alpha1.MinionTemplate)
	tplObj.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
		{Name: "salt_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}},
	}
	h := newHarness(t, objs...)
	ctx := context.Background()
	if err := h.v.WritePolicy(ctx, "salt_role_web", "path \"secret/*\" {\n  capabilities = [\"read\"]\n}\n"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster, Metrics: m}
	name := tplObj.Name
	reconcile := func(ns, n string) {
		t.Helper()
		var err error
		if ns == "" {
			_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: n}})
		} else {
			_, err = policyDeltaReconciler{r}.Reconcile(ctx, bindingKey{Namespace: ns, Name: n})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	h.reconcile("salt", "web01")
	reconcile("", name)
	reconcile("salt", "web01")
	reconcile("", name)
	tpl := &v1alpha1.MinionTemplate{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: name}, tpl); err != nil {
		t.Fatal(err)
	}
	reason := outcome.ReadyOf(tpl).Reason
	if reason != v1alpha1.PolicyNotOwnedReason {
		t.Fatalf("template Ready reason %s, want PolicyNotOwned", reason)
	}
	if got := readyGauge(t, reg); len(got) != 1 || got[v1alpha1.PolicyNotOwnedReason] != "0" {
		t.Fatalf("template ready series %v, want PolicyNotOwned 0 only", got)
	}
	if n := testutil.ToFloat64(m.TemplateFailures(name, v1alpha1.PolicyNotOwnedReason)); n < 1 {
		t.Fatalf("%v PolicyNotOwned failures counted, want at least 1", n)
	}

	// The foreign policy gone, a reconcile request compares every name
	// with Vault again: the template writes it and is Ready.
	if err := h.v.DeletePolicy(ctx, "salt_role_web"); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(tpl.DeepCopy())
	tpl.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: "1"}
	if err := h.c.Patch(ctx, tpl, patch); err != nil {
		t.Fatal(err)
	}
	reconcile("", name)
	if err := h.c.Get(ctx, types.NamespacedName{Name: name}, tpl); err != nil {
		t.Fatal(err)
	}
	if c := outcome.ReadyOf(tpl); c.Reason != v1alpha1.SucceededReason {
		t.Fatalf("after the foreign policy went: Ready %+v", c)
	}
	if got := readyGauge(t, reg); len(got) != 1 || got[v1alpha1.SucceededReason] != "1" {
		t.Fatalf("template ready series %v, want Succeeded 1 only", got)
	}

	// Deleted: no series left of it.
	if err := h.c.Delete(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	reconcile("", name) // finalize
	reconcile("", name) // not found
	if n, _ := testutil.GatherAndCount(reg, "minionvault_template_ready", "minionvault_template_policy_failures_total"); n != 0 {
		t.Fatalf("%d template series after its deletion, want none", n)
	}
}

// readyGauge is minionvault_template_ready's series: reason -> value.
func readyGauge(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != "minionvault_template_ready" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" {
					out[l.GetValue()] = strconv.FormatFloat(s.GetGauge().GetValue(), 'g', -1, 64)
				}
			}
		}
	}
	return out
}
