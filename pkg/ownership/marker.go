package ownership

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// MarkerKey is the entity metadata key that holds the owner marker. No
// template can render it (pkg/render refuses metadata keys with the
// ReservedKeyPrefix), so only the operator writes it.
const MarkerKey = ReservedKeyPrefix + "owner"

// KeysKey is the entity metadata key that lists the metadata keys the
// operator rendered into the entity (their key__N companions included
// implicitly), comma-separated: written in the same request as the keys, it
// tells the operator's keys from those someone else added, with no record
// outside Vault.
const KeysKey = ReservedKeyPrefix + "keys"

// RetainedKey is the entity metadata key the operator writes when it
// leaves a binding's objects in Vault under deletionPolicy Retain (its
// value: when). Objects retained for a binding are kept for it: only the
// binding of that namespace and name, created again (a restore), takes
// them; no other claimant of the minion ID is handed them.
const RetainedKey = ReservedKeyPrefix + "retained"

// LostKey is the entity metadata key the operator writes when it finds a
// binding's objects lost: the binding is gone and its deletion never ran
// (its finalizer stripped, its namespace lost, etcd restored). Its value is
// when it was found (RFC 3339). Lost is not released: the objects are kept
// for that binding coming back under its namespace and name until the
// restore window has passed since then, and collected after (LostVerdict).
const LostKey = ReservedKeyPrefix + "lost"

// ReservedKeyPrefix starts every metadata key the operator keeps for
// itself.
const ReservedKeyPrefix = "minionvault-"

// MaxKeysLen is the longest KeysKey value Vault accepts (its limit for a
// metadata value).
const MaxKeysLen = 512

// Owner is one MinionBinding in one Kubernetes cluster.
type Owner struct {
	// Cluster is the stable identity of the Kubernetes cluster (the UID of
	// its kube-system namespace, or the operator's --cluster-id).
	Cluster   string
	Namespace string
	Name      string
	// UID is the binding's metadata.uid: a binding deleted and created
	// again under the same name is another owner.
	UID string
}

// clusterRE bounds what a cluster identity may contain: the marker is
// space-separated, and must stay under Vault's 512 characters.
var clusterRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// ValidCluster reports whether id can be a cluster identity.
func ValidCluster(id string) error {
	if !clusterRE.MatchString(id) {
		return fmt.Errorf("cluster identity %q must be 1 to 128 letters, digits, '.', '_', ':' or '-'", id)
	}
	return nil
}

// Marker is the value of MarkerKey for o.
func (o Owner) Marker() string {
	return "cluster=" + o.Cluster + " binding=" + o.Namespace + "/" + o.Name + " uid=" + o.UID
}

// Same reports whether two owners are the same binding: same cluster, same
// UID (namespace and name follow from the UID).
func (o Owner) Same(p Owner) bool {
	return o.Cluster == p.Cluster && o.UID == p.UID && o.UID != ""
}

// SameName reports whether two owners are one binding's namespace and name
// in one cluster: the same binding, or it and an earlier one of that name
// (deleted and created again, as a restore or a GitOps re-create does).
// No two live bindings share a name, so this is the binding coming back.
func (o Owner) SameName(p Owner) bool {
	return o.SameCluster(p) && o.Namespace == p.Namespace && o.Name == p.Name && o.Namespace != ""
}

// SameCluster reports whether the two owners live in one cluster.
func (o Owner) SameCluster(p Owner) bool { return o.Cluster == p.Cluster && o.Cluster != "" }

func (o Owner) String() string {
	return fmt.Sprintf("MinionBinding %s/%s (uid %s) in cluster %s", o.Namespace, o.Name, o.UID, o.Cluster)
}

// ParseMarker reads a MarkerKey value; ok is false when it is not one the
// operator writes (edited by hand, or garbage).
func ParseMarker(s string) (o Owner, ok bool) {
	fields := strings.Fields(s)
	if len(fields) != 3 {
		return Owner{}, false
	}
	seen := map[string]bool{}
	for _, f := range fields {
		k, v, found := strings.Cut(f, "=")
		if !found || v == "" || seen[k] {
			return Owner{}, false
		}
		seen[k] = true
		switch k {
		case "cluster":
			o.Cluster = v
		case "binding":
			ns, name, found := strings.Cut(v, "/")
			if !found || ns == "" || name == "" {
				return Owner{}, false
			}
			o.Namespace, o.Name = ns, name
		case "uid":
			o.UID = v
		default:
			return Owner{}, false
		}
	}
	if o.Namespace == "" || o.UID == "" || ValidCluster(o.Cluster) != nil {
		return Owner{}, false
	}
	return o, true
}

