package connection

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
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

// A connection is checked when it is created, deleted, edited or asked
// to: never because the operator wrote its status (that check would
// follow the one it records at once, and race the bindings' first
// requests).
func TestCheckWanted(t *testing.T) {
	conn := func(gen int64, ann map[string]string, ready bool) *v1alpha1.VaultConnection {
		c := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: gen, Annotations: ann}}
		if ready {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue}}
			c.Status.ClusterID, c.Status.VaultVersion = "c1", "1.21.4"
		}
		return c
	}
	asked := func(at string) map[string]string { return map[string]string{v1alpha1.ReconcileRequestAnnotation: at} }
	for _, tc := range []struct {
		name     string
		old, new *v1alpha1.VaultConnection
		want     bool
	}{
		{"the check's status written", conn(1, nil, false), conn(1, nil, true), false},
		{"status written back to not ready", conn(1, nil, true), conn(1, nil, false), false},
		{"spec edited", conn(1, nil, true), conn(2, nil, true), true},
		{"reconcile requested", conn(1, nil, true), conn(1, asked("t1"), true), true},
		{"reconcile requested again", conn(1, asked("t1"), true), conn(1, asked("t2"), true), true},
		{"another annotation", conn(1, nil, true), conn(1, map[string]string{"note": "x"}, true), false},
	} {
		if got := checkWanted.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: update passes %v, want %v", tc.name, got, tc.want)
		}
	}
	if !checkWanted.Create(event.CreateEvent{Object: conn(1, nil, false)}) {
		t.Error("a new connection is not checked")
	}
	if !checkWanted.Delete(event.DeleteEvent{Object: conn(1, nil, true)}) {
		t.Error("a deleted connection is not forgotten")
	}
}
