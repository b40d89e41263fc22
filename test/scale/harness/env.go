//go:build integration

package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

// The Kubernetes users whose requests the API server's audit log records.
const (
	operatorUser = "minionvault-operator"
	floorUser    = "scale-floor"
)

// servers are the labels of the server processes whose CPU is reported,
// by executable name.
var servers = map[string]string{"kube-apiserver": "apiserver", "etcd": "etcd", "vault": "vault"}

// world is one environment set up for a run: the servers with their audit
// logs, the operator's and the floor's credentials, and the clients.
type world struct {
	env *localenv.Env
	// admin creates and changes the bindings and the template (the user),
	// without client-side rate limits; floorClient is the floor's own user.
	admin, floorClient client.Client
	adminCfg           *rest.Config
	// apiserver is a REST client of the API server as the admin, for its
	// own endpoints (/metrics, /debug/pprof).
	apiserver        rest.Interface
	root, floorVault *vaultapi.Client
	// kubeconfig of the operator's own user.
	kubeconfig string
	// vaultAudit are the files of Vault's file audit device: one per
	// node of an HA cluster.
	vaultAudit auditLogs
	// accessors maps the Vault token accessors to the actor, users the
	// Kubernetes user names.
	accessors, users map[string]string
	pids             map[string]int
}

// setUp starts the servers and prepares everything but the operator.
func setUp(ctx context.Context) (w *world, err error) {
	return setUpWith(ctx, localenv.ClusterOptions{})
}

// setUpWith is setUp with Vault an HA cluster when cluster has nodes (the
// connection then reaches its active-following address).
func setUpWith(ctx context.Context, cluster localenv.ClusterOptions) (w *world, err error) {
	env, err := localenv.Start(ctx, localenv.Options{
		// The measure needs servers of our own: no USE_EXISTING_*.
		IgnoreEnv:       true,
		KubeAuditPolicy: kubeAuditPolicy(operatorUser, floorUser),
		VaultCluster:    cluster,
	})
	if err != nil {
		return nil, err
	}
	w = &world{env: env, root: env.Vault.Client}
	defer func() {
		if err != nil {
			_ = env.Stop()
		}
	}()

	// Vault: a file audit device with the accessors in clear, the floor's
	// AppRole mount, and the two tokens.
	files, err := env.Vault.EnableFileAudit(ctx, "vault-audit", map[string]string{"hmac_accessor": "false"})
	if err != nil {
		return nil, fmt.Errorf("enabling the vault audit log: %w", err)
	}
	w.vaultAudit = files
	if err := w.root.Sys().EnableAuthWithOptionsWithContext(ctx, floorMount, &vaultapi.EnableAuthOptions{Type: "approle"}); err != nil {
		return nil, fmt.Errorf("enabling approle at %s: %w", floorMount, err)
	}
	opToken, err := env.Vault.OperatorToken(ctx)
	if err != nil {
		return nil, err
	}
	opAccessor, err := accessorOf(ctx, w.root, opToken)
	if err != nil {
		return nil, err
	}
	floorTok, err := w.root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{
		Policies: []string{"root"}, TTL: "24h", DisplayName: "scale-floor",
	})
	if err != nil {
		return nil, fmt.Errorf("creating the floor's token: %w", err)
	}
	w.accessors = map[string]string{opAccessor: "operator", floorTok.Auth.Accessor: "floor"}
	cfg := vaultapi.DefaultConfig()
	cfg.Address = env.Vault.Addr
	if tr, ok := cfg.HttpClient.Transport.(*http.Transport); ok {
		tr.MaxIdleConnsPerHost = 32 // the floor's workers keep their connections
	}
	if w.floorVault, err = vaultapi.NewClient(cfg); err != nil {
		return nil, err
	}
	w.floorVault.SetToken(floorTok.Auth.ClientToken)

	// Kubernetes: the operator's and the floor's users, both cluster
	// admins (the measure is about calls, not RBAC).
	w.users = map[string]string{operatorUser: "operator", floorUser: "floor"}
	opUser, err := env.Kubernetes.AddUser(envtest.User{Name: operatorUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding the operator's user: %w", err)
	}
	kc, err := opUser.KubeConfig()
	if err != nil {
		return nil, err
	}
	w.kubeconfig = filepath.Join(env.Dir, "operator.kubeconfig")
	if err := os.WriteFile(w.kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	flUser, err := env.Kubernetes.AddUser(envtest.User{Name: floorUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding the floor's user: %w", err)
	}
	fl, err := client.New(unthrottled(flUser.Config()), client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	// A field manager of its own, as the operator has: with the default
	// (the binary's name, the creator's too) the API server merged the
	// floor's record patch into the creator's managedFields entry, and the
	// floor's bindings were lighter than the operator's.
	w.floorClient = client.WithFieldOwner(fl, "scale-floor")
	w.adminCfg = unthrottled(env.Config)
	dc, err := discovery.NewDiscoveryClientForConfig(w.adminCfg)
	if err != nil {
		return nil, fmt.Errorf("the API server's client: %w", err)
	}
	w.apiserver = dc.RESTClient()
	if w.admin, err = client.New(w.adminCfg, client.Options{Scheme: env.Scheme}); err != nil {
		return nil, err
	}

	for _, ns := range []string{operatorNamespace, bindingNamespace, floorNamespace} {
		if err := w.admin.Create(ctx, namespace(ns)); err != nil {
			return nil, err
		}
	}
	secret := &corev1.Secret{}
	secret.Namespace, secret.Name = operatorNamespace, tokenSecret
	secret.StringData = map[string]string{"token": opToken}
	if err := w.admin.Create(ctx, secret); err != nil {
		return nil, err
	}
	if err := w.admin.Create(ctx, tokenConnection(env.Vault.Addr)); err != nil {
		return nil, err
	}
	names := servers
	if cluster.Nodes > 0 {
		// Several vault processes, each restarted under a new PID by the
		// HA runs: their CPU is not followed.
		names = map[string]string{}
		for exe, label := range servers {
			if label != "vault" {
				names[exe] = label
			}
		}
	}
	if w.pids, err = serverPIDs(env.Dir, names); err != nil {
		return nil, err
	}
	return w, nil
}

func accessorOf(ctx context.Context, root *vaultapi.Client, token string) (string, error) {
	sec, err := root.Auth().Token().LookupWithContext(ctx, token)
	if err != nil {
		return "", fmt.Errorf("looking up a token: %w", err)
	}
	acc, _ := sec.Data["accessor"].(string)
	if acc == "" {
		return "", fmt.Errorf("token lookup: no accessor")
	}
	return acc, nil
}

// unthrottled is cfg without client-side rate limiting: the harness's
// creators are bounded by their number, not by client-go's default 5 QPS.
func unthrottled(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	return c
}
