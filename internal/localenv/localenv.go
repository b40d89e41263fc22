// Package localenv starts real servers on loopback: a Kubernetes API server
// with etcd (controller-runtime's envtest, with the project's CRDs
// installed) and a Vault dev server with the AppRole auth method enabled at
// salt-minions. The integration suites use it through
// internal/testing/testenv (which adds TestMain and Get); `minionvault dev`
// uses it directly. It does not import the testing package, so the
// minionvault binary can link it.
//
//	env, err := localenv.Start(ctx, localenv.Options{})
//	if err != nil { ... }
//	defer env.Stop()
//	_ = env.Client.Create(ctx, obj)             // the API server
//	_, _ = env.Vault.Client.Logical().Read(path) // Vault, as root
//
// The binaries come from `make tools` (bin/ at the module root, or
// $MINIONVAULT_TOOLS_DIR, or Options.ToolsDir). KUBEBUILDER_ASSETS (and
// envtest's TEST_ASSET_*) take precedence for kube-apiserver, etcd and
// kubectl; VAULT_BIN for vault. USE_EXISTING_CLUSTER=true uses the cluster of
// the current kubeconfig instead of starting one; USE_EXISTING_VAULT=true
// with VAULT_ADDR and VAULT_TOKEN uses that Vault instead of starting one.
// Options.IgnoreEnv turns all of these variables off.
//
// Every server listens on a free loopback port and every file lives in one
// temporary folder, so several environments run in parallel. All of it is
// stopped and removed by Env.Stop (or Env.Kill), and, should the process die
// without cleaning up (a -timeout panic, SIGKILL, a second Ctrl-C), by a
// small watchdog process that notices the process is gone.
//
// With Options.VaultCluster Vault is an HA cluster of several servers on
// integrated storage (raft) behind an active-following proxy, to kill,
// restart sealed and step down (cluster.go, activeproxy.go).
//
// With Options.Node the environment is also a real single-node cluster
// (containerd, runc, CNI, the kubelet, kube-controller-manager,
// kube-scheduler, kube-proxy): see Node in node.go, and test/node.
package localenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// Environment variables read by this package (besides envtest's own:
// KUBEBUILDER_ASSETS, TEST_ASSET_KUBE_APISERVER, TEST_ASSET_ETCD,
// TEST_ASSET_KUBECTL, USE_EXISTING_CLUSTER,
// KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT, KUBEBUILDER_CONTROLPLANE_START_TIMEOUT).
const (
	// EnvToolsDir is the folder with kube-apiserver, etcd, kubectl and vault,
	// as `make tools` builds them. Default: bin/ at the module root.
	EnvToolsDir = "MINIONVAULT_TOOLS_DIR"
	// EnvVaultBin is the vault binary to start. Default: vault in the tools folder.
	EnvVaultBin = "VAULT_BIN"
	// EnvUseExistingVault, when "true", makes Start use the Vault at
	// VAULT_ADDR with the token VAULT_TOKEN instead of starting a dev server.
	// Tests then write policies, entities and mounts into that Vault: never
	// point it at one that matters.
	EnvUseExistingVault = "USE_EXISTING_VAULT"
)

// AppRoleMount is where Start enables the AppRole auth method.
const AppRoleMount = "salt-minions"

