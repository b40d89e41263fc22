//go:build integration

package gitops

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

const (
	operatorNamespace = "minionvault-system"
	bindingNamespace  = "gitops"
	// holdFinalizer keeps a VaultConnection (which has no finalizer of the
	// operator's) in deletion, as another controller's finalizer would.
	holdFinalizer = "gitops.test.minionvault.dev/hold"
)

// harness drives objects and records what the tools say of them.
type harness struct {
	t     *testing.T
	ctx   context.Context
	c     client.Client
	judge *judge
	rows  []row
}

// create creates the object of a YAML manifest, as a GitOps tool applies it.
func (h *harness) create(manifest string) {
	h.t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		h.t.Fatalf("manifest: %v\n%s", err, manifest)
	}
	if err := h.c.Create(h.ctx, u); err != nil {
		h.t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// get reads an object back from the API server, as the tools see it.
func (h *harness) get(kind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("minionvault.dev/v1alpha1")
	u.SetKind(kind)
	err := h.c.Get(h.ctx, types.NamespacedName{Namespace: ns, Name: name}, u)
	return u, err
}

// waitFor polls the object until ok returns nil.
func (h *harness) waitFor(kind, ns, name, what string, ok func(*unstructured.Unstructured) error) *unstructured.Unstructured {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		u, err := h.get(kind, ns, name)
		if err == nil {
			if err = ok(u); err == nil {
				return u
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	h.t.Fatalf("%s %s: not %s after 30 s: %v", kind, name, what, last)
	return nil
}

func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// reconciled: the status describes the current generation.
func reconciled(u *unstructured.Unstructured) error {
	obs, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if obs != u.GetGeneration() {
		return fmt.Errorf("observedGeneration %d, generation %d", obs, u.GetGeneration())
	}
	return nil
}

func ready(u *unstructured.Unstructured) error {
	if err := reconciled(u); err != nil {
		return err
	}
	if c := condition(u, "Ready"); c == nil || c["status"] != "True" {
		return fmt.Errorf("conditions %s", conditionSummary(u))
	}
	return nil
}

// readyFalse: Ready=False with the reason, and also the given condition
// True (Stalled, Reconciling, or "" for neither).
func readyFalse(reason, also string) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		if err := reconciled(u); err != nil {
			return err
		}
		r := condition(u, "Ready")
		if r == nil || r["status"] != "False" || r["reason"] != reason {
			return fmt.Errorf("conditions %s", conditionSummary(u))
		}
		for _, typ := range []string{"Stalled", "Reconciling"} {
			c := condition(u, typ)
			if isTrue := c != nil && c["status"] == "True"; isTrue != (typ == also) {
				return fmt.Errorf("conditions %s", conditionSummary(u))
			}
		}
		return nil
	}
}

func deleting(next func(*unstructured.Unstructured) error) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		if u.GetDeletionTimestamp() == nil {
			return fmt.Errorf("no deletionTimestamp")
		}
		return next(u)
	}
}

// record evaluates the object with every tool and checks the documented
// expectation; inMessage, when set, must appear in the Argo CD script's
// message (the reason a user looks for).
func (h *harness) record(kind, state string, u *unstructured.Unstructured, inMessage string) {
	h.t.Helper()
	v, err := h.judge.verdict(u)
	if err != nil {
		h.t.Fatalf("%s %s: %v", kind, u.GetName(), err)
	}
	r := row{kind: kind, state: state, object: u.GetName(), conditions: conditionSummary(u), v: v,
		problems: expect(kind, state).mismatches(v)}
	if inMessage != "" && !strings.Contains(v.Lua.Message, inMessage) {
		r.problems = append(r.problems, fmt.Sprintf("Argo CD script message %q lacks %q", v.Lua.Message, inMessage))
	}
	h.rows = append(h.rows, r)
}

