package binding

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
)

// Every watch of the binding controller maps a changed Secret, ConfigMap, connection or
// template to exactly the objects that depend on it, through the field
// indexes, each once: a fix ends a RenderFailed or AccessDenied without a
// manual poke, and nothing else is woken.
func TestBindingWatchMappings(t *testing.T) {
	c := testkit.WithFieldIndexes(fake.NewClientBuilder().WithScheme(testkit.Scheme())).
		WithObjects(testkit.WatchFixtures()...).WithInterceptorFuncs(testkit.ListsOnlyByIndex(t)).Build()
	br := &Reconciler{Client: c}
	ctx := context.Background()
	conn := func(name string) client.Object {
		return &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	_ = conn
	tests := []struct {
		name string
		got  []reconcile.Request
		want []string
	}{
		{"bindings of a ConfigMap two templates read", br.bindingsOfConfigMap(ctx, testkit.MetadataOf("ConfigMap", "salt", "params")), []string{"salt/b1", "salt/b3"}},
		{"bindings of a ConfigMap one template reads", br.bindingsOfConfigMap(ctx, testkit.MetadataOf("ConfigMap", "salt", "more")), []string{"salt/b1"}},
		{"bindings of a ConfigMap of that name elsewhere", br.bindingsOfConfigMap(ctx, testkit.MetadataOf("ConfigMap", "other", "params")), nil},
		{"bindings of a token Secret", br.bindingsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "token")),
			[]string{"salt/b1", "salt/b3", "salt/orphan", "salt/switching"}},
		{"bindings of an AppRole Secret", br.bindingsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "approle")),
			[]string{"salt/b2", "salt/orphan-other", "salt/switching"}},
		{"bindings of a CA both connections read, each once", br.bindingsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "ca")),
			[]string{"salt/b1", "salt/b2", "salt/b3", "salt/orphan", "salt/orphan-other", "salt/switching"}},
		{"bindings of a Secret of that name elsewhere", br.bindingsOfSecret(ctx, testkit.MetadataOf("Secret", "salt", "token")), nil},
		{"bindings of a connection: template, status and record", br.bindingsOfConnection(ctx, conn("vault")),
			[]string{"salt/b1", "salt/b3", "salt/orphan", "salt/switching"}},
		{"bindings of a connection nothing uses", br.bindingsOfConnection(ctx, conn("unused")), nil},
		{"bindings of a template", br.bindingsOfTemplate(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "without"}}),
			[]string{"salt/b2", "salt/switching"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range tc.got {
				got = append(got, strings.TrimPrefix(r.Namespace+"/"+r.Name, "/"))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("woke %q, want %q", got, tc.want)
			}
		})
	}
}
