// Package controllers holds one reconciler per kind: MinionBinding (the
// minion's AppRole role, entity and alias), MinionTemplate (the ACL policies
// its bindings render) and VaultConnection (login and health).
package controllers

// Leader election (minionvault operator --leader-elect) needs Leases in the
// operator's own namespace only: config/rbac/leader_election_role.yaml, not
// a marker (markers make cluster-wide rules).