// Options select what Start starts. The zero value starts both servers with
// the project's CRDs.
type Options struct {
	// NoKubernetes skips the API server and etcd (Env.Config and Env.Client stay nil).
	NoKubernetes bool
	// NoVault skips Vault (Env.Vault stays nil).
	NoVault bool
	// CRDDirectoryPaths are the CRD folders to install. Default: config/crd/bases
	// at the module root (unless CRDs is set).
	CRDDirectoryPaths []string
	// CRDs are CRDs to install besides those of CRDDirectoryPaths; when set
	// and CRDDirectoryPaths is empty, only these are installed.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Scheme for Env.Client. Default: client-go's kinds plus api/v1alpha1.
	Scheme *runtime.Scheme
	// StartTimeout bounds the start of each server. Default: 60 s.
	StartTimeout time.Duration
	// ToolsDir is the folder with kube-apiserver, etcd and vault. Default:
	// $MINIONVAULT_TOOLS_DIR, else bin/ at the module root.
	ToolsDir string
	// IgnoreEnv ignores the variables that point elsewhere
	// (USE_EXISTING_CLUSTER, USE_EXISTING_VAULT, KUBEBUILDER_ASSETS,
	// TEST_ASSET_*, VAULT_BIN, KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT,
	// KUBEBUILDER_CONTROLPLANE_START_TIMEOUT): every server is started here
	// from the tools folder.
	IgnoreEnv bool
	// TempParent is the folder in which Start creates Env.Dir. Default: the
	// system's temporary folder.
	TempParent string
	// KubeAuditPolicy, when set, is an audit.k8s.io/v1 Policy (YAML) for the
	// API server, which then writes its audit log as JSON lines to
	// Env.KubeAuditLog (test/scale counts the operator's writes with it).
	// Only for an API server Start starts, not USE_EXISTING_CLUSTER.
	KubeAuditPolicy string
	// Node also starts a real single-node cluster around the API server
	// (see Node): containerd, runc, CNI, the kubelet,
	// kube-controller-manager, kube-scheduler and kube-proxy from
	// `make node-tools`. The API server and Vault then listen on the node's
	// address instead of 127.0.0.1, so that Pods reach them. Needs root and
	// a cgroup v1 (hybrid) host; not with USE_EXISTING_CLUSTER.
	Node bool
	// NoCRDs installs no CRDs (test/node installs them with dist/install.yaml).
	NoCRDs bool
	// VaultHost is the address the Vault dev server listens on. Default:
	// 127.0.0.1, or the node's address with Node.
	VaultHost string
	// VaultCluster, with Nodes of 2 or more (3 is what users run), starts
	// a Vault HA cluster on integrated storage (raft) instead of a dev
	// server (see Cluster): Env.Vault.Addr is then its active-following
	// address and Env.Vault.Cluster its nodes. Not with USE_EXISTING_VAULT
	// (ignored: the cluster is started here).
	VaultCluster ClusterOptions
}

// Env is a started environment.
type Env struct {
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config
	// Client is a controller-runtime client (no cache) with Scheme.
	Client client.Client
	// Scheme knows client-go's kinds and the project's API.
	Scheme *runtime.Scheme
	// Vault is the Vault server, reached as root.
	Vault *Vault
	// Kubernetes is the underlying envtest environment (nil with NoKubernetes).
	Kubernetes *envtest.Environment
	// Dir is a temporary folder removed by Stop; servers keep their data and
	// logs (etcd.log, kube-apiserver.log, vault-<port>.log) here.
	Dir string
	// KubeAuditLog is the API server's audit log (with Options.KubeAuditPolicy), else "".
	KubeAuditLog string
	// Node is the single-node cluster (Options.Node), else nil.
	Node *Node

	watchdog *watchdog
	stopOnce sync.Once
	stopErr  error
}

// Start starts what opts asks for. On error everything already started has
// been stopped again. ctx bounds the start only: when it ends, Start stops
// what it started and returns ctx's error (the API server's start cannot be
// cut short, so that may take a few seconds).
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.TempParent != "" {
		if err := os.MkdirAll(opts.TempParent, 0o700); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(opts.TempParent, "minionvault-env-")
	if err != nil {
		return nil, err
	}
	env = &Env{Dir: dir, Scheme: opts.Scheme}
	if env.Scheme == nil {
		env.Scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(env.Scheme); err != nil {
			return nil, err
		}
		if err := v1alpha1.AddToScheme(env.Scheme); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			_ = env.Stop()
			env = nil
		}
	}()
	// The watchdog is there before any server, so none can outlive us.
	if env.watchdog, err = startWatchdog(dir); err != nil {
		return env, fmt.Errorf("localenv: watchdog: %w", err)
	}

	root, _ := ModuleRoot() // "" outside the repository: reported where it is needed
	toolsDir := opts.ToolsDir
	if toolsDir == "" {
		toolsDir = os.Getenv(EnvToolsDir)
	}
	if toolsDir == "" && root != "" {
		toolsDir = filepath.Join(root, "bin")
	}
	if toolsDir != "" {
		// The servers start in folders of their own: a relative tools
		// folder (--tools-dir bin) would name nothing there.
		if abs, err := filepath.Abs(toolsDir); err == nil {
			toolsDir = abs
		}
	}
	getenv := os.Getenv
	if opts.IgnoreEnv {
		getenv = func(string) string { return "" }
	}

	vaultHost := opts.VaultHost
	if opts.Node {
		if opts.NoKubernetes {
			return env, errors.New("localenv: Options.Node needs the API server (NoKubernetes is set)")
		}
		// The node's address exists before any server binds to it.
		if env.Node, err = prepareNode(ctx, dir, toolsDir, env.watchdog); err != nil {
			return env, err
		}
		if vaultHost == "" {
			vaultHost = env.Node.IP
		}
	}
	switch {
	case opts.NoVault:
	case opts.VaultCluster.Nodes > 0:
		if env.Vault, err = startCluster(ctx, dir, toolsDir, vaultHost, opts.VaultCluster, opts.StartTimeout, env.watchdog, getenv); err != nil {
			return env, err
		}
	default:
		if env.Vault, err = startVault(ctx, dir, toolsDir, vaultHost, opts.StartTimeout, env.watchdog, getenv); err != nil {
			return env, err
		}
	}
	if err = ctx.Err(); err != nil {
		return env, err
	}
	if !opts.NoKubernetes {
		if err = env.startKubernetes(ctx, opts, root, toolsDir); err != nil {
			return env, err
		}
	}
	return env, nil
}

