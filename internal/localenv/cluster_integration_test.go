//go:build integration

package localenv

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCluster starts a three-node raft cluster from the tools' vault and
// disturbs it as the HA tests do: the proxy follows the active node
// through a SIGKILL, a restart that comes back sealed, its unseal and a
// step-down; what was written through the proxy survives each; every node
// writes its own file of the replicated file audit device.
func TestCluster(t *testing.T) {
	ctx := context.Background()
	env, err := Start(ctx, Options{NoKubernetes: true, VaultCluster: ClusterOptions{Nodes: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	v, c := env.Vault, env.Vault.Cluster
	if c == nil || len(c.Nodes) != 3 || c.ClusterID == "" {
		t.Fatalf("cluster %+v", c)
	}
	auths, err := v.Client.Sys().ListAuth()
	if err != nil || auths[AppRoleMount+"/"] == nil {
		t.Fatalf("auth methods %v, %v: want approle at %s", auths, err, AppRoleMount)
	}
	files, err := v.EnableFileAudit(ctx, "audit", map[string]string{"hmac_accessor": "false"})
	if err != nil {
		t.Fatal(err)
	}
	token, err := v.OperatorToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write := func(key string) {
		t.Helper()
		if _, err := v.Client.Logical().Write("secret/data/"+key, map[string]any{"data": map[string]any{"v": key}}); err != nil {
			t.Fatalf("writing %s: %v", key, err)
		}
	}
	read := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			s, err := v.Client.Logical().Read("secret/data/" + k)
			if err != nil || s == nil {
				t.Fatalf("reading %s through the proxy: %v, %v", k, s, err)
			}
		}
	}
	write("one")

	// SIGKILL the active node.
	first, err := c.Active(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.Active() != first {
		t.Fatalf("proxy on %d, active %d", c.Proxy.Active(), first)
	}
	killed, err := c.Kill(first)
	if err != nil {
		t.Fatal(err)
	}
	second, at, err := c.WaitActive(ctx, time.Minute, first)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL of %s: %s active %s later", c.Nodes[first].ID, c.Nodes[second].ID, at.Sub(killed).Round(time.Millisecond))
	if _, err := c.Proxy.WaitActive(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Proxy.Active() != second && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if c.Proxy.Active() != second {
		t.Fatalf("proxy on %d, active %d", c.Proxy.Active(), second)
	}
	read("one")
	write("two")
	// The operator's token, made before the kill, works on the new active node.
	oc, err := v.ClientWithToken(token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oc.Auth().Token().LookupSelf(); err != nil {
		t.Fatalf("the operator's token after the failover: %v", err)
	}

	// The killed node comes back sealed, and stays so until unsealed.
	if err := c.Restart(ctx, first, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if st := c.Health(ctx, first); st != NodeSealed {
		t.Fatalf("%s restarted: %s, want sealed", c.Nodes[first].ID, st)
	}
	if err := c.Unseal(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A standby forwards to the active node: read through the restarted one.
	nc, err := c.Client(first)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := nc.Logical().Read("secret/data/two"); err != nil || s == nil {
		t.Fatalf("reading through the restarted standby: %v, %v", s, err)
	}

	// A step-down.
	down, _, err := c.StepDown(ctx)
	if err != nil {
		t.Fatal(err)
	}
	third, _, err := c.WaitActive(ctx, time.Minute, down)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("step-down of %s: %s active", c.Nodes[down].ID, c.Nodes[third].ID)
	deadline = time.Now().Add(10 * time.Second)
	for c.Proxy.Active() != third && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if c.Proxy.Active() != third {
		t.Fatalf("proxy on %d after the step-down, active %d", c.Proxy.Active(), third)
	}
	read("one", "two")
	write("three")

	// Each node that was active wrote its own audit file.
	wrote := 0
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "secret/data/") {
			wrote++
		}
	}
	if wrote < 2 {
		t.Errorf("%d of the audit files %v have the writes: want one per node that was active", wrote, files)
	}
	t.Logf("proxy switches %+v", c.Proxy.Switches())
}
