// Package audit is the engine of `minionvault audit`: who can reach a
// Vault path and why, as Vault's sys/capabilities would answer for each
// minion's token (pkg/acl evaluates the rules).
//
// A Fleet is read from manifests (Load, LoadDiff, LoadForDrift), every
// binding admitted through the operator's admission gate
// (internal/admission, over manifest.Facts) and rendered as the operator
// would, or from Vault itself with read rights only (LoadOnline). The
// reports are pure functions of fleets (WhoCan, WhatCan, Diff, Check,
// Pillar, Drift), except Verify, which asks Vault's own sys/capabilities;
// Write prints any of them as a table, JSON or YAML.
//
// The package is apart from internal/cli, which keeps the commands
// (flags, inputs, exit codes), so that the engine is tested without the
// command line and links neither the operator's controllers nor the
// Kubernetes client libraries (deps_test.go).
package audit
