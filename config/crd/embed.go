// Package crd embeds the generated CRDs of bases/, so that `minionvault dev`
// can install them from any working directory.
package crd

import "embed"

// Bases holds bases/*.yaml, as controller-gen writes them.
//
//go:embed bases/*.yaml
var Bases embed.FS
