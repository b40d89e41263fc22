package binding

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
)

// Every watch of the binding controller maps a changed Secret, ConfigMap, connection or
// template to exactly the objects that depend on it, through the field
// indexes, each once: a fix ends a RenderFailed or AccessDenied without a
// manual poke, and nothing else is woken.
func TestBindingWatchMappings(t *testing.T) {
	c := testkit.WatchClient(t)
	br := &Reconciler{Client: c}
	ctx := context.Background()
	conn := func(name string) client.Object {
		return &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	testkit.CheckWakes(t, []testkit.Wake{
		{Name: "bindings of a ConfigMap two templates read", Got: br.bindingsOfConfigMap(ctx, testkit.MetadataOf("ConfigMap", "salt", "params")), Want: []string{"salt/b1", "salt/b3"}},
		{Name: "bindings of a ConfigMap one template reads", Got: br.bindingsOfConfigMap(ctx, testkit.MetadataOf("ConfigMap", "salt", "more")), Want: []string{"salt/b1"}},
		{Name: "bindings of a ConfigMap of that name elsewhere", Got: br.bindingsOfConfigMap(ctx, testkit.MetadataOf("ConfigMap", "other", "params")), Want: nil},
		{Name: "bindings of a token Secret", Got: br.bindingsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "token")), Want: []string{"salt/b1", "salt/b3", "salt/orphan", "salt/switching"}},
		{Name: "bindings of an AppRole Secret", Got: br.bindingsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "approle")), Want: []string{"salt/b2", "salt/orphan-other", "salt/switching"}},
		{Name: "bindings of a CA both connections read, each once", Got: br.bindingsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "ca")), Want: []string{"salt/b1", "salt/b2", "salt/b3", "salt/orphan", "salt/orphan-other", "salt/switching"}},
		{Name: "bindings of a Secret of that name elsewhere", Got: br.bindingsOfSecret(ctx, testkit.MetadataOf("Secret", "salt", "token")), Want: nil},
		{Name: "bindings of a connection: template, status and record", Got: br.bindingsOfConnection(ctx, conn("vault")), Want: []string{"salt/b1", "salt/b3", "salt/orphan", "salt/switching"}},
		{Name: "bindings of a connection nothing uses", Got: br.bindingsOfConnection(ctx, conn("unused")), Want: nil},
		{Name: "bindings of a template", Got: br.bindingsOfTemplate(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "without"}}), Want: []string{"salt/b2", "salt/switching"}},
	})
}

// A claim that changes wakes the other claimants of its minion ID (case
// aside, any namespace), not itself, not the claimants of another ID.
func TestOtherClaimantsWakes(t *testing.T) {
	claimant := func(ns, name, minionID string) *v1alpha1.MinionBinding {
		return &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.MinionBindingSpec{MinionID: minionID, TemplateRef: v1alpha1.MinionTemplateReference{Name: "t"}}}
	}
	a, b, c, d := claimant("salt", "a", "WEB01"), claimant("salt", "b", "web01"), claimant("other", "c", "web01"), claimant("salt", "d", "db01")
	cl := testkit.Builder().WithObjects(a, b, c, d).WithInterceptorFuncs(testkit.ListsOnlyByIndex(t)).Build()
	br := &Reconciler{Client: cl}
	ctx := context.Background()
	testkit.CheckWakes(t, []testkit.Wake{
		{Name: "the others of a minion ID", Got: br.otherClaimants(ctx, a), Want: []string{"other/c", "salt/b"}},
		{Name: "one claimant alone", Got: br.otherClaimants(ctx, d), Want: nil},
		{Name: "a gone claimant's", Got: br.otherClaimants(ctx, claimant("salt", "gone", "db01")), Want: []string{"salt/d"}},
		{Name: "not a binding", Got: br.otherClaimants(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault"}}), Want: nil},
	})
}