// Holder is who a Vault object belongs to: for an entity by its marker,
// for a role by its role ID (RoleIDProof) or its alias.
type Holder int

const (
	// HolderNone: there is no such object.
	HolderNone Holder = iota
	// HolderSelf: it is this binding's (Claim.Previous: written for an
	// earlier binding of this namespace and name, which is the same
	// binding coming back).
	HolderSelf
	// HolderUnmarked: nothing of the operator's says whose it is (made by
	// a Salt master, by hand, by a minion's login, or by the operator's
	// previous release).
	HolderUnmarked
	// HolderOther: another binding's (Claim.Other), or an owner the
	// operator cannot name (Claim.Unnamed says which kind).
	HolderOther
)

func (h Holder) String() string {
	return [...]string{"none", "self", "unmarked", "other"}[h]
}

// Claim is what Vault says of an object's owner.
type Claim struct {
	Holder Holder
	// Other is the owner, for HolderOther (zero when it cannot be named).
	Other Owner
	// Previous: HolderSelf, written for an earlier binding of this
	// namespace and name (Other holds it).
	Previous bool
	// Unnamed describes an owner of HolderOther that cannot be named: a
	// marker edited by hand, a role ID of another cluster's operator, one
	// of this cluster's for a binding that claims the minion no more.
	Unnamed string
	// Retained: the holder was deleted with deletionPolicy Retain, and
	// the objects are kept for it (RetainedKey).
	Retained bool
	// Lost is when the operator found the holder gone without its
	// deletion having run (LostKey; zero: not marked lost).
	Lost time.Time
}

// Owners the operator cannot name, for Claim.Unnamed.
const (
	UnnamedEdited  = "an owner the operator cannot read (its " + MarkerKey + " marker was edited)"
	UnnamedForeign = "the operator of another Kubernetes cluster (its role ID says so)"
	UnnamedGone    = "a MinionBinding of this cluster that no longer claims the minion ID (its role ID says so)"
)

// ClaimOf reads the marker of an entity with metadata md (nil: the entity
// does not exist; pass exists false) as seen by self.
func ClaimOf(exists bool, md map[string]string, self Owner) Claim {
	if !exists {
		return Claim{Holder: HolderNone}
	}
	raw, ok := md[MarkerKey]
	if !ok {
		return Claim{Holder: HolderUnmarked}
	}
	o, ok := ParseMarker(raw)
	retained := md[RetainedKey] != ""
	lost, _ := LostSince(md)
	switch {
	case !ok:
		return Claim{Holder: HolderOther, Unnamed: UnnamedEdited}
	case o.Same(self):
		return Claim{Holder: HolderSelf, Retained: retained}
	case o.SameName(self):
		return Claim{Holder: HolderSelf, Previous: true, Other: o, Retained: retained, Lost: lost}
	}
	return Claim{Holder: HolderOther, Other: o, Retained: retained, Lost: lost}
}

// LostSince reads an entity's LostKey: when the operator found its
// holder lost. ok is false when the key is absent or not a time the
// operator writes (edited by hand): the entity is then marked again.
func LostSince(md map[string]string) (since time.Time, ok bool) {
	raw, found := md[LostKey]
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// LostValue is the LostKey value for a loss found at t.
func LostValue(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Describe says who holds it, for messages.
func (c Claim) Describe() string {
	switch c.Holder {
	case HolderSelf:
		if c.Previous {
			return "this MinionBinding's earlier incarnation (" + c.Other.String() + ")"
		}
		return "this MinionBinding"
	case HolderUnmarked:
		return "nobody the operator knows (no " + MarkerKey + " marker)"
	case HolderOther:
		if c.Other.UID == "" {
			if c.Unnamed != "" {
				return c.Unnamed
			}
			return UnnamedEdited
		}
		return c.Other.String()
	}
	return "nobody (it does not exist)"
}
