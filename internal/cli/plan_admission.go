package cli

import (
	"github.com/minionvault/minion-vault-operator/internal/manifest"
)

// manifestFacts is the admission gate's source in a plan (manifest.Facts:
// the manifests instead of the cluster), with the input the planner reads
// beside it.
type manifestFacts struct {
	*manifest.Facts
	in *planInput
}

func newManifestFacts(in *planInput) *manifestFacts {
	return &manifestFacts{Facts: manifest.NewFacts(in.Set, nil), in: in}
}
