package connection

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

// Every watch of the connection controller maps a changed Secret, ConfigMap, connection or
// template to exactly the objects that depend on it, through the field
// indexes, each once: a fix ends a RenderFailed or AccessDenied without a
// manual poke, and nothing else is woken.
func TestConnectionWatchMappings(t *testing.T) {
	c := testkit.WithFieldIndexes(fake.NewClientBuilder().WithScheme(testkit.Scheme())).
		WithObjects(testkit.WatchFixtures()...).WithInterceptorFuncs(testkit.ListsOnlyByIndex(t)).Build()
	cr := &Reconciler{Client: c}
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
		{"connections of a shared CA", cr.connectionsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "ca")), []string{"other", "vault"}},
		{"connections of a token", cr.connectionsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "token")), []string{"vault"}},
		{"connections of an unrelated Secret", cr.connectionsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "unrelated")), nil},
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
