// Package devenv is `minionvault dev`: the local quickstart. It starts a
// kube-apiserver with etcd and a Vault dev server on loopback (through
// internal/localenv), installs the CRDs, gives the operator a Vault token
// with exactly config/vault/operator-policy.hcl, applies the sample
// manifests, runs the operator in this process, waits until every object is
// Ready and prints what is now in Kubernetes and in Vault.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/config/crd"
	vaultpolicy "github.com/minionvault/minion-vault-operator/config/vault"
	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

// OperatorPolicyName is the name under which the operator's policy is written.
const OperatorPolicyName = "minionvault-operator"

// FieldOwner is the server-side apply field manager of the samples.
const FieldOwner = "minionvault-dev"

// Tools are the binaries the quickstart needs from the tools folder; kubectl
// is only for exploring afterwards.
var Tools = []string{"kube-apiserver", "etcd", "vault"}

// Config configures a Runner.
type Config struct {
	// Out receives the progress lines and the report.
	Out io.Writer
	// ToolsDir holds kube-apiserver, etcd, vault (and kubectl).
	ToolsDir string
	// StateDir receives the kubeconfig, operator.log and the servers'
	// temporary folders.
	StateDir string
	// Samples are the manifests to apply (see LoadManifests); SamplesName
	// says where they come from.
	Samples     fs.FS
	SamplesName string
	// Timeout bounds the start: from the first server to every object Ready.
	Timeout time.Duration
	// Once stops everything after the report instead of running until ctx ends.
	Once bool
	// LogPath is the file the caller sends the operator's and the clients'
	// logs to; Run only shows it.
	LogPath string
	// Operator runs the operator against cfg until ctx ends; it returns an
	// error if it cannot start or fails.
	Operator func(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) error
	// Hint is how to build missing tools, for the error message
	// (such as "make tools").
	Hint string
}

// Runner runs the quickstart once.
type Runner struct {
	cfg Config

	mu   sync.Mutex
	envs []*localenv.Env

	shown *v1alpha1.MinionBinding // the binding the report details
}

// New returns a Runner for cfg.
func New(cfg Config) *Runner {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Minute
	}
	return &Runner{cfg: cfg}
}

// MissingTools returns the tools in Tools that dir lacks.
func MissingTools(dir string) []string {
	var missing []string
	for _, t := range Tools {
		if st, err := os.Stat(filepath.Join(dir, t)); err != nil || st.IsDir() {
			missing = append(missing, t)
		}
	}
	return missing
}

// ErrInterrupted is returned by Run when ctx ended before everything was Ready.
var ErrInterrupted = errors.New("interrupted")

// Kill stops every server at once (a second Ctrl-C).
func (r *Runner) Kill() {
	r.mu.Lock()
	envs := slices.Clone(r.envs)
	r.mu.Unlock()
	for _, e := range envs {
		e.Kill()
	}
}

func (r *Runner) track(e *localenv.Env) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.envs = append(r.envs, e)
}

// step prints "▸ what … " and returns a function that ends the line with
// "done (1.2s)" or the error's first word.
func (r *Runner) step(format string, args ...any) func(err error, note string) {
	start := time.Now()
	fmt.Fprintf(r.cfg.Out, "▸ "+format+" … ", args...)
	return func(err error, note string) {
		d := time.Since(start)
		switch {
		case err == nil:
			fmt.Fprintf(r.cfg.Out, "done (%.1fs)%s\n", d.Seconds(), note)
		case errors.Is(err, context.Canceled) || errors.Is(err, ErrInterrupted):
			fmt.Fprintf(r.cfg.Out, "interrupted (%.1fs)\n", d.Seconds())
		default:
			fmt.Fprintf(r.cfg.Out, "failed (%.1fs)\n", d.Seconds())
		}
	}
}

