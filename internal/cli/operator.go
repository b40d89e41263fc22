package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/operator"
	"github.com/minionvault/minion-vault-operator/internal/version"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// OperatorOptions are the manager's flags.
type OperatorOptions struct {
	MetricsAddr     string
	ProbeAddr       string
	PprofAddr       string
	LeaderElection  bool
	LeaderNamespace string
	Concurrency     int
	WatchNamespace  string
	LabelSelector   string
	Interval        time.Duration
	ServiceAccount  string
	Controllers     []string
	LeaderID        string
	// The leader-election timing: a new leader takes over at most
	// LeaseDuration (plus a RetryPeriod) after the old one stopped
	// renewing; a leader that cannot renew within RenewDeadline (the API
	// server unreachable) stops and exits, for its Pod to restart.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MemoryLimitPercent of the container's memory limit becomes the Go
	// runtime's soft memory limit (0: none; GOMEMLIMIT wins).
	MemoryLimitPercent int
	// ClusterID names this cluster in the owner markers in Vault.
	ClusterID string
	// SecretNamespace is the only namespace whose Secrets the operator
	// reads and caches (VaultConnection credentials); its RBAC grants
	// Secrets there only.
	SecretNamespace string
	// LostWindow: how long a lost minion's objects are kept for its
	// binding coming back; LostSweep: how often each Vault is swept for
	// lost minions.
	LostWindow, LostSweep time.Duration
	Zap                   zap.Options
}

// The controllers `--controllers` can run.
const (
	controllerBindings    = "bindings"
	controllerTemplates   = "templates"
	controllerConnections = "connections"
)

var allControllers = []string{controllerBindings, controllerTemplates, controllerConnections}

// DefaultSecretNamespace is --secret-namespace outside a pod: the namespace
// config/default installs into, where the samples and the quickstart keep
// the connection's Secret.
const DefaultSecretNamespace = "minion-vault-system"

// serviceAccountNamespaceFile is where the kubelet mounts the pod's
// namespace with its service account token.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// podNamespace is the operator's own namespace: POD_NAMESPACE (the
// Deployment sets it from the downward API), else the service account
// mount's, else DefaultSecretNamespace (a process outside a pod).
func podNamespace(getenv func(string) string, readFile func(string) ([]byte, error)) string {
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		return ns
	}
	if b, err := readFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return DefaultSecretNamespace
}

// checkSharding refuses the one layout that would damage Vault: the
// template controller deletes the ACL policies no binding renders, so it
// must see every binding, not a shard of them.
func (o OperatorOptions) checkSharding() error {
	for _, c := range o.Controllers {
		if !slices.Contains(allControllers, c) {
			return fmt.Errorf("--controllers: unknown controller %q (known: %s)", c, strings.Join(allControllers, ", "))
		}
	}
	sharded := o.WatchNamespace != "" || o.LabelSelector != ""
	if sharded && slices.Contains(o.Controllers, controllerTemplates) {
		return errors.New("the templates controller needs every MinionBinding, but --watch-namespace or --watch-label-selector shows it a shard: " +
			"run shards with --controllers=bindings and one instance without a selector with --controllers=templates,connections")
	}
	return nil
}

// leaderElectionID differs per shard, so that shards do not wait for one
// another's lease.
func (o OperatorOptions) leaderElectionID() string {
	const base = "minion-vault-operator.minionvault.dev"
	if o.LeaderID != "" {
		return o.LeaderID
	}
	controllers := slices.Sorted(slices.Values(o.Controllers))
	if slices.Equal(controllers, slices.Sorted(slices.Values(allControllers))) && o.WatchNamespace == "" && o.LabelSelector == "" {
		return base
	}
	sum := sha256.Sum256([]byte(strings.Join(controllers, ",") + "|" + o.WatchNamespace + "|" + o.LabelSelector))
	return hex.EncodeToString(sum[:5]) + "." + base
}

