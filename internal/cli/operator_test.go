package cli

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

func TestCheckSharding(t *testing.T) {
	tests := []struct {
		name    string
		o       OperatorOptions
		wantErr string
	}{
		{"everything, unsharded", OperatorOptions{Controllers: allControllers}, ""},
		{"a shard of bindings", OperatorOptions{Controllers: []string{"bindings"}, LabelSelector: "shard=a"}, ""},
		{"templates beside the shards", OperatorOptions{Controllers: []string{"templates", "connections"}}, ""},
		{"templates in a shard", OperatorOptions{Controllers: allControllers, LabelSelector: "shard=a"}, "needs every MinionBinding"},
		{"templates in a namespace", OperatorOptions{Controllers: []string{"templates"}, WatchNamespace: "salt"}, "needs every MinionBinding"},
		{"unknown", OperatorOptions{Controllers: []string{"binding"}}, `unknown controller "binding"`},
	}
	for _, tc := range tests {
		err := tc.o.checkSharding()
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestLeaderElectionIDPerShard(t *testing.T) {
	all := OperatorOptions{Controllers: []string{"connections", "bindings", "templates"}}
	a := OperatorOptions{Controllers: []string{"bindings"}, LabelSelector: "shard=a"}
	b := OperatorOptions{Controllers: []string{"bindings"}, LabelSelector: "shard=b"}
	if got := all.leaderElectionID(); got != "minion-vault-operator.minionvault.dev" {
		t.Errorf("unsharded id %q: it must stay what earlier versions used", got)
	}
	if a.leaderElectionID() == b.leaderElectionID() || a.leaderElectionID() == all.leaderElectionID() {
		t.Errorf("shards share a lease: %q %q %q", a.leaderElectionID(), b.leaderElectionID(), all.leaderElectionID())
	}
	if a.leaderElectionID() != a.leaderElectionID() {
		t.Error("not stable")
	}
	if got := (OperatorOptions{LeaderID: "mine"}).leaderElectionID(); got != "mine" {
		t.Errorf("explicit id %q", got)
	}
}

// --secret-namespace defaults to the pod's namespace: POD_NAMESPACE (the
// Deployment's downward API), else the service account mount, else the
// namespace config/default installs into.
func TestPodNamespace(t *testing.T) {
	tests := []struct {
		name string
		env  string
		file string // "" : no such file
		want string
	}{
		{"POD_NAMESPACE", "ops", "mounted", "ops"},
		{"the service account mount", "", "mounted\n", "mounted"},
		{"neither", "", "", DefaultSecretNamespace},
		{"blank values", "  ", " \n", DefaultSecretNamespace},
	}
	for _, tc := range tests {
		getenv := func(k string) string {
			if k == "POD_NAMESPACE" {
				return tc.env
			}
			return ""
		}
		readFile := func(p string) ([]byte, error) {
			if tc.file == "" || p != serviceAccountNamespaceFile {
				return nil, os.ErrNotExist
			}
			return []byte(tc.file), nil
		}
		if got := podNamespace(getenv, readFile); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// An empty --secret-namespace would mean every namespace, which the
// installed RBAC does not grant: refused before the manager starts.
func TestRunOperatorNeedsSecretNamespace(t *testing.T) {
	err := RunOperator(context.Background(), &rest.Config{Host: "http://127.0.0.1:1"}, OperatorOptions{Controllers: allControllers})
	if err == nil || !strings.Contains(err.Error(), "--secret-namespace") {
		t.Errorf("err %v, want a refusal naming --secret-namespace", err)
	}
}

// With leader election, a standby warms its controllers up (their watches
// and queues filled while it waits), and its retry period bounds a
// takeover within 2 s of the lease duration: client-go's poll waits up to
// 2.2 retry periods, a standby sees the last renewal one poll late and
// tries one poll after the lease ran out.
func TestLeaderElectionDefaults(t *testing.T) {
	cmd := newOperatorCmd()
	if err := cmd.Flags().Parse([]string{"--leader-elect"}); err != nil {
		t.Fatal(err)
	}
	lease, err := cmd.Flags().GetDuration("leader-election-lease-duration")
	if err != nil {
		t.Fatal(err)
	}
	retry, err := cmd.Flags().GetDuration("leader-election-retry-period")
	if err != nil {
		t.Fatal(err)
	}
	if worst := time.Duration(2 * 2.2 * float64(retry)); worst > 2*time.Second {
		t.Errorf("retry period %s: a takeover up to %s after the lease duration (%s), more than 2 s", retry, worst, lease)
	}
	for _, elect := range []bool{true, false} {
		o := OperatorOptions{LeaderElection: elect, Controllers: allControllers, RetryPeriod: retry, LeaseDuration: lease}
		opts := o.managerOptions(nil, cache.Options{})
		if got := opts.Controller.EnableWarmup; got == nil || *got != elect {
			t.Errorf("leader election %v: EnableWarmup %v, want %v", elect, got, elect)
		}
		if opts.RetryPeriod == nil || *opts.RetryPeriod != retry {
			t.Errorf("retry period %v, want %s", opts.RetryPeriod, retry)
		}
	}
}
