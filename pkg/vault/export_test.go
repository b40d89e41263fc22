package vault

// For the external tests (package vault_test), which may import
// pkg/vault/vaulttest.

// Conformance is conformance, the Client semantics the controllers rely
// on, for the fake's run of it (fake_conformance_test.go).
var Conformance = conformance
