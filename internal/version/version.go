// Package version holds the build's version, stamped by the linker.
package version

// Version is set with -ldflags "-X .../internal/version.Version=v1.2.3".
var Version = "dev"
