package connection

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// Opened is a source for a controller whose objects wait on a
// connection's gate: when a check passes after one failed, it enqueues
// what users maps the connection to (OnOpened says why a watch of the
// connection does not do).
func (c *Connections) Opened(users handler.MapFunc) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		c.OnOpened(func(name string) {
			for _, req := range users(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: name}}) {
				q.Add(req)
			}
		})
		return nil
	})
}