func (e *Env) startKubernetes(ctx context.Context, opts Options, root, toolsDir string) error {
	lookup := os.LookupEnv
	if opts.IgnoreEnv {
		lookup = func(string) (string, bool) { return "", false }
	}
	getenv := func(k string) string { v, _ := lookup(k); return v }

	crds := opts.CRDDirectoryPaths
	if len(crds) == 0 && len(opts.CRDs) == 0 && !opts.NoCRDs {
		if root == "" {
			return errors.New("localenv: cannot find the module root (go.mod of " + ModulePath + ") above the working directory, so not the CRDs either; set Options.CRDDirectoryPaths or Options.CRDs")
		}
		crds = []string{filepath.Join(root, "config", "crd", "bases")}
	}
	te := &envtest.Environment{
		Scheme:                   e.Scheme,
		CRDDirectoryPaths:        crds,
		CRDs:                     opts.CRDs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: opts.StartTimeout,
		ControlPlaneStopTimeout:  20 * time.Second,
	}
	if getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") != "" {
		te.ControlPlaneStartTimeout = 0 // envtest reads it
	}
	existing := strings.EqualFold(getenv("USE_EXISTING_CLUSTER"), "true")
	te.UseExistingCluster = &existing
	if existing && opts.KubeAuditPolicy != "" {
		return errors.New("localenv: KubeAuditPolicy needs an API server started here, not USE_EXISTING_CLUSTER")
	}
	var logs []string
	if !existing {
		api := &envtest.APIServer{CertDir: filepath.Join(e.Dir, "kube-apiserver")}
		etcd := &envtest.Etcd{DataDir: filepath.Join(e.Dir, "etcd")}
		if _, ok := lookup("KUBEBUILDER_ASSETS"); !ok {
			if toolsDir == "" {
				return errors.New("localenv: no tools folder: set " + EnvToolsDir + " or KUBEBUILDER_ASSETS, or run inside the repository")
			}
			for _, name := range []string{"kube-apiserver", "etcd"} {
				if _, ok := lookup("TEST_ASSET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok {
					continue
				}
				if _, err := os.Stat(filepath.Join(toolsDir, name)); err != nil {
					return fmt.Errorf("localenv: %s not found in %s: run `make tools`, or set KUBEBUILDER_ASSETS to a folder with kube-apiserver, etcd and kubectl (see docs/development.md)", name, toolsDir)
				}
			}
			te.BinaryAssetsDirectory = toolsDir
		}
		if opts.IgnoreEnv {
			// Explicit paths: envtest would look at TEST_ASSET_* and
			// KUBEBUILDER_ASSETS first.
			api.Path = filepath.Join(toolsDir, "kube-apiserver")
			etcd.Path = filepath.Join(toolsDir, "etcd")
			te.ControlPlane.KubectlPath = filepath.Join(toolsDir, "kubectl")
		}
		// Data, certificates and logs in our folder: removed by Stop, or by
		// the watchdog when we die.
		apiLog, err := os.Create(filepath.Join(e.Dir, "kube-apiserver.log"))
		if err != nil {
			return err
		}
		defer apiLog.Close() // the child keeps its own descriptor
		etcdLog, err := os.Create(filepath.Join(e.Dir, "etcd.log"))
		if err != nil {
			return err
		}
		defer etcdLog.Close()
		logs = []string{apiLog.Name(), etcdLog.Name()}
		if !strings.EqualFold(getenv("KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT"), "true") {
			api.Out, api.Err = apiLog, apiLog
			etcd.Out, etcd.Err = etcdLog, etcdLog
		}
		for _, d := range []string{api.CertDir, etcd.DataDir} {
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
		}
		if opts.KubeAuditPolicy != "" {
			policy := filepath.Join(e.Dir, "kube-audit-policy.yaml")
			if err := os.WriteFile(policy, []byte(opts.KubeAuditPolicy), 0o600); err != nil {
				return err
			}
			e.KubeAuditLog = filepath.Join(e.Dir, "kube-audit.log")
			// The log is read by byte offset: it must never rotate (the
			// API server's default rotates it at 100 MB, which the scale
			// benchmark passes at 10,000 bindings).
			api.Configure().Set("audit-policy-file", policy).Set("audit-log-path", e.KubeAuditLog).
				Set("audit-log-maxsize", "1048576")
		}
		if e.Node != nil {
			if err := e.Node.configureAPIServer(api); err != nil {
				return err
			}
		}
		te.ControlPlane.APIServer = api
		te.ControlPlane.Etcd = etcd
	}
	e.Kubernetes = te

	type result struct {
		cfg *rest.Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := te.Start()
		done <- result{cfg, err}
	}()
	// envtest cannot be cancelled: wait for it, adopting etcd and the API
	// server as they appear, so that even a start cut short leaves nothing.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var res result
