//go:build integration

package e2e

import (
	"testing"
	"time"
)

// TestResyncInSyncWritesNothing: a resync of a binding that Vault already
// matches reads Vault and writes nothing.
func TestResyncInSyncWritesNothing(t *testing.T) {
	s := start(t)
	f := newSaltMinions(s, "resync")
	f.bind("web01", "web", "db")
	f.bind("db01", "db")
	f.waitReady("web01")
	f.waitReady("db01")
	f.waitPolicies(t, 2, "db", "web")

	time.Sleep(500 * time.Millisecond) // let the template reconciler settle
	before := s.writes.writes.Load()
	reads := s.writes.reads.Load()
	s.requestReconcile(f.ns, f.id("web01"))
	if got := s.writes.writes.Load() - before; got != 0 {
		t.Fatalf("%d write calls on a resync in sync", got)
	}
	if s.writes.reads.Load() == reads {
		t.Fatal("the resync did not read Vault")
	}
}
