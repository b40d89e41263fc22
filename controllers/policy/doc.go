// Package policy is the MinionTemplate reconciler: the ACL policies a
// template's bindings render, written to Vault once each with an
// ownership header and deleted when no binding renders them, and the
// template's status. It is named for what it writes rather than for its
// kind, so that it does not meet pkg/template (saltext's templating) in
// one file.
package policy
