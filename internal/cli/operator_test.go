package cli

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
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
