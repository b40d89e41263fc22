package cli

import (
	"strings"
	"testing"
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