func newOperatorCmd() *cobra.Command {
	o := OperatorOptions{}
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the controllers: MinionBindings, MinionTemplates and VaultConnections into Vault",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Not GetConfigOrDie: it exits before the logger is set up,
			// with nothing said.
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("no Kubernetes API server to talk to (in a Pod, its service account; outside, --kubeconfig or KUBECONFIG): %w", err)
			}
			return RunOperator(ctrl.SetupSignalHandler(), cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables it)")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	// Off by default: profiles show the operator's memory, which can hold
	// Vault tokens, so only bind it where nobody else can connect.
	f.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof endpoints, for profiling (0 disables it; bind it to loopback only)")
	f.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader, for more than one replica")
	f.StringVar(&o.LeaderNamespace, "leader-election-namespace", "", "namespace of the leader-election lease (default: the pod's)")
	f.IntVar(&o.Concurrency, "concurrency", 4, "bindings, templates and connections reconciled in parallel (each kind its own workers)")
	f.StringVar(&o.WatchNamespace, "watch-namespace", "", "only reconcile MinionBindings in this namespace (default: all)")
	f.StringVar(&o.LabelSelector, "watch-label-selector", "", "only reconcile MinionBindings matching this label selector (sharding)")
	f.DurationVar(&o.Interval, "default-interval", time.Hour, "drift resync interval for templates that set none")
	f.DurationVar(&o.LostWindow, "lost-minion-window", operator.DefaultLostWindow,
		"how long the Vault objects of a MinionBinding gone without its deletion (a lost minion) are kept for it coming back under its name, before the operator deletes them")
	f.DurationVar(&o.LostSweep, "lost-minion-sweep-interval", time.Hour, "how often each Vault is swept for lost minions that no event reports (its reads are spread over the interval)")
	f.StringVar(&o.ServiceAccount, "service-account", "", "namespace/name of the operator's service account, for Vault kubernetes auth")
	f.StringSliceVar(&o.Controllers, "controllers", allControllers, "controllers to run: bindings, templates, connections (sharding: see docs/operations.md)")
	f.StringVar(&o.LeaderID, "leader-election-id", "", "name of the leader-election lease (default: one per set of --controllers and watch flags)")
	f.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "how long after the leader's last renewal another replica may take over")
	f.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops and exits")
	// A standby polls the Lease every retry period plus client-go's
	// jitter (JitterFactor 1.2: up to 2.2 retry periods), so it sees the
	// dead leader's last renewal up to one such wait late, and its first
	// try after the lease ran out comes up to one more later: a takeover
	// comes at most lease duration + 4.4 retry periods after that renewal.
	// At 400ms that is within 2 s of the lease duration (1.76 s); at 750ms
	// it was 3.3 s. The leader renews every retry period: 2.5 Lease
	// updates a second.
	f.DurationVar(&o.RetryPeriod, "leader-election-retry-period", 400*time.Millisecond, "how often replicas try to take or renew the lease")
	f.IntVar(&o.MemoryLimitPercent, "memory-limit-percent", 80, "percent of the container's memory limit (cgroup) the Go runtime keeps its memory under by collecting garbage harder (0: off; GOMEMLIMIT, when set, wins)")
	f.StringVar(&o.SecretNamespace, "secret-namespace", podNamespace(os.Getenv, os.ReadFile),
		"the only namespace the operator reads Secrets in: VaultConnections must keep their token, AppRole secret ID and CA Secrets there; the default is the pod's namespace (POD_NAMESPACE, else the service account's mount, else "+DefaultSecretNamespace+")")
	f.StringVar(&o.ClusterID, "cluster-id", "", "this cluster's identity in the owner markers the operator writes into Vault (default: the UID of the kube-system namespace); keep it when the cluster is rebuilt from a backup, and make it unique per cluster on one Vault")
	zfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.Zap.BindFlags(zfs)
	f.AddGoFlagSet(zfs)
	return cmd
}

// managerOptions are the manager's: metrics, probes, leader election and
// the caches.
func (o OperatorOptions) managerOptions(scheme *runtime.Scheme, cacheOpts cache.Options) ctrl.Options {
	return ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        o.leaderElectionID(),
		LeaderElectionNamespace: o.LeaderNamespace,
		LeaseDuration:           positive(o.LeaseDuration),
		RenewDeadline:           positive(o.RenewDeadline),
		RetryPeriod:             positive(o.RetryPeriod),
		// The process ends as soon as the manager stops, so a leader that
		// is shut down hands the lease over at once, not a lease later.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
		Client:                        ClientOptions(),
		MapperProvider:                memoMapperProvider,
		// A standby starts its controllers' watches while it waits: the
		// initial list of every binding is through their handlers and in
		// the work queues (at low priority) before it leads, so a new
		// leader reconciles the moment it takes the Lease, and a binding
		// changed at the takeover arrives as a change, ahead of that list.
		// Without it, a new leader over 10,000 bindings first replayed them
		// (0.5 s), and a binding changed then reached Vault 1.6 s later.
		Controller: config.Controller{EnableWarmup: ptr.To(o.LeaderElection)},
	}
}

