// Package ownership decides which Vault objects belong to which
// MinionBinding, from state only the operator writes.
//
// A tenant controls its MinionBinding: spec, annotations, even finalizers.
// So nothing a binding says about itself proves that an object in Vault is
// its own. The proof is in Vault: the operator writes an owner marker into
// the metadata of every entity it creates for a binding (MarkerKey: the
// cluster's identity, the binding's namespace, name and UID), in the same
// request that creates the entity, and an AppRole role is the binding's
// only while it is linked to such an entity (the entity's alias on the
// role's mount is named by the role's role ID). Creation goes entity (with
// its marker), alias (named by a role ID the operator chooses), role (with
// that role ID), so a crash at any point leaves nothing that cannot be
// proven.
//
// The binding's annotation (Inventory) only says where to look: a forged
// or stripped inventory can make the operator look in the wrong place,
// never delete or take over what is not proven.
//
// A MinionTemplate's ACL policies carry their proof in their first line
// (PolicyOwner.Header: the template and its cluster), written in the same
// request as the policy; DecidePolicy says what a template may do with a
// policy name from that header and what its bindings render.
//
// Nothing here imports Kubernetes or talks to Vault: the controllers read,
// these functions decide.
package ownership
