// Package operator wires the three controllers into a manager: the field
// indexes they share, the metrics, the Vault connections, the compile and
// render caches, and each kind's reconciler. It is the controllers'
// surface for the operator command; `minionvault plan` uses the kinds'
// own exports (binding.PlanBinding, policy.Planner).
package operator

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/minionvault/minion-vault-operator/controllers/binding"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/clusterfacts"
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/controllers/lost"
	"github.com/minionvault/minion-vault-operator/controllers/policy"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// Options are what the operator command decides.
type Options struct {
	// Bindings, Templates and Connections are the controllers to run.
	Bindings, Templates, Connections bool
	ServiceAccount                   types.NamespacedName
	Concurrency                      int
	// Interval is the resync of templates that set none.
	Interval time.Duration
	// Observer also sees every Vault request (tests count writes with it).
	Observer vault.Observer
	// ClusterID names this cluster in the owner markers written to Vault.
	ClusterID string
	// Shard: the bindings controller sees some namespaces or labels only.
	Shard bool
	// SecretNamespace is the only namespace VaultConnections may name
	// Secrets in ("": any, for tests that grant Secrets cluster-wide).
	SecretNamespace string
	// LostWindow is how long a lost minion's objects are kept for its
	// binding coming back; LostSweep how often each Vault is swept for
	// lost minions (0: lost.DefaultWindow, Interval).
	LostWindow, LostSweep time.Duration
}

// DefaultLostWindow is the restore window of lost minions when the
// operator is not told another (--lost-minion-window).
const DefaultLostWindow = lost.DefaultWindow

// Setup registers the indexes and the controllers o asks for with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if err := watch.SetupIndexes(ctx, mgr); err != nil {
		return err
	}
	metrics := metrics.New(nil)
	var obs vault.Observer = metrics
	if o.Observer != nil {
		obs = teeObserver{metrics, o.Observer}
	}
	// Secret and ConfigMap data is read by name from the API server, and
	// only when the metadata cache shows a new version.
	conns := &connection.Connections{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Metadata: mgr.GetCache(),
		Cache: &vault.Cache{}, Observer: obs, ServiceAccount: o.ServiceAccount,
		SecretNamespace: o.SecretNamespace,
	}
	opts := controller.Options{MaxConcurrentReconciles: max(o.Concurrency, 1)}
	// The binding and template controllers both render each binding on
	// each change; run together, they share one render of it.
	renderers := 0
	for _, on := range []bool{o.Bindings, o.Templates} {
		if on {
			renderers++
		}
	}
	templates := &clusterfacts.Templates{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Metadata: mgr.GetCache(),
		Renders: &clusterfacts.Renders{Consumers: renderers}}
	recorder := mgr.GetEventRecorder("minion-vault-operator")
	// A rollout is reported by its template when the template controller
	// runs here; a bindings-only shard reports each binding's update.
	var rollouts *outcome.Rollouts
	if o.Bindings && o.Templates {
		rollouts = &outcome.Rollouts{}
	}
	// The lost-minion collector runs beside the connections controller:
	// the instance that sees every binding (shards run bindings only).
	window := o.LostWindow
	if window == 0 {
		window = lost.DefaultWindow
	}
	var notices *lostnotice.Notices
	if o.Connections {
		notices = &lostnotice.Notices{}
	}
	if o.Bindings {
		if err := (&binding.Reconciler{
			Client: mgr.GetClient(), Recorder: recorder,
			Connections: conns, Templates: templates, Metrics: metrics, DefaultInterval: o.Interval,
			ClusterID: o.ClusterID, APIReader: mgr.GetAPIReader(), SeesAllBindings: !o.Shard, Rollouts: rollouts,
			Lost: notices, LostWindow: window,
		}).SetupWithManager(mgr, opts); err != nil {
			return err
		}
	}
	if o.Templates {
		if err := (&policy.Reconciler{
			Client: mgr.GetClient(), Recorder: recorder,
			Connections: conns, Templates: templates, DefaultInterval: o.Interval, ClusterID: o.ClusterID, Rollouts: rollouts,
			Metrics: metrics,
		}).SetupWithManager(mgr, opts); err != nil {
			return err
		}
	}
	if o.Connections {
		if err := (&connection.Reconciler{Client: mgr.GetClient(), Recorder: recorder, Connections: conns, Metrics: metrics}).
			SetupWithManager(mgr, opts); err != nil {
			return err
		}
		sweep := o.LostSweep
		if sweep == 0 {
			sweep = o.Interval
		}
		return (&lost.Collector{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Connections: conns,
			Metrics: metrics, Notices: notices, ClusterID: o.ClusterID, Window: window, Interval: sweep, SeesAllBindings: !o.Shard}).
			SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2})
	}
	return nil
}

// teeObserver sends each Vault request to both observers.
type teeObserver struct{ a, b vault.Observer }

func (t teeObserver) Request(op, path string, code int, d time.Duration) {
	t.a.Request(op, path, code, d)
	t.b.Request(op, path, code, d)
}

func (t teeObserver) Login(method string, err error) {
	t.a.Login(method, err)
	t.b.Login(method, err)
}
