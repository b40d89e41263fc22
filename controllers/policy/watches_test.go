package policy

import (
	"context"
	"slices"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
)

// Every watch of the template controller maps a changed Secret, ConfigMap, connection or
// template to exactly the objects that depend on it, through the field
// indexes, each once: a fix ends a RenderFailed or AccessDenied without a
// manual poke, and nothing else is woken.
func TestTemplateWatchMappings(t *testing.T) {
	c := testkit.WatchClient(t)
	tr := &Reconciler{Client: c}
	ctx := context.Background()
	conn := func(name string) client.Object {
		return &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	testkit.CheckWakes(t, []testkit.Wake{
		{Name: "templates of a connection", Got: tr.templatesOfConnection(ctx, conn("vault")), Want: []string{"also", "with"}},
		{Name: "templates of a ConfigMap", Got: tr.templatesOfConfigMap(ctx, testkit.MetadataOf("ConfigMap", "salt", "params")), Want: []string{"also", "with"}},
		{Name: "templates of another ConfigMap", Got: tr.templatesOfConfigMap(ctx, testkit.MetadataOf("ConfigMap", "salt", "token")), Want: nil},
	})
}

// The index keys themselves: each reference an object makes, once, and
// nothing for a record that cannot be read.
func TestFieldIndexKeys(t *testing.T) {
	keys := map[string]func(client.Object) []string{}
	for _, f := range watch.FieldIndexes {
		keys[f.Field] = f.Extract
	}
	objs := map[string]client.Object{}
	for _, o := range testkit.WatchFixtures() {
		objs[o.GetName()] = o
	}
	tests := []struct {
		index, object string
		want          []string
	}{
		{watch.TemplateConfigMapIndex, "also", []string{"salt/params"}},
		{watch.TemplateConfigMapIndex, "with", []string{"salt/more", "salt/params"}},
		{watch.TemplateConfigMapIndex, "without", nil},
		{watch.TemplateConnectionIndex, "with", []string{"vault"}},
		{watch.ConnectionSecretIndex, "vault", []string{"ops/ca", "ops/token"}},
		{watch.ConnectionSecretIndex, "other", []string{"ops/approle", "ops/ca"}},
		{watch.BindingConnectionIndex, "b1", nil},
		{watch.BindingConnectionIndex, "switching", []string{"vault"}},
		{watch.BindingConnectionIndex, "orphan-other", []string{"other"}},
		{watch.BindingConnectionIndex, "bad-record", nil},
		{watch.TemplateRefIndex, "orphan", []string{"gone"}},
		{watch.MinionIDIndex, "b1", []string{"b1"}},
		// The wrong kind is no key, not a panic.
		{watch.MinionIDIndex, "vault", nil},
		{watch.ConnectionSecretIndex, "b1", nil},
	}
	for _, tc := range tests {
		if got := keys[tc.index](objs[tc.object]); !slices.Equal(got, tc.want) {
			t.Errorf("%s of %s = %q, want %q", tc.index, tc.object, got, tc.want)
		}
	}
}

// A template whose own patterns are wrong (a rule path placeholder missing
// from the policy name) says so itself, Stalled, not Ready.
func TestTemplateWithOwnProblemsIsStalled(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	tpl := objs[2].(*v1alpha1.MinionTemplate)
	tpl.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{{Name: "fixed", Rules: []v1alpha1.PolicyRule{
		{Path: "salt/data/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
	h := newHarness(t, objs...)
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.MinionTemplate{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, got); err != nil {
		t.Fatal(err)
	}
	stalled := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.StalledCondition)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || !strings.Contains(stalled.Message, "used in the rule path but not in the name") {
		t.Fatalf("conditions %+v", got.Status.Conditions)
	}
	if h.v.Writes() != 0 {
		t.Errorf("%d Vault writes", h.v.Writes())
	}
}