wait:
	for {
		select {
		case res = <-done:
			break wait
		case <-tick.C:
			e.watchdog.adoptChildren(e.Dir + string(filepath.Separator))
		}
	}
	e.watchdog.adoptChildren(e.Dir + string(filepath.Separator))
	if res.err == nil && ctx.Err() != nil {
		res.err = ctx.Err()
	}
	if res.err != nil {
		return fmt.Errorf("localenv: starting the API server and etcd: %w%s", res.err, tails(logs...))
	}
	e.Config = res.cfg
	c, err := client.New(res.cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		return fmt.Errorf("localenv: client: %w", err)
	}
	e.Client = c
	if e.Node != nil {
		if existing {
			return errors.New("localenv: Options.Node starts its own API server, not with USE_EXISTING_CLUSTER")
		}
		timeout := max(2*opts.StartTimeout, 2*time.Minute)
		if err := e.Node.start(ctx, te, c, te.ControlPlane.APIServer.CertDir, timeout); err != nil {
			return err
		}
	}
	return nil
}

// Adopt makes the environment responsible for process group pgid (a
// process started with Setpgid, such as an operator run as its own
// process): Stop kills it, and so does the watchdog should this process die
// first.
func (e *Env) Adopt(pgid int) {
	if e != nil {
		e.watchdog.adopt(pgid)
	}
}

// Stop stops every server Start started and removes Dir. It is safe to call
// more than once and on a partly started Env.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	e.stopOnce.Do(func() {
		var errs []error
		// The node's processes first (they would only complain about the
		// API server going away), its host state last (the API server and
		// Vault listen on the node's address until they are stopped).
		e.Node.kill()
		if e.Kubernetes != nil {
			if err := e.Kubernetes.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping the API server: %w", err))
			}
		}
		if e.Vault != nil {
			if err := e.Vault.stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping vault: %w", err))
			}
		}
		if err := e.Node.stop(); err != nil {
			errs = append(errs, err)
		}
		// Anything a graceful stop left behind goes now; then the watchdog
		// has nothing left to do.
		if e.watchdog != nil {
			e.watchdog.release()
		}
		if err := os.RemoveAll(e.Dir); err != nil {
			errs = append(errs, err)
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// Kill is Stop in a hurry, for an interrupt: no graceful shutdown, every
// server is killed at once and Dir removed.
func (e *Env) Kill() {
	if e == nil {
		return
	}
	e.stopOnce.Do(func() {
		_ = e.Node.stop() // quick: it kills, and undoes the host state
		if e.watchdog != nil {
			e.watchdog.release()
		}
		_ = os.RemoveAll(e.Dir)
	})
}
