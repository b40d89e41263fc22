package connection

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The gate opening wakes what waits on it, once per opening: a pass after
// a failure does, a pass after a pass or a failure after anything does
// not. A binding's failure closes the gate (Verify) while the connection
// still says Ready; when the next check passes, no condition changes, and
// without this the bindings waited two minutes (outcome.WaitAfter).
func TestGateOpeningWakes(t *testing.T) {
	down := &vault.Error{Op: "read auth/token/lookup-self", StatusCode: 503}
	missing := outcome.Waiting(outcome.WaitingForCredential, "the Secret is missing")
	for _, tc := range []struct {
		name     string
		verdicts []error
		want     int
	}{
		{"passes only", []error{nil, nil}, 0},
		{"fails only", []error{down, down}, 0},
		{"fails then passes", []error{down, nil}, 1},
		{"fails twice then passes twice", []error{down, down, nil, nil}, 1},
		{"two outages", []error{down, nil, down, nil}, 2},
		// A wait for a Secret opens the gate (what waited on it then
		// waits on the Secret, whose watch wakes it when it comes), and
		// never closes it.
		{"fails then waits for a Secret", []error{down, missing}, 1},
		{"waits then passes", []error{missing, nil}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Connections{}
			var woken []string
			c.OnOpened(func(name string) { woken = append(woken, name) })
			for _, err := range tc.verdicts {
				c.record("vault", "k", time.Now(), err)
			}
			if len(woken) != tc.want {
				t.Errorf("woken %d times (%v), want %d", len(woken), woken, tc.want)
			}
			for _, n := range woken {
				if n != "vault" {
					t.Errorf("woken for %q", n)
				}
			}
		})
	}
}

// Opened enqueues, for the connection whose gate opened, what the
// controller maps it to, in every controller that started it.
func TestOpenedEnqueuesTheConnectionsUsers(t *testing.T) {
	c := &Connections{}
	users := func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{
			{NamespacedName: types.NamespacedName{Namespace: "salt", Name: o.GetName() + "-a"}},
			{NamespacedName: types.NamespacedName{Namespace: "salt", Name: o.GetName() + "-b"}},
		}
	}
	var queues []workqueue.TypedRateLimitingInterface[reconcile.Request]
	for range 2 {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		t.Cleanup(q.ShutDown)
		if err := c.Opened(users).Start(context.Background(), q); err != nil {
			t.Fatal(err)
		}
		queues = append(queues, q)
	}
	c.record("vault", "k", time.Now(), &vault.Error{Op: "read sys/health", StatusCode: 503})
	for i, q := range queues {
		if q.Len() != 0 {
			t.Errorf("queue %d: %d requests while the gate is closed", i, q.Len())
		}
	}
	c.record("vault", "k", time.Now(), nil)
	for i, q := range queues {
		var got []string
		for q.Len() > 0 {
			req, _ := q.Get()
			got = append(got, req.String())
			q.Done(req)
		}
		slices.Sort(got)
		if want := []string{"salt/vault-a", "salt/vault-b"}; !slices.Equal(got, want) {
			t.Errorf("queue %d: %v, want %v", i, got, want)
		}
	}
}
