//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	vaultpolicy "github.com/minionvault/minion-vault-operator/config/vault"
)

// TestVaultRestartWithLostState: a Vault dev server restarted on the same
// address (the same root token, the operator's token re-created with the
// same ID, so nothing changes on the Kubernetes side) has lost every role,
// entity and policy. The connection's check sees a new cluster ID and the
// AppRole mount's new accessor, and every binding and template of the
// connection is reconciled at once, not at its interval (an hour here).
func TestVaultRestartWithLostState(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	v := startOwnVault(t, s)
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restart", Labels: map[string]string{"team": "conn"}}}))
	s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "restart-token", Namespace: operatorNamespace},
		StringData: map[string]string{"token": v.operatorToken}}))
	conn := tokenConnection("restart-vault", v.addr, "restart-token")
	conn.Spec.CheckInterval = &metav1.Duration{Duration: 5 * time.Second}
	s.must(s.c.Create(ctx, conn))
	tpl := connTemplate("restart", "restart-vault")
	tpl.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{{Name: "salt_role_{pillar[roles]}",
		Rules: []v1alpha1.PolicyRule{{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
	s.must(s.c.Create(ctx, tpl))
	for _, m := range []string{"rs01", "rs02"} {
		b := binding("restart", m, m, map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = "restart"
		s.must(s.c.Create(ctx, b))
	}
	before := map[string]string{}
	for _, m := range []string{"rs01", "rs02"} {
		before[m] = s.waitReady("restart", m).Status.Entity.ID
	}
	eventually(t, 30*time.Second, "policy written", func() error {
		if p, _ := v.root.Sys().GetPolicy("salt_role_web"); p == "" {
			return fmt.Errorf("no policy")
		}
		return nil
	})
	// The connection's first check has recorded the Vault that is about to
	// lose everything: bindings do not wait for it, the event does.
	oldConn := &v1alpha1.VaultConnection{}
	eventually(t, 30*time.Second, "the connection's status naming its Vault", func() error {
		if err := s.c.Get(ctx, types.NamespacedName{Name: "restart-vault"}, oldConn); err != nil {
			return err
		}
		if oldConn.Status.ClusterID == "" || oldConn.Status.Identity == "" {
			return fmt.Errorf("cluster ID %q, identity %q", oldConn.Status.ClusterID, oldConn.Status.Identity)
		}
		return nil
	})

	v.restart(t)
	restarted := time.Now()
	if r, _ := v.root.Logical().Read("auth/salt-minions/role/rs01"); r != nil {
		t.Fatal("the restarted Vault still has the role: nothing was lost")
	}
	eventually(t, 60*time.Second, "everything re-created", func() error {
		for _, m := range []string{"rs01", "rs02"} {
			if r, err := v.root.Logical().Read("auth/salt-minions/role/" + m); err != nil || r == nil {
				return fmt.Errorf("role %s: %v", m, err)
			}
			e, err := v.root.Logical().Read("identity/entity/name/salt_minion_" + m)
			if err != nil || e == nil || len(e.Data["aliases"].([]any)) != 1 {
				return fmt.Errorf("entity %s: %v %v", m, e, err)
			}
			b := s.binding("restart", m)
			if b.Status.Entity == nil || b.Status.Entity.ID != e.Data["id"] || !isReady(b) {
				return fmt.Errorf("status of %s: %+v %+v", m, b.Status.Entity, b.Status.Conditions)
			}
		}
		if p, _ := v.root.Sys().GetPolicy("salt_role_web"); p == "" {
			return fmt.Errorf("no policy")
		}
		return nil
	})
	t.Logf("Vault restarted with nothing: roles, entities, aliases, policy and status back %s later (checkInterval 5s, template interval 1h)",
		time.Since(restarted).Round(100*time.Millisecond))
	for _, m := range []string{"rs01", "rs02"} {
		if after := s.binding("restart", m).Status.Entity.ID; after == before[m] {
			t.Errorf("%s: status still names the lost entity %s", m, after)
		}
	}
	newConn := &v1alpha1.VaultConnection{}
	s.must(s.c.Get(ctx, types.NamespacedName{Name: "restart-vault"}, newConn))
	if newConn.Status.ClusterID == oldConn.Status.ClusterID || newConn.Status.Identity == oldConn.Status.Identity {
		t.Errorf("cluster ID %s -> %s, identity %s -> %s", oldConn.Status.ClusterID, newConn.Status.ClusterID, oldConn.Status.Identity, newConn.Status.Identity)
	}
	// client-go delivers events best-effort: a create that fails is
	// retried every 10 s or so, and its broadcaster drops what comes while
	// 1,000 events wait to be sent (this suite's 1,000-binding tests queue
	// that many). The operator logs every event it emits: the emission is
	// what this test asks of the operator, the delivery client-go's.
	if err := s.eventIn(time.Minute, "restart-vault", "VaultChanged"); err != nil {
		if !emittedFor("restart-vault", "VaultChanged") {
			t.Errorf("the operator did not emit VaultChanged for restart-vault: %v", err)
		} else {
			t.Logf("VaultChanged for restart-vault emitted (operator log), not delivered: %v", err)
		}
	}
}

// ownVault is a Vault dev server of one test, restartable on its address.
type ownVault struct {
	addr, rootToken, operatorToken string
	bin, dir                       string
	port                           int
	cmd                            *exec.Cmd
	root                           *vaultapi.Client
}

func startOwnVault(t *testing.T, s *suite) *ownVault {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	v := &ownVault{
		addr: "http://127.0.0.1:" + strconv.Itoa(port), port: port, dir: dir,
		rootToken: "restart-root", operatorToken: "restart-operator-token",
		bin: filepath.Join(toolsDir(t), "vault"),
	}
	v.launch(t)
	t.Cleanup(v.kill)
	return v
}

// launch starts the server and gives it what the suite's Vault has: the
// AppRole mount, the operator policy, and the operator's token (same ID).
func (v *ownVault) launch(t *testing.T) {
	t.Helper()
	log, err := os.Create(filepath.Join(v.dir, fmt.Sprintf("vault-%d.log", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	v.cmd = exec.Command(v.bin, "server", "-dev", "-dev-listen-address=127.0.0.1:"+strconv.Itoa(v.port),
		"-dev-root-token-id="+v.rootToken, "-dev-no-store-token")
	v.cmd.Env = append(os.Environ(), "HOME="+v.dir)
	v.cmd.Stdout, v.cmd.Stderr = log, log
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := v.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(v.addr + "/v1/sys/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("vault on %s did not start", v.addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.addr
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(v.rootToken)
	c.ClearNamespace()
	v.root = c
	must(t, c.Sys().EnableAuthWithOptions("salt-minions", &vaultapi.EnableAuthOptions{Type: "approle"}))
	must(t, c.Sys().PutPolicy("minionvault-operator", vaultpolicy.OperatorPolicy))
	_, err = c.Logical().Write("auth/token/create", map[string]any{
		"id": v.operatorToken, "policies": []string{"minionvault-operator"}, "no_default_policy": true, "ttl": "1h",
	})
	must(t, err)
}

func (v *ownVault) kill() {
	if v.cmd != nil && v.cmd.Process != nil {
		_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
		_ = v.cmd.Wait()
	}
}

// restart loses everything: a dev server keeps its state in memory.
func (v *ownVault) restart(t *testing.T) {
	t.Helper()
	v.kill()
	v.launch(t)
}

// toolsDir is where the test servers' binaries are (see internal/localenv).
func toolsDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("MINIONVAULT_TOOLS_DIR"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..", "bin")
}
