package connection

import (
	"context"
	"testing"

	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
)

// Every watch of the connection controller maps a changed Secret, ConfigMap, connection or
// template to exactly the objects that depend on it, through the field
// indexes, each once: a fix ends a RenderFailed or AccessDenied without a
// manual poke, and nothing else is woken.
func TestConnectionWatchMappings(t *testing.T) {
	c := testkit.WatchClient(t)
	cr := &Reconciler{Client: c}
	ctx := context.Background()
	testkit.CheckWakes(t, []testkit.Wake{
		{Name: "connections of a shared CA", Got: cr.connectionsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "ca")), Want: []string{"other", "vault"}},
		{Name: "connections of a token", Got: cr.connectionsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "token")), Want: []string{"vault"}},
		{Name: "connections of an unrelated Secret", Got: cr.connectionsOfSecret(ctx, testkit.MetadataOf("Secret", "ops", "unrelated")), Want: nil},
	})
}
