package acl

// BuiltinPolicy is one ACL policy the server makes itself. None can be
// deleted; the operator never writes, adopts or deletes one, and neither
// it nor the audit reports one as someone else's (docs/compatibility.md).
type BuiltinPolicy struct {
	Name string
	// Servers says which servers make it, for messages.
	Servers string
	// Editable: an administrator may rewrite its text (Vault refuses
	// writes to the others: "cannot update").
	Editable bool
	// Assignable: a login whose policies name it is accepted. Vault
	// refuses "root" ("auth methods cannot create root tokens") and the
	// non-assignable policies ("cannot assign policy").
	Assignable bool
	// Listed: LIST sys/policies/acl shows it.
	Listed bool
}

// builtinPolicies, from the policy stores: hashicorp/vault v1.21.4
// vault/policy_store.go (immutablePolicies, nonAssignablePolicies,
// setupPolicyStore, DeletePolicy), Vault 2.x's default-ceiling as its
// policy store tests list it (TestPolicyStore_Predefined: listed, editable,
// not deletable), and openbao/openbao v2.6.2 vault/policy/policy_store.go
// (no control-group).
var builtinPolicies = []BuiltinPolicy{
	{Name: "root", Servers: "Vault and OpenBao", Listed: true},
	{Name: "default", Servers: "Vault and OpenBao", Editable: true, Assignable: true, Listed: true},
	{Name: "default-ceiling", Servers: "Vault 2.0 and later", Editable: true, Assignable: true, Listed: true},
	{Name: "response-wrapping", Servers: "Vault and OpenBao"},
	{Name: "control-group", Servers: "Vault"},
}

// Builtin returns the built-in policy of that name (sanitised as Vault
// does: "Default " is "default"), ok false when there is none. It knows
// every server's built-ins at once: a name that is built in on one server
// is left alone on all of them.
func Builtin(name string) (BuiltinPolicy, bool) {
	name = SanitizeName(name)
	for _, b := range builtinPolicies {
		if b.Name == name {
			return b, true
		}
	}
	return BuiltinPolicy{}, false
}

// IsBuiltin reports whether name is a built-in policy of some server.
func IsBuiltin(name string) bool {
	_, ok := Builtin(name)
	return ok
}

// BuiltinPolicies returns the built-in policies, root first.
func BuiltinPolicies() []BuiltinPolicy {
	return append([]BuiltinPolicy(nil), builtinPolicies...)
}