// Run runs the quickstart: start, wait for Ready, report, then (without
// Once) keep the operator running until ctx ends, and stop everything. It
// returns nil after a clean stop, ErrInterrupted (wrapped) when ctx ended
// during the start.
func (r *Runner) Run(ctx context.Context) (err error) {
	c := r.cfg
	if missing := MissingTools(c.ToolsDir); len(missing) > 0 {
		return fmt.Errorf("%s missing in %s: build them with `%s` (the first time takes 20 to 40 minutes; later runs reuse them), or point --tools-dir at a folder that has them",
			strings.Join(missing, ", "), c.ToolsDir, c.Hint)
	}
	objs, err := LoadManifests(c.Samples)
	if err != nil {
		return fmt.Errorf("samples %s: %w", c.SamplesName, err)
	}
	crds, err := embeddedCRDs()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return err
	}

	fmt.Fprintf(c.Out, "minionvault dev: a local kube-apiserver + etcd and Vault dev server, the operator, and the samples from %s\n", c.SamplesName)
	fmt.Fprintf(c.Out, "  tools %s, state %s (Ctrl-C stops everything)\n", display(c.ToolsDir), display(c.StateDir))

	startCtx, cancelStart := context.WithTimeout(ctx, c.Timeout)
	defer cancelStart()
	timedOut := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %v", ErrInterrupted, err)
		}
		if startCtx.Err() != nil {
			return fmt.Errorf("not started within --timeout %s: %w", c.Timeout, err)
		}
		return err
	}

	// Everything started is stopped on the way out, the servers last.
	var stops []func()
	var started []string // what to name when stopping
	defer func() {
		if len(stops) == 0 {
			return
		}
		slices.Reverse(started)
		done := r.step("stopping %s", joinAnd(started))
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		done(nil, "")
		fmt.Fprintln(c.Out, "stopped")
	}()
	opts := localenv.Options{ToolsDir: c.ToolsDir, IgnoreEnv: true, TempParent: c.StateDir, StartTimeout: c.Timeout}

	// Vault.
	done := r.step("starting the Vault dev server")
	vopts := opts
	vopts.NoKubernetes = true
	venv, err := localenv.Start(startCtx, vopts)
	if err != nil {
		done(err, "")
		return timedOut(err)
	}
	r.track(venv)
	stops = append(stops, func() { _ = venv.Stop() })
	started = append(started, "Vault")
	vault := venv.Vault
	done(nil, " "+vault.Addr)

	// Kubernetes.
	done = r.step("starting etcd + kube-apiserver and installing the CRDs")
	kopts := opts
	kopts.NoVault = true
	kopts.CRDs = crds
	kenv, err := localenv.Start(startCtx, kopts)
	if err != nil {
		done(err, "")
		return timedOut(err)
	}
	r.track(kenv)
	stops = append(stops, func() { _ = kenv.Stop() })
	started = append(started, "kube-apiserver + etcd")
	done(nil, " "+kenv.Config.Host)

	kubeconfig := filepath.Join(c.StateDir, "kubeconfig")
	if err := writeKubeconfig(kenv.Kubernetes, kubeconfig); err != nil {
		return err
	}
	stops = append(stops, func() { _ = os.Remove(kubeconfig) }) // it would point at a server that is gone

	// The operator's Vault token, in the Secrets the VaultConnections read.
	kc := kenv.Client
	secrets, otherAuth := TokenSecrets(objs)
	done = r.step("writing Vault policy %s (config/vault/operator-policy.hcl) and a token with it into %s", OperatorPolicyName, secretNames(secrets))
	if err := r.operatorToken(startCtx, kc, vault.Client, secrets); err != nil {
		done(err, "")
		return timedOut(err)
	}
	done(nil, "")
	if len(otherAuth) > 0 {
		fmt.Fprintf(c.Out, "  note: VaultConnection %s does not log in with a token; the local Vault only has a token for it to use\n", strings.Join(otherAuth, ", "))
	}

	// The samples.
	rewritten, err := RewriteVaultAddress(objs, vault.Addr)
	if err != nil {
		return err
	}
	done = r.step("applying %d objects from %s", len(objs), c.SamplesName)
	if err := applyAll(startCtx, kc, objs); err != nil {
		done(err, "")
		return timedOut(err)
	}
	note := ""
	if len(rewritten) > 0 {
		note = fmt.Sprintf("; VaultConnection %s: spec.address = %s", strings.Join(rewritten, ", "), vault.Addr)
	}
	done(nil, note)

	// The operator.
	done = r.step("starting the operator (log: %s)", display(c.LogPath))
	opCtx, stopOperator := context.WithCancel(context.Background())
	opDone := make(chan error, 1)
	go func() { opDone <- c.Operator(opCtx, kenv.Config, kenv.Scheme) }()
	stops = append(stops, func() {
		stopOperator()
		select {
		case <-opDone:
		case <-time.After(20 * time.Second):
			fmt.Fprintln(c.Out, "  the operator did not stop within 20 s; stopping the servers anyway")
		}
	})
	started = append(started, "the operator")
	done(nil, "")

	// Ready.
	done = r.step("waiting until %s are Ready", summary(objs))
	if err := waitReady(startCtx, kc, objs, opDone); err != nil {
		done(err, "")
		return timedOut(err)
	}
	done(nil, "")

	// The report.
	fmt.Fprintln(c.Out)
	if err := r.report(ctx, kenv.Config, kc, vault, objs); err != nil {
		return err
	}

	if c.Once {
		fmt.Fprintln(c.Out, "(--once: stopping everything; run without --once to keep the servers and the operator running and explore them)")
		return nil
	}
	r.explore(kubeconfig, vault)
	fmt.Fprintln(c.Out, "Ready: the operator keeps reconciling until Ctrl-C.")
	select {
	case <-ctx.Done():
		return nil
	case err := <-opDone:
		opDone <- err // for the stop above
		return fmt.Errorf("the operator stopped: %v (see %s)", err, display(c.LogPath))
	}
}

