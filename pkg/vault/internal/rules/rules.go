// Package rules holds what pkg/vault's client checks and builds before a
// request, and how it reads Vault's numbers, for the client and its fake
// (pkg/vault/vaulttest) to share: which names make clean Vault API paths,
// the paths of roles, entities and policies, and JSON numbers as whole
// seconds.
package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is vault.ErrInvalid (see there).
var ErrInvalid = errors.New("invalid")

// Segment checks a name that becomes one path segment.
func Segment(kind, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/?#%\\") || hasControl(name) {
		return fmt.Errorf("%w: %s %q cannot be one Vault path segment", ErrInvalid, kind, name)
	}
	return nil
}

// Segments checks a name that may span path segments (policy names, mounts).
func Segments(kind, name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.ContainsAny(name, "?#%\\") || hasControl(name) {
		return fmt.Errorf("%w: %s %q is not a clean Vault path", ErrInvalid, kind, name)
	}
	for _, s := range strings.Split(name, "/") {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("%w: %s %q is not a clean Vault path", ErrInvalid, kind, name)
		}
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// CleanMount is an auth mount without leading or trailing slashes.
func CleanMount(mount string) string { return strings.Trim(mount, "/") }

// RolePath is the path of AppRole role name at mount, checked.
func RolePath(mount, name string) (string, error) {
	mount = CleanMount(mount)
	if err := Segments("auth mount", mount); err != nil {
		return "", err
	}
	if err := Segment("role name", name); err != nil {
		return "", err
	}
	return "auth/" + mount + "/role/" + name, nil
}

// EntityPath is the path of the entity called name, checked.
func EntityPath(name string) (string, error) {
	if err := Segment("entity name", name); err != nil {
		return "", err
	}
	return "identity/entity/name/" + name, nil
}

// PolicyPath is the path of the ACL policy called name, checked.
func PolicyPath(name string) (string, error) {
	if err := Segments("policy name", name); err != nil {
		return "", err
	}
	return "sys/policies/acl/" + name, nil
}

// Number reads a JSON number (json.Number, float64 or a numeric string) as
// whole seconds.
func Number(v any) int64 {
	switch n := v.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i
		}
		f, _ := n.Float64()
		return int64(f)
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	case string:
		return Number(json.Number(n))
	}
	return 0
}
