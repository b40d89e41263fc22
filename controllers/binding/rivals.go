package binding

import (
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// rivals is the admission gate's claim order in ownership's terms, the
// bindings named as of cluster.
func rivals(cluster string, a *admission.Admitted) ownership.Rivals {
	var rv ownership.Rivals
	for _, b := range a.Rivals {
		rv.Others = append(rv.Others, ownerOf(cluster, b))
	}
	if a.Ahead != nil {
		o := ownerOf(cluster, a.Ahead)
		rv.Ahead = &o
	}
	return rv
}
