package connection

import (
	"context"
	"fmt"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// VaultKey identifies the Vault a connection reaches: its cluster ID (from
// the connection's status, or asked of Vault when the connection was not
// checked yet) and the Vault namespace.
func VaultKey(ctx context.Context, vc vault.Client, conn *v1alpha1.VaultConnection) (string, error) {
	id := conn.Status.ClusterID
	if id == "" {
		info, err := vc.ServerInfo(ctx)
		if err != nil {
			return "", fmt.Errorf("reading Vault's cluster ID: %w", err)
		}
		id = info.ClusterID
	}
	if id == "" {
		return "", outcome.VaultState(nil, "Vault reports no cluster ID")
	}
	return ownership.VaultKey(id, conn.Spec.Namespace), nil
}
