package ownership

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Placement is where a binding's Vault objects live: the AppRole role
// named by the minion ID on Mount, the entity named Entity and its alias on
// Mount, all in the Vault identified by Vault (its cluster ID, and the
// Vault namespace after a "/" when there is one). Connection is the
// VaultConnection the operator reached that Vault through: a hint for
// reaching it again, never part of the placement's identity, so that two
// connections to one Vault name the same placement.
type Placement struct {
	Vault      string `json:"vault,omitempty"`
	Connection string `json:"connection"`
	Mount      string `json:"mount"`
	Entity     string `json:"entity"`
	// DeletionPolicy is the template's when the placement was last
	// written: deleting the binding after its template follows it.
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
}

// VaultKey identifies one Vault (and Vault namespace) from a cluster ID and
// the namespace a connection sends.
func VaultKey(clusterID, namespace string) string {
	if ns := strings.Trim(namespace, "/"); ns != "" {
		return clusterID + "/" + ns
	}
	return clusterID
}

func (p Placement) sameVault(q Placement) bool {
	if p.Vault != "" && q.Vault != "" {
		return p.Vault == q.Vault
	}
	// A record of the previous release names only the connection, and
	// that connection is gone (its Vault could not be resolved).
	return p.Vault == q.Vault && p.Connection == q.Connection
}

// SameRole: the two placements name the same AppRole role (mounts are
// cleaned by the renderer; role names are the minion ID).
func (p Placement) SameRole(q Placement) bool {
	return p.sameVault(q) && strings.Trim(p.Mount, "/") == strings.Trim(q.Mount, "/")
}

// SameEntity: the two placements name the same entity (entity names are
// case-insensitive in Vault).
func (p Placement) SameEntity(q Placement) bool {
	return p.sameVault(q) && strings.EqualFold(p.Entity, q.Entity)
}

// Same: the two placements are one.
func (p Placement) Same(q Placement) bool { return p.SameRole(q) && p.SameEntity(q) }

func (p Placement) String() string {
	v := p.Vault
	if v == "" {
		v = "VaultConnection " + p.Connection
	}
	return fmt.Sprintf("AppRole %s and entity %s in Vault %s", p.Mount, p.Entity, v)
}

// Inventory is a binding's record of its placements, kept in its
// minionvault.dev/vault-objects annotation: where to look, not proof.
type Inventory []Placement

// Limits of a record: a binding has one placement, and one more for each
// switch not yet cleaned up.
const (
	MaxPlacements = 16
	MaxRecordLen  = 8 << 10
)

// ErrRecord marks a record that cannot be read.
var ErrRecord = errors.New("invalid record")

// Decode reads a record; "" is an empty inventory. A record that is not a
// short JSON list of placements with a mount and an entity (and a
// connection or a Vault) is an error: nothing it names is looked at.
func Decode(raw string) (Inventory, error) {
	if raw == "" {
		return nil, nil
	}
	if len(raw) > MaxRecordLen {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrRecord, len(raw), MaxRecordLen)
	}
	var out Inventory
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("%w: not a JSON list of {vault, connection, mount, entity}: %v", ErrRecord, err)
	}
	if len(out) > MaxPlacements {
		return nil, fmt.Errorf("%w: %d placements, at most %d", ErrRecord, len(out), MaxPlacements)
	}
	for _, p := range out {
		if (p.Connection == "" && p.Vault == "") || p.Mount == "" || p.Entity == "" {
			return nil, fmt.Errorf("%w: every entry needs a connection or a vault, a mount and an entity", ErrRecord)
		}
		if !pathName(p.Entity, false) || !pathName(strings.Trim(p.Mount, "/"), true) {
			return nil, fmt.Errorf("%w: entity %q on mount %q cannot name an object in Vault", ErrRecord, p.Entity, p.Mount)
		}
	}
	return out, nil
}

// pathName reports whether a name can be the operator's own entity name
// (one segment of a Vault API path) or mount (multi: segments joined by
// "/"): what the renderer never writes, such as "..", cannot name
// anything the operator wrote.
func pathName(name string, multi bool) bool {
	segs := []string{name}
	if multi {
		segs = strings.Split(name, "/")
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/?#%\\") || strings.ContainsFunc(s, unicode.IsControl) {
			return false
		}
	}
	return true
}

// Encode writes the record; "" for an empty inventory.
func (inv Inventory) Encode() string {
	if len(inv) == 0 {
		return ""
	}
	raw, _ := json.Marshal(inv) // strings only: cannot fail
	return string(raw)
}

// Has reports whether p is recorded, with the same connection and
// deletion policy (so that nothing needs writing).
func (inv Inventory) Has(p Placement) bool {
	return slices.ContainsFunc(inv, func(q Placement) bool {
		return q.Same(p) && q.Connection == p.Connection && samePolicy(q.DeletionPolicy, p.DeletionPolicy)
	})
}

// samePolicy compares deletion policies, "" (a record of the previous
// release) being the default, Delete: upgrading rewrites no record of a
// binding whose template deletes.
func samePolicy(a, b string) bool {
	norm := func(s string) string {
		if s == "" {
			return "Delete"
		}
		return s
	}
	return norm(a) == norm(b)
}

// Merge records cur: an entry for the same placement is replaced (the
// connection used and the policy are the latest), others are kept.
func (inv Inventory) Merge(cur Placement) Inventory {
	out := make(Inventory, 0, len(inv)+1)
	for _, p := range inv {
		if !p.Same(cur) {
			out = append(out, p)
		}
	}
	return append(out, cur)
}

// Stale lists the recorded placements other than cur (nil: the binding is
// being deleted, every placement is stale).
func (inv Inventory) Stale(cur *Placement) []Placement {
	var out []Placement
	for _, p := range inv {
		if cur == nil || !p.Same(*cur) {
			out = append(out, p)
		}
	}
	return out
}

// Without removes the placements in gone.
func (inv Inventory) Without(gone []Placement) Inventory {
	var out Inventory
	for _, p := range inv {
		if !slices.ContainsFunc(gone, p.Same) {
			out = append(out, p)
		}
	}
	return out
}
