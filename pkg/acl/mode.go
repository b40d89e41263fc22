package acl

import (
	"fmt"
	"strconv"
	"strings"
)

// Mode holds the Vault behaviours that changed between releases and that
// change an answer.
type Mode struct {
	// RejectTemplatedGlobs drops a templated rule whose rendered value
	// contains '*' or '+' (ErrTemplatedWildcard). Vault 1.19.17, 1.20.11,
	// 1.21.6 and 2.0.1 and later; before, the value is spliced into the path
	// and can turn it into a prefix or segment rule, or into "+*".
	RejectTemplatedGlobs bool
	// DenySlash drops a templated rule whose rendered value contains '/'
	// (server option deny_slash_in_templated_paths, fixed releases only).
	DenySlash bool
	// AllowDuplicateAttributes accepts a policy that sets an attribute
	// twice in one block, as Vault 1.20 and earlier do (1.20 logs a
	// deprecation warning, hashicorp/vault#30386). Vault 1.21 and 2.0
	// refuse it unless VAULT_ALLOW_PENDING_REMOVAL_DUPLICATE_HCL_ATTRIBUTES
	// is set on the server (hashicorp/vault#31215), which the mode cannot
	// see and assumes unset; Vault 2.1 refuses it always.
	AllowDuplicateAttributes bool
}

// ModeForVersion returns the mode of a Vault version such as "1.21.4",
// "v1.21.6" or "1.21.4+ent".
func ModeForVersion(version string) (Mode, error) {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	if i := strings.IndexAny(v, "+-"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return Mode{}, fmt.Errorf("vault version %q: want MAJOR.MINOR.PATCH", version)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return Mode{}, fmt.Errorf("vault version %q: %q is not a number", version, p)
		}
		n[i] = x
	}
	major, minor, patch := n[0], n[1], n[2]
	var fixed bool
	switch {
	case major > 2, major == 2 && (minor > 0 || patch >= 1):
		fixed = true
	case major == 1 && minor >= 22:
		fixed = true
	case major == 1 && minor == 21:
		fixed = patch >= 6
	case major == 1 && minor == 20:
		fixed = patch >= 11
	case major == 1 && minor == 19:
		fixed = patch >= 17
	}
	// Vault 1.21.0 made duplicate attributes an error (the HCL parser of
	// helper/random/parser.go ParseAndCheckForDuplicateHclAttributes).
	lax := major < 1 || major == 1 && minor <= 20
	return Mode{RejectTemplatedGlobs: fixed, AllowDuplicateAttributes: lax}, nil
}