// RunOperator starts the manager and blocks until ctx ends.
func RunOperator(ctx context.Context, cfg *rest.Config, o OperatorOptions) error {
	ctrl.SetLogger(lazyLogger(zap.New(zap.UseFlagOptions(&o.Zap))))
	if len(o.Controllers) == 0 {
		o.Controllers = allControllers
	}
	if err := o.checkSharding(); err != nil {
		return err
	}
	if o.SecretNamespace == "" {
		// Empty would mean every namespace, which the installed RBAC
		// does not grant.
		return errors.New("--secret-namespace must name the namespace of the VaultConnections' Secrets (the operator's own)")
	}
	log := ctrl.Log.WithName("setup")
	if soft, limit, source := applySoftMemoryLimit(o.MemoryLimitPercent); soft > 0 {
		log.Info("Soft memory limit set from the container's", "softLimitBytes", soft, "limitBytes", limit, "percent", o.MemoryLimitPercent, "cgroupFile", source)
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cacheOpts, err := CacheOptions(o)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, o.managerOptions(scheme, cacheOpts))
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
	so := SetupOptions{ServiceAccount: sa, Concurrency: o.Concurrency, Interval: o.Interval, Controllers: o.Controllers, ClusterID: o.ClusterID,
		Shard: o.WatchNamespace != "" || o.LabelSelector != "", SecretNamespace: o.SecretNamespace, LostWindow: o.LostWindow, LostSweep: o.LostSweep}
	if err := Setup(ctx, mgr, so); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("Starting the operator", "version", version.Version, "watchNamespace", o.WatchNamespace, "labelSelector", o.LabelSelector,
		"secretNamespace", o.SecretNamespace)
	return mgr.Start(ctx)
}

// positive is d, or nil (controller-runtime's default) when not set.
func positive(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}

// SetupOptions configure Setup.
type SetupOptions struct {
	ServiceAccount types.NamespacedName
	Concurrency    int
	Interval       time.Duration
	// Observer also sees every Vault request (tests count writes with it).
	Observer vault.Observer
	// Controllers to run (default: all).
	Controllers []string
	// ClusterID names this cluster in the owner markers written to Vault
	// (default: the UID of the kube-system namespace).
	ClusterID string
	// Shard: the bindings controller sees some namespaces or labels only,
	// not every MinionBinding of the cluster.
	Shard bool
	// SecretNamespace is the only namespace VaultConnections may name
	// Secrets in ("": any, for tests that grant Secrets cluster-wide).
	SecretNamespace string
	// LostWindow and LostSweep: see operator.Options.
	LostWindow, LostSweep time.Duration
}

// clusterIdentity is the cluster's identity in owner markers: the flag's,
// or the UID of kube-system, which every cluster has, never changes while
// the cluster lives, and differs between clusters.
func clusterIdentity(ctx context.Context, c client.Reader, flag string) (string, error) {
	if flag != "" {
		return flag, ownership.ValidCluster(flag)
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("reading namespace kube-system for the cluster's identity (or set --cluster-id): %w", err)
	}
	return string(ns.UID), nil
}

// Setup registers the three controllers with a manager; tests use it too.
func Setup(ctx context.Context, mgr ctrl.Manager, so SetupOptions) error {
	clusterID, err := clusterIdentity(ctx, mgr.GetAPIReader(), so.ClusterID)
	if err != nil {
		return err
	}
	run := func(name string) bool { return len(so.Controllers) == 0 || slices.Contains(so.Controllers, name) }
	return operator.Setup(ctx, mgr, operator.Options{
		Bindings: run(controllerBindings), Templates: run(controllerTemplates), Connections: run(controllerConnections),
		ServiceAccount: so.ServiceAccount, Concurrency: so.Concurrency, Interval: so.Interval,
		Observer: so.Observer, ClusterID: clusterID, Shard: so.Shard,
		SecretNamespace: so.SecretNamespace, LostWindow: so.LostWindow, LostSweep: so.LostSweep,
	})
}
