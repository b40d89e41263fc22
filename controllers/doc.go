// Package controllers holds the reconcilers: MinionBinding (the minion's
// AppRole role, entity and alias), MinionTemplate (the ACL policies its
// bindings render: a full scan, and the delta controller that follows
// binding changes between scans) and VaultConnection (login and health,
// and the gate its bindings and templates wait on).
package controllers

// Leader election (minionvault operator --leader-elect) needs Leases in the
// operator's own namespace only: config/rbac/leader_election_role.yaml, not
// a marker (markers make cluster-wide rules).
