package acl

import "strings"

// sysRootPaths are the system backend's root-protected paths in Vault
// v1.21.4 (vault/logical_system.go, PathsSpecial.Root), relative to sys/:
// a real request there needs sudo besides the operation's capability. A
// trailing "*" is a prefix.
var sysRootPaths = []string{
	"auth/*", "remount", "audit", "audit/*", "raw", "raw/*",
	"replication/primary/secondary-token", "replication/performance/primary/secondary-token",
	"replication/dr/primary/secondary-token", "replication/reindex", "replication/dr/reindex",
	"replication/performance/reindex", "rotate", "config/cors", "config/auditing/*",
	"config/ui/headers/*", "plugins/catalog/*", "plugins/runtimes/catalog/*", "revoke-prefix/*",
	"revoke-force/*", "leases/revoke-prefix/*", "leases/revoke-force/*", "leases/lookup/*",
	"storage/raft/snapshot-auto/config/*", "leases", "reporting/scan", "internal/inspect/*",
	"internal/counters/activity/export", "seal", "step-down",
}

// RootProtected reports whether a real request on path needs sudo: one of
// the system backend's root-protected paths. sys/capabilities shows sudo
// as an ordinary bit and says nothing of this.
func RootProtected(path string) bool {
	rest, ok := strings.CutPrefix(strings.TrimLeft(path, "/"), "sys/")
	if !ok {
		return false
	}
	for _, p := range sysRootPaths {
		if prefix, glob := strings.CutSuffix(p, "*"); glob {
			if strings.HasPrefix(rest, prefix) {
				return true
			}
		} else if rest == p {
			return true
		}
	}
	return false
}
