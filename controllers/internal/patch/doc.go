// Package patch writes a reconcile's changes to the API server as merge
// patches of only what changed: the status (one patch per reconcile,
// nothing when nothing changed), metadata, and the finalizer.
package patch
