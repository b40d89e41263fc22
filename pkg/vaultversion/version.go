// Package vaultversion reads Vault release numbers. It is a leaf: the
// client (pkg/vault, which tests' versions it lists) and the ACL rules
// (pkg/acl, whose behaviour changes between releases) both read versions
// the same way through it.
package vaultversion

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Version is a Vault release number, as its sys/seal-status reports it
// ("1.21.4", "1.19.5+ent", "2.0.1") without build metadata.
type Version struct {
	Major, Minor, Patch int
}

// Parse reads "1.21.4", "v1.21.4", "1.21.4+ent" or
// "1.21.4+minionvault-minimal"; a pre-release suffix ("-rc1") is dropped.
func Parse(s string) (Version, error) {
	v := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(v, "+-"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("vault version %q: want MAJOR.MINOR.PATCH", s)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return Version{}, fmt.Errorf("vault version %q: %q is not a number", s, p)
		}
		n[i] = x
	}
	return Version{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Line is "1.21": releases of one line share their API.
func (v Version) Line() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Compare is -1, 0 or +1 as v is older than, the same as or newer than w.
func (v Version) Compare(w Version) int {
	return slices.Compare([]int{v.Major, v.Minor, v.Patch}, []int{w.Major, w.Minor, w.Patch})
}

// AtLeast says whether v is major.minor.patch or newer.
func (v Version) AtLeast(major, minor, patch int) bool {
	return v.Compare(Version{Major: major, Minor: minor, Patch: patch}) >= 0
}
