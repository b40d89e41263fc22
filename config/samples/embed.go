// Package samples embeds the sample manifests of this folder, so that
// `minionvault dev` can apply them from any working directory.
package samples

import "embed"

// FS holds the sample manifests (*.yaml, kustomization.yaml included).
//
//go:embed *.yaml
var FS embed.FS
