package admission

import (
	"strings"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// PolicyConflict is the verdict on a template whose admitted bindings
// render one ACL policy name with different bodies, naming one binding
// (namespace/name) per body. Vault holds one policy per name, so a name
// must determine its body: no binding's is written over another's, and the
// template stalls until they agree. The template reconciler (and with it
// `minionvault plan`) and `minionvault audit` report it with this one
// message.
func PolicyConflict(name string, bindings ...string) *Verdict {
	return stall(v1alpha1.ValidationFailedReason, "policy %q renders differently for MinionBindings %s", name, strings.Join(bindings, " and "))
}
