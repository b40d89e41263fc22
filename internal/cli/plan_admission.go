package cli

import (
	"github.com/minionvault/minion-vault-operator/internal/offline"
)

// manifestFacts is the admission gate's source in a plan (offline.Facts:
// the manifests instead of the cluster), with the input the planner reads
// beside it.
type manifestFacts struct {
	*offline.Facts
	in *planInput
}

func newManifestFacts(in *planInput) *manifestFacts {
	return &manifestFacts{Facts: offline.NewFacts(in.Manifests, nil), in: in}
}
