// Package lost finds the minions whose binding went away without its
// deletion having run (its finalizer stripped, its namespace lost, etcd
// restored), keeps their objects in Vault for that binding coming back
// for a restore window, and collects them after it: the lost and
// collected steps of a minion's lifecycle (pkg/ownership, lost.go).
//
// It works per Vault, not per binding: the request key is the Vault's key
// (ownership.VaultKey), so that two connections to one Vault sweep it once.
// What wakes it: a claimant that found a lost holder (lostnotice.Notices),
// a binding deleted without this process running its deletion, a
// connection reaching a Vault or asking for a collection
// (v1alpha1.CollectAnnotation), and its own schedule: the sweep, which
// finds what nothing wakes.
package lost

import (
	"context"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// DefaultWindow is how long a lost minion's objects are kept for its
// binding coming back: a namespace restored from last night's backup, or
// re-created from Git after an accident, within a day.
const DefaultWindow = 24 * time.Hour

// Collector is the lost-minion controller.
type Collector struct {
	client.Client
	// APIReader reads past the cache: whether the binding a marker names
	// exists (the decision to collect is never taken from the cache).
	APIReader   client.Reader
	Recorder    events.EventRecorder
	Connections *connection.Connections
	Metrics     *metrics.Metrics
	Notices     *lostnotice.Notices
	// ClusterID: only objects marked by this cluster are looked at.
	ClusterID string
	// Window is the restore window; Interval the sweep's.
	Window, Interval time.Duration
	// SeesAllBindings: the cache holds every MinionBinding of the cluster,
	// so a role whose role ID this cluster chose for no binding of its
	// minion ID is a gone binding's.
	SeesAllBindings bool

	clock func() time.Time

	mu     sync.Mutex
	vaults map[string]*vaultState
	// enqueue adds a Vault's key to the work queue (set by the source).
	enqueue func(key string)
}

// +kubebuilder:rbac:groups=minionvault.dev,resources=vaultconnections,verbs=get;list;watch
// +kubebuilder:rbac:groups=minionvault.dev,resources=minionbindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (c *Collector) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

// state is what the collector keeps of one Vault, created on first use.
func (c *Collector) state(key string) *vaultState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vaults == nil {
		c.vaults = map[string]*vaultState{}
	}
	st := c.vaults[key]
	if st == nil {
		st = newVaultState()
		c.vaults[key] = st
	}
	return st
}

// forget drops what is known of a Vault no connection reaches.
func (c *Collector) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.vaults, key)
}

// notice queues a candidate to be looked at now.
func (c *Collector) notice(cand lostnotice.Candidate) {
	if cand.Vault == "" {
		return
	}
	if c.state(cand.Vault).add(cand) && c.enqueue != nil {
		c.enqueue(cand.Vault)
	}
}

// SetupWithManager registers the collector. Its work queue holds Vault
// keys; each reconcile does what is due in one Vault and requeues for the
// next step (a paced read, a window's end, the next sweep).
func (c *Collector) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if c.Window < 0 {
		c.Window = 0
	}
	if c.Interval <= 0 {
		c.Interval = time.Hour
	}
	c.Notices.OnNotice(c.notice)
	return ctrl.NewControllerManagedBy(mgr).
		Named("lostminions").
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			c.mu.Lock()
			c.enqueue = func(key string) { q.Add(vaultRequest(key)) }
			c.mu.Unlock()
			return nil
		})).
		Watches(&v1alpha1.VaultConnection{}, handler.EnqueueRequestsFromMapFunc(c.vaultOfConnection)).
		Watches(&v1alpha1.MinionBinding{}, handler.Funcs{DeleteFunc: c.bindingDeleted}).
		WithOptions(opts).
		Complete(c)
}

func vaultRequest(key string) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKey{Name: key}}
}

// vaultOfConnection is the Vault a connection reaches, once it knows it.
func (c *Collector) vaultOfConnection(_ context.Context, o client.Object) []reconcile.Request {
	conn, ok := o.(*v1alpha1.VaultConnection)
	if !ok || conn.Status.ClusterID == "" {
		return nil
	}
	return []reconcile.Request{vaultRequest(ownership.VaultKey(conn.Status.ClusterID, conn.Spec.Namespace))}
}