// TestHealthOfRealObjects drives a VaultConnection, a MinionTemplate and a
// MinionBinding through every state with the real operator, reads each
// back from the API server, and checks what kstatus, Flux's
// healthCheckExprs and the Argo CD scripts say of exactly that object.
func TestHealthOfRealObjects(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	j, err := newJudge()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, c: env.Client, judge: j}
	t.Cleanup(func() {
		t.Logf("what each tool said of the real objects:\n%s", table(h.rows))
	})

	for _, ns := range []string{operatorNamespace, bindingNamespace} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	tokens := map[string]string{}
	for _, name := range []string{"vault-token", "vault-token-doomed"} {
		tok, err := env.Vault.OperatorToken(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tok
		if err := env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: operatorNamespace},
			StringData: map[string]string{"token": tok},
		}); err != nil {
			t.Fatal(err)
		}
	}
	connection := func(name, secret, extra string) string {
		return fmt.Sprintf(`
apiVersion: minionvault.dev/v1alpha1
kind: VaultConnection
metadata:
  name: %s
%s
spec:
  address: %s
  auth:
    token:
      secretRef: {name: %s, namespace: %s, key: token}
`, name, extra, env.Vault.Addr, secret, operatorNamespace)
	}
	template := func(name, conn, extra string) string {
		return fmt.Sprintf(`
apiVersion: minionvault.dev/v1alpha1
kind: MinionTemplate
metadata:
  name: %s
spec:
  connectionRef: {name: %s}
  policies:
    assign: ['saltstack/{minion}', 'gitops_{minion}']
  allowedPolicies: ['saltstack/*', 'gitops_*']
%s
`, name, conn, extra)
	}
	binding := func(name, minion, tpl, extra string) string {
		return fmt.Sprintf(`
apiVersion: minionvault.dev/v1alpha1
kind: MinionBinding
metadata:
  name: %s
  namespace: %s
spec:
  minionID: %s
  templateRef: {name: %s}
  grains: {id: %s, os: Debian}
  pillar: {roles: [web]}
%s
`, name, bindingNamespace, minion, tpl, minion, extra)
	}

	// New: created while no operator runs, so nothing has touched them.
	h.create(connection("gitops", "vault-token", ""))
	h.create(template("gitops", "gitops", ""))
	h.create(binding("web", "gitops-web", "gitops", ""))
	for _, o := range []struct{ kind, ns, name string }{
		{kindConnection, "", "gitops"}, {kindTemplate, "", "gitops"}, {kindBinding, bindingNamespace, "web"},
	} {
		u, err := h.get(o.kind, o.ns, o.name)
		if err != nil {
			t.Fatal(err)
		}
		h.record(o.kind, stateNew, u, "")
	}

	stop := startOperator(t, env)

	// Ready: the same objects, once the operator has reconciled them.
	h.record(kindConnection, stateReady, h.waitFor(kindConnection, "", "gitops", "Ready", ready), "")
	h.record(kindTemplate, stateReady, h.waitFor(kindTemplate, "", "gitops", "Ready", ready), "")
	h.record(kindBinding, stateReady, h.waitFor(kindBinding, bindingNamespace, "web", "Ready", ready), "")

	// Waiting for something that may still come.
	h.create(connection("gitops-nosecret", "no-such-secret", ""))
	h.create(template("gitops-waiting", "gitops", `  parameters:
    root: vault
    configMapRefs: [{name: no-such-configmap, namespace: gitops}]`))
	h.create(binding("orphan", "gitops-orphan", "no-such-template", ""))
	h.record(kindConnection, stateWaiting, h.waitFor(kindConnection, "", "gitops-nosecret", "waiting",
		readyFalse("ConnectionNotReady", "Reconciling")), "ConnectionNotReady")
	h.record(kindTemplate, stateWaiting, h.waitFor(kindTemplate, "", "gitops-waiting", "waiting",
		readyFalse("RenderFailed", "Reconciling")), "RenderFailed")
	h.record(kindBinding, stateWaiting, h.waitFor(kindBinding, bindingNamespace, "orphan", "waiting",
		readyFalse("TemplateNotFound", "Reconciling")), "TemplateNotFound")

	// Stalled: nothing to do until the object changes. The operator has no
	// Stalled outcome for a VaultConnection (a refused login or an
	// unreachable Vault is retried), so there is no such row.
	// A rule path with a field its policy name lacks: one name, many bodies.
	h.create(template("gitops-bad", "gitops", `  policyDocuments:
    - name: gitops_shared
      rules:
        - path: 'secret/data/gitops/{minion}'
          capabilities: [read]`))
	// Named to sort after "web": the older claim keeps a minion ID, and
	// creation times have whole seconds (then namespace/name decides).
	h.create(binding("web-dup", "gitops-web", "gitops", ""))
	h.record(kindTemplate, stateStalled, h.waitFor(kindTemplate, "", "gitops-bad", "Stalled",
		readyFalse("RenderFailed", "Stalled")), "RenderFailed")
	h.record(kindBinding, stateStalled, h.waitFor(kindBinding, bindingNamespace, "web-dup", "Stalled",
		readyFalse("DuplicateMinionID", "Stalled")), "DuplicateMinionID")

	// Suspended (bindings only).
	h.create(binding("paused", "gitops-paused", "gitops", "  suspend: true"))
	h.record(kindBinding, stateSuspended, h.waitFor(kindBinding, bindingNamespace, "paused", "suspended",
		readyFalse("Suspended", "")), "Suspended")

	// Deleting: a binding and a template whose connection can no longer
	// log in (its token revoked) cannot delete their Vault objects, so
	// their finalizers stay; the connection is held by a finalizer of the
	// test's.
	h.create(connection("gitops-doomed", "vault-token-doomed", ""))
	h.create(template("gitops-doomed", "gitops-doomed", `  policyDocuments:
    - name: 'gitops_{minion}'
      rules:
        - path: 'secret/data/gitops/{minion}'
          capabilities: [read]`))
	h.create(binding("doomed", "gitops-doomed", "gitops-doomed", ""))
	h.create(connection("gitops-held", "vault-token", "  finalizers: ["+holdFinalizer+"]"))
	h.waitFor(kindBinding, bindingNamespace, "doomed", "Ready", ready)
	h.waitFor(kindTemplate, "", "gitops-doomed", "Ready with its ACL policy", func(u *unstructured.Unstructured) error {
		if err := ready(u); err != nil {
			return err
		}
		// status.policies.count (status.managedPolicies before v1alpha1
		// counted instead of listing them).
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "policies", "count")
		names, _, _ := unstructured.NestedStringSlice(u.Object, "status", "managedPolicies")
		if n == 0 && len(names) == 0 {
			return fmt.Errorf("no ACL policy written yet: %v", u.Object["status"])
		}
		return nil
	})
	h.waitFor(kindConnection, "", "gitops-held", "Ready", ready)
	if err := env.Vault.Client.Auth().Token().RevokeTreeWithContext(ctx, tokens["vault-token-doomed"]); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct{ kind, ns, name string }{
		{kindBinding, bindingNamespace, "doomed"}, {kindTemplate, "", "gitops-doomed"}, {kindConnection, "", "gitops-held"},
	} {
		u, err := h.get(o.kind, o.ns, o.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.c.Delete(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { h.dropFinalizers() })
	h.record(kindBinding, stateDeleting, h.waitFor(kindBinding, bindingNamespace, "doomed", "blocked in deletion",
		deleting(readyFalse("DeletionBlocked", "Reconciling"))), "DeletionBlocked")
	h.record(kindTemplate, stateDeleting, h.waitFor(kindTemplate, "", "gitops-doomed", "blocked in deletion",
		deleting(readyFalse("DeletionBlocked", "Reconciling"))), "DeletionBlocked")
	h.record(kindConnection, stateDeleting, h.waitFor(kindConnection, "", "gitops-held", "in deletion",
		deleting(ready)), "being deleted")

	// Stale: the spec changed while no operator runs, so the status
	// (Ready=True) is of the previous generation.
	stop()
	for _, o := range []struct{ kind, ns, name, patch string }{
		{kindConnection, "", "gitops", `{"spec":{"timeout":"20s"}}`},
		{kindTemplate, "", "gitops", `{"spec":{"interval":"2h"}}`},
		{kindBinding, bindingNamespace, "web", `{"spec":{"pillar":{"roles":["web","db"]}}}`},
	} {
		u, err := h.get(o.kind, o.ns, o.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(o.patch))); err != nil {
			t.Fatal(err)
		}
		u, err = h.get(o.kind, o.ns, o.name)
		if err != nil {
			t.Fatal(err)
		}
		if reconciled(u) == nil {
			t.Fatalf("%s %s: the patch did not change the generation (%d)", o.kind, o.name, u.GetGeneration())
		}
		h.record(o.kind, stateStale, u, "not reconciled yet")
	}

	for _, r := range h.rows {
		for _, p := range r.problems {
			t.Errorf("%s %s (%s): %s", r.kind, r.state, r.conditions, p)
		}
	}
}

// dropFinalizers lets the objects left in deletion go, once the test no
// longer needs them.
func (h *harness) dropFinalizers() {
	for _, o := range []struct{ kind, ns, name string }{
		{kindBinding, bindingNamespace, "doomed"}, {kindTemplate, "", "gitops-doomed"}, {kindConnection, "", "gitops-held"},
	} {
		u, err := h.get(o.kind, o.ns, o.name)
		if err != nil {
			continue
		}
		_ = h.c.Patch(h.ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	}
}
