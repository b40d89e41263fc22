package policy

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A template's reconcile request is handled once its full compare began
// and nothing of it is left, or when the template is refused (Stalled);
// never by a pass that failed or left names to compare, write or delete.
func TestHandledRequest(t *testing.T) {
	unavailable := &vault.Error{Op: "read sys/policies/acl/p", StatusCode: 503}
	refused := &admission.Verdict{Kind: admission.Stalled, Reason: v1alpha1.ValidationFailedReason, Message: "invalid"}
	tests := []struct {
		name     string
		asked    string
		compared string
		pending  bool
		kind     outcome.OutcomeKind
		err      error
		want     string
	}{
		{"nothing asked", "", "", false, outcome.OutcomeReady, nil, ""},
		{"compared, nothing left", "r2", "r2", false, outcome.OutcomeReady, nil, "r2"},
		{"compared, a policy someone else's (reported, not overwritten)", "r2", "r2", false, outcome.OutcomeWaiting, nil, "r2"},
		{"compared, names in a conflict", "r2", "r2", false, outcome.OutcomeStalled, nil, "r2"},
		{"names left to compare, write or delete (another sync holds some)", "r2", "r2", true, outcome.OutcomeWaiting, nil, ""},
		{"its compare not begun (the last one was an earlier request's)", "r2", "r1", false, outcome.OutcomeReady, nil, ""},
		{"its compare not begun, nothing pending from earlier", "r2", "", false, outcome.OutcomeReady, nil, ""},
		{"the pass failed in Vault", "r2", "r2", false, outcome.OutcomeFailed, unavailable, ""},
		{"the pass failed before its compare began", "r2", "", false, outcome.OutcomeWaiting, outcome.Waiting(outcome.WaitingForConnection, "no connection"), ""},
		{"refused: only a change of the template clears it", "r2", "", false, outcome.OutcomeStalled, refused, "r2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := handledRequest(tc.asked, tc.compared, tc.pending, tc.kind, tc.err); got != tc.want {
				t.Errorf("handledRequest = %q, want %q", got, tc.want)
			}
		})
	}
}

// A request on a template reads every policy from Vault as it is now and
// repairs it before it is reported handled: not a body another template's
// discovery read before the edit, not a pass that failed, not a pass that
// left names to another sync.
func TestARequestIsHandledOnceEveryPolicyWasCompared(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	objs[2].(*v1alpha1.MinionTemplate).Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
		{Name: "minion_{minion}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}},
		{Name: "salt_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}},
	}
	h := newHarness(t, objs...)
	ctx := context.Background()
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}
	pass := func() error {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "t"}})
		return err
	}
	template := func() *v1alpha1.MinionTemplate {
		tpl := &v1alpha1.MinionTemplate{}
		if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl); err != nil {
			t.Fatal(err)
		}
		return tpl
	}
	request := func(v string) {
		t.Helper()
		tpl := template()
		patch := client.MergeFrom(tpl.DeepCopy())
		tpl.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: v}
		if err := h.c.Patch(ctx, tpl, patch); err != nil {
			t.Fatal(err)
		}
	}
	policies := func() map[string]string {
		out := map[string]string{}
		names, _ := h.v.ListPolicies(ctx)
		for _, n := range names {
			if n != "root" && n != "default" {
				out[n], _, _ = h.v.ReadPolicy(ctx, n)
			}
		}
		return out
	}
	h.reconcile("salt", "web01")
	if err := pass(); err != nil {
		t.Fatal(err)
	}
	rendered := policies()
	if len(rendered) != 2 {
		t.Fatalf("the set-up: %d policies written, want 2: %v", len(rendered), rendered)
	}
	// hand edits what the template rendered: one policy deleted, the
	// other's body replaced under its header.
	handEdit := func() {
		t.Helper()
		if err := h.v.DeletePolicy(ctx, "minion_web01"); err != nil {
			t.Fatal(err)
		}
		if err := h.v.WritePolicy(ctx, "salt_role_web", ownershipHeader("t")+"path \"secret/*\" {\n  capabilities = [\"read\"]\n}\n"); err != nil {
			t.Fatal(err)
		}
	}
	repaired := func(step string) {
		t.Helper()
		now := policies()
		for name, body := range rendered {
			if now[name] != body {
				t.Errorf("%s: policy %s is %q, want %q", step, name, now[name], body)
			}
		}
	}
	handled := func(step, want string) {
		t.Helper()
		if got := template().Status.LastHandledReconcileAt; got != want {
			t.Errorf("%s: lastHandledReconcileAt %q, want %q", step, got, want)
		}
	}

	// A new process: its first pass takes the policies as status says,
	// another template's discovery reads them (whose are they?) and keeps
	// their bodies for this one's sync; then the hand edits.
	r = &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}
	if err := pass(); err != nil {
		t.Fatal(err)
	}
	other := r.reader("t")
	for name := range rendered {
		if _, _, err := other.owner(ctx, h.v, name); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(other.v.bodies); n != len(rendered) {
		t.Fatalf("the set-up: the discovery kept %d bodies, want %d (the new process's first pass read none)", n, len(rendered))
	}
	handEdit()
	request("r1")
	if err := pass(); err != nil {
		t.Fatal(err)
	}
	handled("a request after a discovery read the policies", "r1")
	repaired("a request after a discovery read the policies")

	// The write fails: the request is not handled until a retry wrote it.
	handEdit()
	request("r2")
	h.v.FailNext("WritePolicy", &vault.Error{Op: "write sys/policies/acl", StatusCode: 503})
	if err := pass(); err == nil {
		t.Fatal("a pass whose write failed succeeded")
	}
	handled("a failed write", "r1")
	if err := pass(); err != nil {
		t.Fatal(err)
	}
	handled("the retry", "r2")
	repaired("the retry")

	// A delta holds the names when the pass comes: the compare began, and
	// is not over until that sync settles them.
	handEdit()
	request("r3")
	h.v.FailNext("ReadPolicy", errors.New("connection reset"))
	if err := pass(); err == nil {
		t.Fatal("a pass whose read failed succeeded")
	}
	held := r.index.claim("t")
	if len(held.desired) != 2 {
		t.Fatalf("the set-up: the delta holds %v, want both policies", held.desired)
	}
	if err := pass(); err != nil {
		t.Fatal(err)
	}
	handled("names held by a delta", "r2")
	r.index.settle("t", held, policyPass{}) // the delta failed: the names stay dirty
	if err := pass(); err != nil {
		t.Fatal(err)
	}
	handled("the delta let go", "r3")
	repaired("the delta let go")
}
