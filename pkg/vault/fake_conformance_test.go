package vault_test

import (
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// TestFakeConformance runs the conformance suite, which the integration
// test runs on a real Vault, on the fake.
func TestFakeConformance(t *testing.T) {
	vault.Conformance(t, vaulttest.NewFake(), "salt-minions", "fake-")
}