// bindingDeleted looks at once at what a binding that held a minion
// leaves, unless this process ran its deletion: a finalizer stripped or a
// namespace lost starts the restore window now, not at the next sweep.
func (c *Collector) bindingDeleted(ctx context.Context, e event.TypedDeleteEvent[client.Object], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	b, ok := e.Object.(*v1alpha1.MinionBinding)
	if !ok || c.Notices.TakeFinalized(b.UID) {
		return
	}
	st := b.Status
	if st.Connection == "" || st.AppRole == nil || (st.AppRole.RoleID == "" && st.Entity == nil) {
		return // it never wrote its minion
	}
	conn := &v1alpha1.VaultConnection{}
	if err := c.Get(ctx, client.ObjectKey{Name: st.Connection}, conn); err != nil || conn.Status.ClusterID == "" {
		return // the sweep of its Vault finds it, if a connection reaches it
	}
	cand := lostnotice.Candidate{Vault: ownership.VaultKey(conn.Status.ClusterID, conn.Spec.Namespace), Connection: conn.Name,
		Mount: st.AppRole.Mount, Role: watch.MinionIDKey(b.Spec.MinionID)}
	if st.Entity != nil {
		cand.Entity = st.Entity.Name
	}
	c.notice(cand)
}

// Reconcile does what is due in one Vault: the collections an
// administrator asked for, the candidates noticed, the reads of the
// sweep that are due, the collections whose window ended.
func (c *Collector) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.Name
	conn, here, asked, err := c.reaching(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if conn == nil {
		if len(here) == 0 {
			// No connection reports it any more (a Vault reset or replaced
			// is another key): nothing there can be read or deleted.
			c.forget(key)
		}
		// Else its connections fail their checks: one turning Ready
		// wakes it.
		return ctrl.Result{}, nil
	}
	vc, _, err := c.Connections.Get(ctx, conn.Name)
	if err != nil {
		if outcome.IsWaiting(err) {
			return ctrl.Result{RequeueAfter: outcome.WaitAfter}, nil
		}
		return ctrl.Result{}, err
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("vault", key, "connection", conn.Name))
	w := &pass{c: c, ctx: ctx, vc: vc, conn: conn, here: here, key: key, st: c.state(key), now: c.now()}
	err = w.run(asked)
	// Set at every pass: the series exist (at 0) from the first.
	c.gauge(w)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: w.st.next(w.now)}, nil
}

// reaching is the connection the collector works through for a Vault
// (the first by name, among those whose last check reached it and
// passed), every connection that reports that Vault, by name, and the UIDs
// whose collection they ask for, with the connection that asks.
func (c *Collector) reaching(ctx context.Context, key string) (*v1alpha1.VaultConnection, map[string]*v1alpha1.VaultConnection, map[string]string, error) {
	list := &v1alpha1.VaultConnectionList{}
	if err := c.List(ctx, list); err != nil {
		return nil, nil, nil, err
	}
	var pick *v1alpha1.VaultConnection
	here := map[string]*v1alpha1.VaultConnection{}
	asked := map[string]string{}
	for i := range list.Items {
		conn := &list.Items[i]
		if conn.Status.ClusterID == "" || ownership.VaultKey(conn.Status.ClusterID, conn.Spec.Namespace) != key {
			continue
		}
		here[conn.Name] = conn
		for _, uid := range collectUIDs(conn) {
			asked[uid] = conn.Name
		}
		if !apimeta.IsStatusConditionTrue(conn.Status.Conditions, v1alpha1.ReadyCondition) {
			continue
		}
		if pick == nil || conn.Name < pick.Name {
			pick = conn
		}
	}
	return pick, here, asked, nil
}

// gauge sets the lost-minion gauges of the pass's Vault, by the
// connection each minion is told on (connOf); a connection that had some
// and has none now goes to 0.
func (c *Collector) gauge(w *pass) {
	type counts struct{ lost, retained int }
	by := map[string]*counts{w.conn.Name: {}}
	for _, m := range w.st.lost {
		name := w.connOf(m).Name
		if by[name] == nil {
			by[name] = &counts{}
		}
		if m.retained {
			by[name].retained++
		} else {
			by[name].lost++
		}
	}
	for name := range w.st.reported {
		if by[name] == nil {
			by[name] = &counts{}
		}
	}
	w.st.reported = map[string]bool{}
	for name, n := range by {
		c.Metrics.LostMinions(name, n.lost, n.retained)
		if n.lost+n.retained > 0 {
			w.st.reported[name] = true
		}
	}
}
