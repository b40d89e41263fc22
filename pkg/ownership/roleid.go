package ownership

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// A role ID the operator chooses proves whose role it is, by itself: an
// entity's marker can be wiped (a Salt master replaces the whole metadata
// map) and an alias or entity deleted by hand, but the role keeps its role
// ID through every rewrite that does not re-create it (a Salt master's
// role writes send no role_id, and Vault keeps the one it has).
//
// The role ID is "mv1-" + 32 hex digits of randomness (it is half of a
// login's credentials, so it stays unguessable) + "-" + two tags, each a
// truncated SHA-256 over the randomness and the role's place (mount and
// role name): 12 hex digits over the cluster's identity, 20 over the
// binding's namespace and name. The first proves "the operator of this
// cluster made this role", the second "for the binding of this namespace
// and name". The UID is left out on purpose: a binding re-created under
// its name (a restore, a GitOps re-create) is the same binding coming back
// and keeps its role ID, and with it the minion's credentials.
//
// No key is involved: the proof is against accidents and tenants, who
// cannot write roles, not against someone who may write any role (a Vault
// administrator can forge a marker just as well).

const (
	roleIDPrefix = "mv1-"
	nonceHex     = 32
	clusterTag   = 12
	bindingTag   = 20
	roleIDLen    = len(roleIDPrefix) + nonceHex + 1 + clusterTag + 1 + bindingTag
)

// RolePlace is where an AppRole role lives: its mount and its name (the
// minion ID, which Vault stores lowercased).
type RolePlace struct{ Mount, Role string }

func (p RolePlace) norm() RolePlace {
	return RolePlace{Mount: strings.Trim(p.Mount, "/"), Role: strings.ToLower(p.Role)}
}

// NewRoleID is the role ID of a role created for o at place, from 16
// random bytes.
func NewRoleID(o Owner, place RolePlace, random [16]byte) string {
	nonce := hex.EncodeToString(random[:])
	return roleIDPrefix + nonce + "-" + tagOfCluster(o.Cluster, place, nonce) + "-" + tagOfBinding(o, place, nonce)
}

// RoleIDProof is what a role ID proves about the role it identifies.
type RoleIDProof struct {
	// Chosen: the role ID has the form of one the operator chooses; with
	// Cluster false it was chosen by another cluster's operator (or
	// copied from another role, which is nobody's).
	Chosen bool
	// Cluster: chosen by the operator of the cluster asked about, for a
	// role at this place.
	Cluster bool

	nonce, binding string
	place          RolePlace
}

// ProveRoleID reads a role ID of a role at place, as seen by the operator
// of cluster.
func ProveRoleID(roleID, cluster string, place RolePlace) RoleIDProof {
	if len(roleID) != roleIDLen || !strings.HasPrefix(roleID, roleIDPrefix) {
		return RoleIDProof{}
	}
	rest := roleID[len(roleIDPrefix):]
	nonce, rest := rest[:nonceHex], rest[nonceHex:]
	if rest[0] != '-' || rest[1+clusterTag] != '-' || !isHex(nonce) || !isHex(rest[1:1+clusterTag]) || !isHex(rest[2+clusterTag:]) {
		return RoleIDProof{}
	}
	place = place.norm()
	return RoleIDProof{
		Chosen:  true,
		Cluster: equal(rest[1:1+clusterTag], tagOfCluster(cluster, place, nonce)),
		nonce:   nonce, binding: rest[2+clusterTag:], place: place,
	}
}

// For reports whether the role ID was chosen for o's namespace and name
// (in o's cluster, unless byName: a plan of manifests does not know its
// cluster).
func (p RoleIDProof) For(o Owner, byName bool) bool {
	return p.Chosen && (p.Cluster || byName) && equal(p.binding, tagOfBinding(o, p.place, p.nonce))
}

func tagOfCluster(cluster string, place RolePlace, nonce string) string {
	place = place.norm()
	return tag(clusterTag, "cluster", cluster, place.Mount, place.Role, nonce)
}

func tagOfBinding(o Owner, place RolePlace, nonce string) string {
	place = place.norm()
	return tag(bindingTag, "binding", o.Namespace, o.Name, place.Mount, place.Role, nonce)
}

// tag is n hex digits of SHA-256 over the fields, each length-prefixed
// so that no two lists of fields hash alike.
func tag(n int, fields ...string) string {
	h := sha256.New()
	h.Write([]byte("minionvault role-id v1"))
	for _, f := range fields {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(f))))
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))[:n]
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
