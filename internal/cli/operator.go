package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers"
	"github.com/minionvault/minion-vault-operator/internal/version"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// OperatorOptions are the manager's flags.
type OperatorOptions struct {
	MetricsAddr     string
	ProbeAddr       string
	LeaderElection  bool
	LeaderNamespace string
	Concurrency     int
	WatchNamespace  string
	LabelSelector   string
	Interval        time.Duration
	ServiceAccount  string
	Zap             zap.Options
}

func newOperatorCmd() *cobra.Command {
	o := OperatorOptions{}
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the controllers: MinionBindings, MinionTemplates and VaultConnections into Vault",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunOperator(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables it)")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader, for more than one replica")
	f.StringVar(&o.LeaderNamespace, "leader-election-namespace", "", "namespace of the leader-election lease (default: the pod's)")
	f.IntVar(&o.Concurrency, "concurrency", 4, "bindings reconciled in parallel")
	f.StringVar(&o.WatchNamespace, "watch-namespace", "", "only reconcile MinionBindings in this namespace (default: all)")
	f.StringVar(&o.LabelSelector, "watch-label-selector", "", "only reconcile MinionBindings matching this label selector (sharding)")
	f.DurationVar(&o.Interval, "default-interval", time.Hour, "drift resync interval for templates that set none")
	f.StringVar(&o.ServiceAccount, "service-account", "", "namespace/name of the operator's service account, for Vault kubernetes auth")
	zfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.Zap.BindFlags(zfs)
	f.AddGoFlagSet(zfs)
	return cmd
}

// RunOperator starts the manager and blocks until ctx ends.
func RunOperator(ctx context.Context, cfg *rest.Config, o OperatorOptions) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.Zap)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	bindingCache := cache.ByObject{}
	if o.LabelSelector != "" {
		sel, err := labels.Parse(o.LabelSelector)
		if err != nil {
			return fmt.Errorf("--watch-label-selector: %w", err)
		}
		bindingCache.Label = sel
	}
	if o.WatchNamespace != "" {
		bindingCache.Namespaces = map[string]cache.Config{o.WatchNamespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "minion-vault-operator.minionvault.dev",
		LeaderElectionNamespace: o.LeaderNamespace,
		Cache:                   cache.Options{ByObject: map[client.Object]cache.ByObject{&v1alpha1.MinionBinding{}: bindingCache}},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	sa := types.NamespacedName{}
	if o.ServiceAccount != "" {
		ns, name, ok := strings.Cut(o.ServiceAccount, "/")
		if !ok || ns == "" || name == "" {
			return errors.New("--service-account must be namespace/name")
		}
		sa = types.NamespacedName{Namespace: ns, Name: name}
	}
	if err := Setup(ctx, mgr, SetupOptions{ServiceAccount: sa, Concurrency: o.Concurrency, Interval: o.Interval}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("Starting the operator", "version", version.Version, "watchNamespace", o.WatchNamespace, "labelSelector", o.LabelSelector)
	return mgr.Start(ctx)
}

// SetupOptions configure Setup.
type SetupOptions struct {
	ServiceAccount types.NamespacedName
	Concurrency    int
	Interval       time.Duration
	// Observer also sees every Vault request (tests count writes with it).
	Observer vault.Observer
	// NewClient replaces the Vault client cache (unit tests).
	NewClient func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error)
}

// Setup registers the three controllers with a manager; tests use it too.
func Setup(ctx context.Context, mgr ctrl.Manager, so SetupOptions) error {
	if err := controllers.SetupIndexes(ctx, mgr); err != nil {
		return err
	}
	metrics := controllers.NewMetrics(nil)
	var obs vault.Observer = metrics
	if so.Observer != nil {
		obs = teeObserver{metrics, so.Observer}
	}
	conns := &controllers.Connections{Client: mgr.GetClient(), Cache: &vault.Cache{}, Observer: obs, ServiceAccount: so.ServiceAccount, NewClient: so.NewClient}
	templates := &controllers.Templates{Client: mgr.GetClient()}
	if so.Concurrency < 1 {
		so.Concurrency = 1
	}
	opts := controller.Options{MaxConcurrentReconciles: so.Concurrency}
	interval := so.Interval
	bindings := &controllers.MinionBindingReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("minion-vault-operator"),
		Connections: conns, Templates: templates, Metrics: metrics, DefaultInterval: interval,
	}
	if err := bindings.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := (&controllers.MinionTemplateReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("minion-vault-operator"),
		Connections: conns, Templates: templates, Bindings: bindings, DefaultInterval: interval,
	}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 1}); err != nil {
		return err
	}
	return (&controllers.VaultConnectionReconciler{Client: mgr.GetClient(), Connections: conns}).
		SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 1})
}

type teeObserver []vault.Observer

func (t teeObserver) Request(op, path string, code int, d time.Duration) {
	for _, o := range t {
		o.Request(op, path, code, d)
	}
}

func (t teeObserver) Login(method string, err error) {
	for _, o := range t {
		o.Login(method, err)
	}
}
