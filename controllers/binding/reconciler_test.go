package binding

import (
	"context"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/clusterfacts"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// These unit tests drive the binding reconciler against a fake API server
// client and vaulttest.Fake; test/e2e does the same against the real servers.

type harness struct {
	t   *testing.T
	c   client.Client
	v   *vaulttest.Fake
	rec *events.FakeRecorder
	r   *Reconciler
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	c := testkit.Builder().WithObjects(objs...).Build()
	v := vaulttest.NewFake()
	v.EnableAuth("salt-minions")
	rec := events.NewFakeRecorder(100)
	conns := &connection.Connections{Client: c, NewClient: func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return v, nil }}
	return &harness{t: t, c: c, v: v, rec: rec, r: &Reconciler{
		Client: c, Recorder: rec, Connections: conns, Templates: &clusterfacts.Templates{Client: c}, DefaultInterval: time.Hour,
		ClusterID: testCluster, SeesAllBindings: true,
	}}
}

func (h *harness) reconcile(ns, name string) ctrl.Result {
	h.t.Helper()
	return testkit.Reconcile(h.t, h.c, h.r, ns, name)
}

func (h *harness) get(ns, name string) *v1alpha1.MinionBinding {
	b := &v1alpha1.MinionBinding{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, b); err != nil {
		return nil
	}
	return b
}

func (h *harness) events() string { return testkit.Drain(h.rec) }

// The cluster and Vault of the unit tests.
const (
	testCluster = testkit.Cluster
	testVaultID = testkit.VaultID
)

func rawDoc(v any) *v1alpha1.Document { return testkit.RawDoc(v) }

func fixtures(pillar map[string]any) []client.Object { return testkit.Fixtures(pillar) }

func TestBindingAppliesThenIsIdempotent(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web", "db"}})...)
	ctx := context.Background()
	res := h.reconcile("salt", "web01")
	if res.RequeueAfter < 50*time.Minute || res.RequeueAfter > 70*time.Minute {
		t.Errorf("requeue after %s, want about the 1h interval", res.RequeueAfter)
	}
	b := h.get("salt", "web01")
	ready := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionTrue || len(b.Status.Conditions) != 1 {
		t.Fatalf("conditions %+v", b.Status.Conditions)
	}
	if len(b.Finalizers) != 1 {
		t.Fatalf("finalizers %v", b.Finalizers)
	}
	role, _ := h.v.ReadRole(ctx, "salt-minions", "web01")
	if got, _ := stringList(role["token_policies"]); strings.Join(got, ",") != "salt_role_web,salt_role_db" {
		t.Errorf("token_policies %v", got)
	}
	ent, _ := h.v.ReadEntityByName(ctx, "salt_minion_web01")
	if ent.Metadata["roles"] != "db,web" || ent.Metadata["roles__1"] != "web" || len(ent.Aliases) != 1 {
		t.Errorf("entity %+v", ent)
	}
	if b.Status.Entity.ID != ent.ID || b.Status.AppRole.RoleID == "" || b.Status.AppRole.RoleID != ent.Aliases[0].Name {
		t.Errorf("status %+v %+v", b.Status.Entity, b.Status.AppRole)
	}
	if ev := h.events(); ev != "" {
		t.Errorf("events for a first write (status tells it): %q", ev)
	}

	h.v.ResetCalls()
	h.reconcile("salt", "web01")
	if w := h.v.Writes(); w != 0 {
		t.Fatalf("%d writes on a resync in sync", w)
	}
	if ev := h.events(); ev != "" {
		t.Errorf("events on a quiet resync: %q", ev)
	}

	// Drift: someone rewrites the metadata and adds a key of their own.
	if _, err := h.v.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{"roles": "x", "owner": "ops"}); err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "web01")
	ent, _ = h.v.ReadEntityByName(ctx, "salt_minion_web01")
	if ent.Metadata["roles"] != "db,web" || ent.Metadata["owner"] != "ops" {
		t.Errorf("after drift %v", ent.Metadata)
	}
	if ev := h.events(); !strings.Contains(ev, "DriftCorrected") {
		t.Errorf("events %q", ev)
	}

	// Deletion removes role, alias and entity, then the finalizer.
	b = h.get("salt", "web01")
	if err := h.c.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	h.reconcile("salt", "web01")
	if h.get("salt", "web01") != nil {
		t.Fatal("binding still exists")
	}
	if r, _ := h.v.ReadRole(ctx, "salt-minions", "web01"); r != nil {
		t.Error("role remains")
	}
	if e, _ := h.v.ReadEntityByName(ctx, "salt_minion_web01"); e != nil {
		t.Error("entity remains")
	}
}

func TestBindingRefusedWritesNothing(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"*"}})...)
	res := h.reconcile("salt", "web01")
	if res.RequeueAfter != 0 {
		t.Errorf("a stalled binding requeued after %s", res.RequeueAfter)
	}
	b := h.get("salt", "web01")
	stalled := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.StalledCondition)
	if stalled == nil || stalled.Reason != v1alpha1.ValidationFailedReason || !strings.Contains(stalled.Message, "InvalidPolicyName") {
		t.Fatalf("conditions %+v", b.Status.Conditions)
	}
	if h.v.Writes() != 0 {
		t.Fatalf("%d writes for a refused binding", h.v.Writes())
	}
	if ev := h.events(); !strings.Contains(ev, "ValidationFailed") {
		t.Errorf("events %q", ev)
	}
	// The same failure again: no new event.
	h.reconcile("salt", "web01")
	if ev := h.events(); ev != "" {
		t.Errorf("repeated event %q", ev)
	}
}

func TestBindingVaultDownIsTransient(t *testing.T) {
	h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
	h.v.FailNext("WriteRole", &vault.Error{Op: "write auth/salt-minions/role/web01", StatusCode: 503})
	_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "salt", Name: "web01"}})
	if err == nil {
		t.Fatal("a 503 should be returned for backoff")
	}
	b := h.get("salt", "web01")
	ready := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	rec := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReconcilingCondition)
	if ready == nil || ready.Reason != v1alpha1.VaultUnavailableReason || rec == nil {
		t.Fatalf("conditions %+v", b.Status.Conditions)
	}
	h.reconcile("salt", "web01")
	if c := apimeta.FindStatusCondition(h.get("salt", "web01").Status.Conditions, v1alpha1.ReadyCondition); c.Status != metav1.ConditionTrue {
		t.Fatalf("did not converge: %+v", c)
	}
}
