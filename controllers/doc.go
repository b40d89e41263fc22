// Package controllers holds one reconciler per kind: MinionBinding (the
// minion's AppRole role, entity and alias), MinionTemplate (the ACL policies
// its bindings render) and VaultConnection (login and health).
package controllers

// Leader election (minionvault operator --leader-elect).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
