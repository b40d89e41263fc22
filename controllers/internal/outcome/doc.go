// Package outcome is how a reconcile of any of the three kinds ends: the
// error classes (waiting, invalid input, refused, Vault's state) and the
// one table that turns an error into an outcome (For, errors.go); the
// conditions and events an outcome sets (conditions.go); the result and
// requeue it asks of controller-runtime (ResultFor, requeue.go); and the
// rollouts a template reports as one event per pass (rollouts.go).
package outcome
