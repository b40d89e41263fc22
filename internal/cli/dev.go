package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/minionvault/minion-vault-operator/config/samples"
	"github.com/minionvault/minion-vault-operator/internal/devenv"
	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

// DevOptions are the flags of `minionvault dev`.
type DevOptions struct {
	Once     bool
	Samples  string
	ToolsDir string
	StateDir string
	Timeout  time.Duration
}

func newDevCmd(stdout io.Writer) *cobra.Command {
	o := DevOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "The local quickstart: kube-apiserver + etcd and Vault on loopback, the operator, and the samples, until Ctrl-C",
		Long: `dev starts a local kube-apiserver with etcd and a Vault dev server on
loopback (from the tools 'make tools' builds), installs the CRDs, gives the
operator a Vault token with exactly config/vault/operator-policy.hcl, applies
the sample manifests (the VaultConnection pointed at the local Vault), runs
the operator in this process, waits until everything is Ready, and prints the
MinionBindings and what the operator wrote to Vault, with a kubeconfig and
the Vault address to explore further. It runs until Ctrl-C (or SIGTERM),
then stops every server; --once stops right after printing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(stdout, o, cmd.Flags().Changed("samples"))
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Once, "once", false, "stop everything after printing the result")
	f.StringVar(&o.Samples, "samples", "config/samples", "folder of manifests to apply (its kustomization.yaml's resources, else every *.yaml); default: the repository's config/samples, or the copy built into the binary outside the repository")
	f.StringVar(&o.ToolsDir, "tools-dir", "", "folder with kube-apiserver, etcd and vault, and kubectl if built (default: $"+localenv.EnvToolsDir+", else bin/ at the repository root)")
	f.StringVar(&o.StateDir, "state-dir", "", "folder for the kubeconfig, operator.log and the servers' files (default: .cache/dev at the repository root, else minionvault-dev in the temporary folder)")
	f.DurationVar(&o.Timeout, "timeout", 3*time.Minute, "how long the start may take, from the first server to every object Ready")
	return cmd
}

func runDev(stdout io.Writer, o DevOptions, samplesSet bool) error {
	root, _ := localenv.ModuleRoot()
	cfg := devenv.Config{Out: stdout, Once: o.Once, Timeout: o.Timeout, Operator: devOperator}

	// Tools.
	cfg.ToolsDir = o.ToolsDir
	if cfg.ToolsDir == "" {
		cfg.ToolsDir = os.Getenv(localenv.EnvToolsDir)
	}
	cfg.Hint = "make tools"
	if root != "" {
		if wd, _ := os.Getwd(); wd != root {
			cfg.Hint = "make -C " + root + " tools"
		}
		if cfg.ToolsDir == "" {
			cfg.ToolsDir = filepath.Join(root, "bin")
		}
	} else {
		cfg.Hint = "make tools in a clone of the repository, then pass --tools-dir <clone>/bin"
	}
	if cfg.ToolsDir == "" {
		return errors.New("no tools folder: outside the repository, pass --tools-dir (or set " + localenv.EnvToolsDir + ") to a folder with kube-apiserver, etcd and vault, as `make tools` builds them")
	}

	// Samples: the folder given, the repository's, or the built-in copy.
	switch {
	case samplesSet:
		if st, err := os.Stat(o.Samples); err != nil || !st.IsDir() {
			return fmt.Errorf("--samples %s: not a folder", o.Samples)
		}
		cfg.Samples, cfg.SamplesName = os.DirFS(o.Samples), o.Samples
	case root != "":
		dir := filepath.Join(root, "config", "samples")
		cfg.Samples, cfg.SamplesName = os.DirFS(dir), shortPath(dir)
	default:
		cfg.Samples, cfg.SamplesName = fs.FS(samples.FS), "config/samples (built in)"
	}

	// State and logs.
	cfg.StateDir = o.StateDir
	if cfg.StateDir == "" {
		if root != "" {
			cfg.StateDir = filepath.Join(root, ".cache", "dev")
		} else {
			cfg.StateDir = filepath.Join(os.TempDir(), "minionvault-dev")
		}
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return err
	}
	cfg.LogPath = filepath.Join(cfg.StateDir, "operator.log")
	logFile, err := os.Create(cfg.LogPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	logger := zap.New(zap.WriteTo(logFile))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	// Ctrl-C or SIGTERM stops everything; a second one kills the servers
	// and exits at once.
	r := devenv.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := localenv.OnInterrupt(func(sig os.Signal) bool {
		fmt.Fprintf(stdout, "\n%v: stopping everything (again to kill at once)\n", sig)
		cancel()
		return true
	}, func(sig os.Signal) {
		r.Kill()
		fmt.Fprintf(stdout, "\n%v: killed the servers\n", sig)
		os.Exit(130)
	})
	defer stop()

	err = r.Run(ctx)
	if errors.Is(err, devenv.ErrInterrupted) {
		return exitError{130}
	}
	return err
}

// devOperator runs the operator as `minionvault operator` does, without
// metrics, probes or leader election.
func devOperator(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) error {
	// The samples keep the connection's Secret where config/default
	// installs the operator.
	cacheOpts, err := CacheOptions(OperatorOptions{SecretNamespace: DefaultSecretNamespace})
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache:                  cacheOpts,
		Client:                 ClientOptions(),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := Setup(ctx, mgr, SetupOptions{Concurrency: 4, Interval: time.Hour, SecretNamespace: DefaultSecretNamespace}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// shortPath is path relative to the working directory when below it.
func shortPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != "../") {
		return rel
	}
	return path
}
