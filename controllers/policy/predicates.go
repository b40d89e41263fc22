package policy

import (
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
)

// holdingChanged passes a binding that starts or stops holding its minion
// in Vault (holdsInVault): its policies count from then on, or no more.
var holdingChanged = watch.BindingFlipped(holdsInVault)
