package localenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	vaultpolicy "github.com/minionvault/minion-vault-operator/config/vault"
)

// Vault is a Vault server for tests and local runs: a dev server started by Start (in
// memory, unsealed, kv-v2 at secret/), an HA cluster on raft
// (Options.VaultCluster: see Cluster), or an existing one
// (USE_EXISTING_VAULT=true). Either way the AppRole auth method is enabled
// at AppRoleMount.
type Vault struct {
	// Addr is the server's URL, such as http://127.0.0.1:40123; for a
	// cluster, its active-following address (Cluster.Proxy).
	Addr string
	// RootToken is a root token (the dev server's, the cluster's
	// initialisation's, or VAULT_TOKEN).
	RootToken string
	// Client talks to Addr with RootToken.
	Client *vaultapi.Client
	// Log is the dev server's log file (a cluster's first node's; "" for
	// an existing Vault).
	Log string
	// Bin is the server binary started ("" for an existing Vault):
	// VAULT_BIN, or the tools folder's vault.
	Bin string
	// Cluster is the HA cluster behind Addr (nil for a dev server or an
	// existing Vault): its nodes, to kill, restart, unseal or step down.
	Cluster *Cluster

	cmd    *exec.Cmd
	exited chan struct{}
	dir    string // the dev server's working folder
}

// EnableFileAudit enables a file audit device at path name with options
// besides file_path, and returns the files it writes: a dev server's one,
// in its folder; a cluster's one per node, in each node's folder (audit
// devices are replicated configuration, and each node writes its own file
// of the requests it handles as the active node: count all of them).
func (v *Vault) EnableFileAudit(ctx context.Context, name string, options map[string]string) ([]string, error) {
	var files []string
	var path string
	switch {
	case v.Cluster != nil:
		path = name + ".log" // relative: in each node's working folder
		files = v.Cluster.AuditLogs(path)
	case v.dir != "":
		path = filepath.Join(v.dir, name+".log")
		files = []string{path}
	default:
		return nil, errors.New("localenv: a file audit device of an existing Vault: its files are not here")
	}
	opts := map[string]string{"file_path": path}
	for k, val := range options {
		opts[k] = val
	}
	if err := v.Client.Sys().EnableAuditWithOptionsWithContext(ctx, name, &vaultapi.EnableAuditOptions{Type: "file", Options: opts}); err != nil {
		return nil, fmt.Errorf("enabling the file audit device %s: %w", name, err)
	}
	return files, nil
}

// OperatorPolicyName is the name OperatorToken writes the operator's
// policy under.
const OperatorPolicyName = "minionvault-operator"

// OperatorToken returns a new token with exactly the shipped operator
// policy (config/vault/operator-policy.hcl) and not Vault's "default"
// policy, as docs/operations.md has the operator log in in production
// (token_no_default_policy): "default" is templated, and Vault parses a
// templated policy again on every request the token makes.
func (v *Vault) OperatorToken(ctx context.Context) (string, error) {
	return v.token(ctx, OperatorPolicyName, vaultpolicy.OperatorPolicy, true)
}

// TokenWithPolicy writes the ACL policy name with the rules hcl (unless hcl
// is empty: then the policy must exist already) and returns a new token that
// has that policy besides "default". The token is a child of the root token,
// with a TTL of one hour.
func (v *Vault) TokenWithPolicy(ctx context.Context, name, hcl string) (string, error) {
	return v.token(ctx, name, hcl, false)
}

func (v *Vault) token(ctx context.Context, name, hcl string, noDefault bool) (string, error) {
	if hcl != "" {
		if err := v.Client.Sys().PutPolicyWithContext(ctx, name, hcl); err != nil {
			return "", fmt.Errorf("writing policy %s: %w", name, err)
		}
	}
	secret, err := v.Client.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{
		Policies:        []string{name},
		NoDefaultPolicy: noDefault,
		TTL:             "1h",
		DisplayName:     "testenv-" + name,
	})
	if err != nil {
		return "", fmt.Errorf("creating a token with policy %s: %w", name, err)
	}
	if secret == nil || secret.Auth == nil {
		return "", errors.New("creating a token: no auth in the response")
	}
	return secret.Auth.ClientToken, nil
}

// ClientWithToken returns a new client for the same server that uses token.
func (v *Vault) ClientWithToken(token string) (*vaultapi.Client, error) {
	c, err := v.Client.Clone()
	if err != nil {
		return nil, err
	}
	c.SetToken(token)
	return c, nil
}

// startVault starts a dev server, or connects to an existing Vault. getenv
// reads the variables that choose (os.Getenv, or one that knows none).
// host is the address to listen on ("" is 127.0.0.1).
func startVault(ctx context.Context, dir, toolsDir, host string, timeout time.Duration, wd *watchdog, getenv func(string) string) (*Vault, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	if strings.EqualFold(getenv(EnvUseExistingVault), "true") {
		addr, token := os.Getenv(vaultapi.EnvVaultAddress), os.Getenv(vaultapi.EnvVaultToken)
		if addr == "" || token == "" {
			return nil, errors.New("localenv: " + EnvUseExistingVault + "=true needs VAULT_ADDR and VAULT_TOKEN")
		}
		v := &Vault{Addr: addr, RootToken: token}
		if err := v.connect(ctx); err != nil {
			return nil, err
		}
		return v, nil
	}

	bin, err := vaultBinary(toolsDir, getenv)
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "vault-home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}

	var v *Vault
	err = RetryWhilePortTaken(func() error {
		port, err := freePortOn(host)
		if err != nil {
			return err
		}
		v, err = launchVault(ctx, bin, dir, home, host, port, timeout, wd)
		return err
	})
	return v, err
}

