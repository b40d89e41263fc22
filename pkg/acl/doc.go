// Package acl evaluates Vault ACL decisions offline, the way Vault answers
// sys/capabilities: the policy parser, identity templating, the exact /
// prefix / segment-wildcard stores and the priority rules between patterns,
// with an explanation of which pattern decided and why. The rules are
// v1.21.4's unless Options.Mode says otherwise: ModeForVersion gives the
// behaviours of any release where releases differ.
//
// The rules it follows, with their place in Vault's source, are set out in
// the project's ACL specification (shared/spec/acl.md). The package is pure:
// no Kubernetes, no network, no clock unless a template asks for time.now.
//
// Speed comes from sharing: the non-templated rules of one list of policy
// names are compiled once (Evaluator caches them), and a Subject only adds
// its rendered templated rules on top (Prepare). A Prepared subject answers
// Check without allocating in the common case.
package acl
