//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// previousRelease is the commit before owner markers: the upgrade test
// runs its operator, then this one.
const previousRelease = "b8998a2"

// buildPrevious builds previousRelease's minionvault from this
// repository's history (git archive: no work tree or worktree metadata is
// touched) with the module cache the suite already has.
func buildPrevious(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	must(t, err)
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the upgrade test needs commit %s in this clone's history (a full clone, not a shallow one): %v %s", previousRelease, err, out)
	}
	dir := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$0" archive "$1" | tar -x -C "$2"`, root, previousRelease, dir)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v %s", previousRelease, err, out)
	}
	bin := filepath.Join(dir, "minionvault-previous")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/minionvault")
	build.Dir = dir
	// The caller's GOFLAGS too: make's compile settings, so that the
	// dependencies this release shares with the current one compile once.
	build.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=readonly"))
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v %s", previousRelease, err, out)
	}
	t.Logf("built the operator of %s in %s", previousRelease, time.Since(start).Round(time.Second))
	return bin
}

// buildCurrent builds this tree's minionvault, to run as its own process.
func buildCurrent(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	must(t, err)
	bin := filepath.Join(t.TempDir(), "minionvault")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/minionvault")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building minionvault: %v %s", err, out)
	}
	return bin
}

// runPrevious runs the previous release's operator as its own process
// until the returned stop is called.
func (s *suite) runPrevious(t *testing.T, bin string) func() {
	t.Helper()
	return s.runProcess(t, bin, "previous-operator", "--service-account="+operatorNamespace+"/"+operatorServiceAccount)
}

// runProcess runs `bin operator args...` as its own process, as a
// Kubernetes user of its own (a cluster admin: RBAC is not what is tested
// here), until the returned stop is called.
func (s *suite) runProcess(t *testing.T, bin, user string, args ...string) func() {
	t.Helper()
	u, err := s.env.Kubernetes.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	must(t, err)
	kc, err := u.KubeConfig()
	must(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, os.WriteFile(kubeconfig, kc, 0o600))
	log, err := os.Create(filepath.Join(s.env.Dir, user+".log"))
	must(t, err)
	cmd := exec.Command(bin, append([]string{"operator", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--concurrency=2"}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "VAULT_") {
			env = append(env, kv)
		}
	}
	// POD_NAMESPACE: where the operator reads Secrets (--secret-namespace's
	// default), as in its Deployment; a previous release ignores it.
	cmd.Env = append(env, "KUBECONFIG="+kubeconfig, "POD_NAMESPACE="+operatorNamespace)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, cmd.Start())
	s.env.Adopt(cmd.Process.Pid)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = log.Close()
	}
	t.Cleanup(stop)
	return stop
}

// TestUpgradeFromThePreviousRelease runs the previous commit's operator
// (its own process) until its bindings are Ready, then this one: each
// binding's entity is marked with exactly one write, each policy's
// ownership header gets the cluster with one write, nothing else is
// written, no record is rewritten, and a restart after that writes
// nothing. Writes are counted from Vault's audit log.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	s := start(t)
	s.stopOperator()
	bin := buildPrevious(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	const n = 20

	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "up"}}))
	s.must(s.c.Create(ctx, tokenConnection("up-vault", s.env.Vault.Addr, "vault-token")))
	tpl := connTemplate("up-t", "up-vault")
	tpl.Spec.NamespaceSelector = nil
	tpl.Spec.Policies.Assign = []string{"saltstack/{minion}", "up_role_{pillar[roles]}"}
	tpl.Spec.AllowedPolicies = []string{"saltstack/*", "up_role_*"}
	tpl.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{{Name: "up_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{
		{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
	s.must(s.c.Create(ctx, tpl))
	stopPrevious := s.runPrevious(t, bin)
	for i := range n {
		b := binding("up", fmt.Sprintf("up%02d", i), fmt.Sprintf("up%02d", i), map[string]any{"roles": []string{"web", "db"}})
		b.Spec.TemplateRef.Name = "up-t"
		s.must(s.c.Create(ctx, b))
	}
	records := map[string]string{}
	for i := range n {
		b := s.waitReady("up", fmt.Sprintf("up%02d", i))
		records[b.Name] = b.Annotations[v1alpha1.VaultObjectsAnnotation]
	}
	before := map[string]minionSnapshot{}
	for i := range n {
		m := fmt.Sprintf("up%02d", i)
		before[m] = s.snapshot(t, "salt-minions", m, "salt_minion_"+m)
		if before[m].Metadata[ownership.MarkerKey] != "" {
			t.Fatalf("the previous release already marks entities: %v", before[m].Metadata)
		}
	}
	stopPrevious()

	audit.settle(t)
	mark := audit.mark(t)
	s.runOperator(t)
	for i := range n {
		m := fmt.Sprintf("up%02d", i)
		eventually(t, 60*time.Second, "the marker on "+m, func() error {
			after := s.snapshot(t, "salt-minions", m, "salt_minion_"+m)
			if owner, ok := ownership.ParseMarker(after.Metadata[ownership.MarkerKey]); !ok || owner.Name != m {
				return fmt.Errorf("metadata %v", after.Metadata)
			}
			return nil
		})
	}
	audit.settle(t)
	calls := audit.since(t, mark, operator)
	t.Logf("upgrade of %d bindings: %d reads, %d writes", n, calls.Reads, calls.Writes)
	entityWrites, headers := 0, map[string]int{}
	for _, p := range calls.Paths {
		switch {
		case strings.HasPrefix(p, "update identity/entity/name/salt_minion_up") || strings.HasPrefix(p, "create identity/entity/name/salt_minion_up"):
			entityWrites++
		case p == "update sys/policies/acl/up_role_web" || p == "update sys/policies/acl/up_role_db":
			headers[p]++
		default:
			t.Errorf("the upgrade wrote %s", p)
		}
	}
	if entityWrites != n || len(headers) != 2 || headers["update sys/policies/acl/up_role_web"] != 1 || headers["update sys/policies/acl/up_role_db"] != 1 {
		t.Errorf("%d entity writes for %d bindings (want one each), policy writes %v (want one header rewrite each)", entityWrites, n, headers)
	}
	for _, name := range []string{"up_role_web", "up_role_db"} {
		hcl := fmt.Sprint(s.vaultRead("sys/policies/acl/" + name)["policy"])
		if owner, ok := ownership.ParseHeader(hcl); !ok || owner.Template != "up-t" || owner.Cluster == "" {
			t.Errorf("%s after the upgrade: %q", name, hcl)
		}
	}
	for i := range n {
		m := fmt.Sprintf("up%02d", i)
		after := s.snapshot(t, "salt-minions", m, "salt_minion_"+m)
		if after.RoleID != before[m].RoleID || after.EntityID != before[m].EntityID || strings.Join(after.AliasIDs, ",") != strings.Join(before[m].AliasIDs, ",") {
			t.Errorf("%s moved in the upgrade: %+v -> %+v", m, before[m], after)
		}
		b := s.waitReady("up", m)
		if got := b.Annotations[v1alpha1.VaultObjectsAnnotation]; got != records[m] {
			t.Errorf("%s: the record was rewritten: %s", m, got)
		}
	}

	// A restart after the upgrade: reads only.
	mark = audit.mark(t)
	s.restartOperator(t)
	time.Sleep(5 * time.Second)
	audit.settle(t)
	if calls := audit.since(t, mark, operator); calls.Writes != 0 {
		t.Errorf("a restart after the upgrade wrote %d times: %s", calls.Writes, strings.Join(calls.Paths, ", "))
	}
}
