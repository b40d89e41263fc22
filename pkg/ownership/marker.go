package ownership

import (
	"fmt"
	"regexp"
	"strings"
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

// Holder is who an entity belongs to, by its marker.
type Holder int

const (
	// HolderNone: there is no such entity.
	HolderNone Holder = iota
	// HolderSelf: the marker names this binding.
	HolderSelf
	// HolderUnmarked: the entity has no marker (made by a Salt master, by
	// hand, by a minion's login, or by the operator's previous release).
	HolderUnmarked
	// HolderOther: the marker names another binding, or cannot be read
	// (then Claim.Other is zero).
	HolderOther
)

func (h Holder) String() string {
	return [...]string{"none", "self", "unmarked", "other"}[h]
}

// Claim is what an entity's metadata says of its owner.
type Claim struct {
	Holder Holder
	// Other is the owner the marker names, for HolderOther (zero when the
	// marker cannot be read).
	Other Owner
}

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
	switch {
	case !ok:
		return Claim{Holder: HolderOther}
	case o.Same(self):
		return Claim{Holder: HolderSelf}
	}
	return Claim{Holder: HolderOther, Other: o}
}

// Describe says who holds it, for messages.
func (c Claim) Describe() string {
	switch c.Holder {
	case HolderSelf:
		return "this MinionBinding"
	case HolderUnmarked:
		return "nobody the operator knows (no " + MarkerKey + " marker)"
	case HolderOther:
		if c.Other.UID == "" {
			return "an owner the operator cannot read (its " + MarkerKey + " marker was edited)"
		}
		return c.Other.String()
	}
	return "nobody (it does not exist)"
}