// vaultBinary is the Vault server to start: VAULT_BIN (another line's
// build, docs/compatibility.md) or the tools folder's default build.
func vaultBinary(toolsDir string, getenv func(string) string) (string, error) {
	bin := getenv(EnvVaultBin)
	if bin == "" {
		if toolsDir == "" {
			return "", errors.New("localenv: no tools folder: set " + EnvToolsDir + " or " + EnvVaultBin + ", or run inside the repository")
		}
		bin = filepath.Join(toolsDir, "vault")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("localenv: vault not found at %s: run `make tools`, or set %s (see docs/development.md)", bin, EnvVaultBin)
	}
	return bin, nil
}

func launchVault(ctx context.Context, bin, dir, home, host string, port int, timeout time.Duration, wd *watchdog) (*Vault, error) {
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	logPath := filepath.Join(dir, "vault-"+strconv.Itoa(port)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor

	cmd, exited, err := startServer(bin, dir, home, logFile, wd, "server", "-dev",
		"-dev-listen-address="+addr,
		"-dev-root-token-id="+token,
		"-dev-no-store-token",
		"-log-level=info",
	)
	if err != nil {
		return nil, err
	}
	v := &Vault{Addr: "http://" + addr, RootToken: token, Log: logPath, Bin: bin, cmd: cmd, exited: exited, dir: dir}

	if err := v.waitHealthy(ctx, timeout); err != nil {
		_ = v.stop()
		log, _ := os.ReadFile(logPath)
		if bytes.Contains(log, []byte("address already in use")) {
			return nil, fmt.Errorf("localenv: vault on %s: %w", addr, errAddrInUse)
		}
		return nil, fmt.Errorf("localenv: vault dev server on %s: %w%s", addr, err, tails(logPath))
	}
	if err := v.connect(ctx); err != nil {
		_ = v.stop()
		return nil, fmt.Errorf("%w%s", err, tails(logPath))
	}
	return v, nil
}

// startServer starts bin with args in dir, in a process group of its own
// that the watchdog adopts, logging to logFile, with HOME in home (see
// vaultEnv); exited closes when it ends.
func startServer(bin, dir, home string, logFile *os.File, wd *watchdog, args ...string) (*exec.Cmd, chan struct{}, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = vaultEnv(home)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("localenv: starting %s: %w", bin, err)
	}
	wd.adopt(cmd.Process.Pid)
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return cmd, exited, nil
}

// vaultEnv is our environment without VAULT_* variables (they configure the
// CLI and could redirect the server), with HOME in the temporary folder so
// that nothing is written to the real ~/.vault-token.
func vaultEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "VAULT_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home)
}

// waitHealthy polls sys/health until the server is initialised, unsealed
// and active (200), the process exits, or time runs out.
func (v *Vault) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.Addr+"/v1/sys/health", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-v.exited:
			return fmt.Errorf("vault exited: %v", v.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// connect makes the root client and enables AppRole at AppRoleMount.
func (v *Vault) connect(ctx context.Context) error {
	cfg := vaultapi.DefaultConfig()
	if cfg.Error != nil {
		return fmt.Errorf("localenv: vault client config: %w", cfg.Error)
	}
	cfg.Address = v.Addr
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		return fmt.Errorf("localenv: vault client: %w", err)
	}
	c.SetToken(v.RootToken)
	if v.cmd != nil || v.Cluster != nil {
		c.ClearNamespace() // a server of ours has no namespaces, whatever VAULT_NAMESPACE says
	}
	v.Client = c

	auths, err := c.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return fmt.Errorf("localenv: listing vault auth methods: %w", err)
	}
	if m, ok := auths[AppRoleMount+"/"]; ok {
		if m.Type != "approle" {
			return fmt.Errorf("localenv: vault has a %s auth method at %s, not approle", m.Type, AppRoleMount)
		}
		return nil
	}
	if err := c.Sys().EnableAuthWithOptionsWithContext(ctx, AppRoleMount, &vaultapi.EnableAuthOptions{Type: "approle"}); err != nil {
		return fmt.Errorf("localenv: enabling approle at %s: %w", AppRoleMount, err)
	}
	return nil
}

// stop ends a dev server: SIGTERM to its process group, SIGKILL after 10 s
// (a cluster: its proxy, and each node so). An existing Vault is left alone.
func (v *Vault) stop() error {
	if v != nil && v.Cluster != nil {
		v.Cluster.stop()
		return nil
	}
	if v == nil || v.cmd == nil || v.cmd.Process == nil {
		return nil
	}
	pgid := v.cmd.Process.Pid
	select {
	case <-v.exited:
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // leftovers of the group, if any
		return nil
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-v.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-v.exited
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "root-" + hex.EncodeToString(b), nil
}