func secretNames(s []TokenSecret) string {
	var names []string
	for _, t := range s {
		names = append(names, fmt.Sprintf("Secret %s/%s (key %s)", t.Namespace, t.Name, t.Key))
	}
	if len(names) == 0 {
		return "no Secret (no VaultConnection uses token auth)"
	}
	return strings.Join(names, ", ")
}

func summary(objs []Object) string {
	counts := map[string]int{}
	var kinds []string
	for _, o := range objs {
		if kindRank(o.Unstructured) == 0 {
			continue
		}
		k := o.GetKind()
		if counts[k] == 0 {
			kinds = append(kinds, k)
		}
		counts[k]++
	}
	var parts []string
	for _, k := range kinds {
		if counts[k] == 1 {
			for _, o := range objs {
				if o.GetKind() == k {
					parts = append(parts, k+" "+o.GetName())
				}
			}
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %ss", counts[k], k))
	}
	if len(parts) == 0 {
		return "the objects"
	}
	return joinAnd(parts)
}

// joinAnd joins "a, b and c".
func joinAnd(parts []string) string {
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func embeddedCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := fs.ReadFile(crd.Bases, f)
		if err != nil {
			return nil, err
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, c); err != nil {
			return nil, fmt.Errorf("embedded CRD %s: %w", f, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no CRDs embedded in the binary")
	}
	return out, nil
}

// writeKubeconfig writes a kubeconfig of an administrator (system:masters)
// of the local API server.
func writeKubeconfig(te *envtest.Environment, path string) error {
	user, err := te.AddUser(envtest.User{Name: "minionvault-dev-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	return os.WriteFile(path, data, 0o600)
}

// operatorToken writes the operator's policy, makes a token with it and
// stores the token in each Secret.
func (r *Runner) operatorToken(ctx context.Context, kc client.Client, root *vaultapi.Client, secrets []TokenSecret) error {
	if err := root.Sys().PutPolicyWithContext(ctx, OperatorPolicyName, vaultpolicy.OperatorPolicy); err != nil {
		return fmt.Errorf("writing policy %s: %w", OperatorPolicyName, err)
	}
	if len(secrets) == 0 {
		return nil
	}
	sec, err := root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{
		Policies: []string{OperatorPolicyName},
		// As in production (docs/operations.md): Vault parses its templated
		// "default" policy again on every request of a token that has it.
		NoDefaultPolicy: true,
		TTL:             "24h",
		DisplayName:     "minionvault-dev-operator",
	})
	if err != nil {
		return fmt.Errorf("creating the operator's token: %w", err)
	}
	if sec == nil || sec.Auth == nil {
		return errors.New("creating the operator's token: no auth in the response")
	}
	for _, s := range secrets {
		if err := ensureNamespace(ctx, kc, s.Namespace); err != nil {
			return err
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
			StringData: map[string]string{s.Key: sec.Auth.ClientToken},
		}
		if err := kc.Create(ctx, secret); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

func ensureNamespace(ctx context.Context, kc client.Client, name string) error {
	if name == "" {
		return nil
	}
	err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// applyAll server-side applies the objects, creating their namespaces.
func applyAll(ctx context.Context, kc client.Client, objs []Object) error {
	for _, o := range objs {
		if err := ensureNamespace(ctx, kc, o.GetNamespace()); err != nil {
			return err
		}
		u := o.DeepCopy()
		if err := kc.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s (%s): %w", o.Ref(), o.File, err)
		}
	}
	return nil
}

// waitReady polls until every object of this project's API is Ready for its
// current generation, ctx ends (the error names what is not Ready and why)
// or the operator stops.
func waitReady(ctx context.Context, kc client.Client, objs []Object, opDone chan error) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var notReady []string
		for _, o := range objs {
			if kindRank(o.Unstructured) == 0 {
				continue
			}
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err := kc.Get(ctx, client.ObjectKeyFromObject(o.Unstructured), cur); err != nil {
				notReady = append(notReady, fmt.Sprintf("%s: %v", o.Ref(), err))
				continue
			}
			if ok, why := Readiness(cur); !ok {
				notReady = append(notReady, o.Ref()+": "+why)
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; not Ready: %s", ctx.Err(), strings.Join(notReady, "; "))
		case err := <-opDone:
			opDone <- err
			return fmt.Errorf("the operator stopped: %v", err)
		case <-tick.C:
		}
	}
}
