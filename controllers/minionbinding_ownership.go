package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// owner is the binding as its marker names it.
func (r *MinionBindingReconciler) owner(obj *v1alpha1.MinionBinding) ownership.Owner {
	return ownership.Owner{Cluster: r.ClusterID, Namespace: obj.Namespace, Name: obj.Name, UID: string(obj.UID)}
}

// observed is what apply read before deciding anything.
type observed struct {
	self        ownership.Owner
	role        map[string]any // nil: absent
	roleID      string
	entity      *vault.Entity // nil: absent
	entityClaim ownership.Claim
	// aliasHolder is the entity that holds the alias named roleID on the
	// mount, when it is not the binding's entity (nil: nobody's, or not
	// looked up because the binding's entity holds it).
	aliasHolder *vault.Entity
	accessor    string
	mount, name string
	entityName  string
	// entityProven: the entity has no marker, and status proves it the
	// binding's (the previous release's, or its marker removed by hand).
	entityProven bool
}

// observe reads the role, its role ID and the entity, and, only when the
// role is not linked to the entity, whose login the role leads to.
func (r *MinionBindingReconciler) observe(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, mount, role, accessor, entityName string) (*observed, error) {
	o := &observed{self: r.owner(obj), accessor: accessor, mount: mount, name: role, entityName: entityName}
	var err error
	if o.role, err = vc.ReadRole(ctx, mount, role); err != nil {
		return nil, fmt.Errorf("reading AppRole %s/%s: %w", mount, role, err)
	}
	if o.role != nil {
		if o.roleID, err = vc.ReadRoleID(ctx, mount, role); err != nil {
			return nil, fmt.Errorf("reading the role ID of AppRole %s/%s: %w", mount, role, err)
		}
	}
	if o.entity, err = vc.ReadEntityByName(ctx, entityName); err != nil {
		return nil, fmt.Errorf("reading entity %s: %w", entityName, err)
	}
	if o.entity != nil && r.matchByName {
		// A plan of manifests has no UID: a marker naming the binding's
		// namespace and name is its own.
		if m, ok := ownership.ParseMarker(o.entity.Metadata[ownership.MarkerKey]); ok && m.Namespace == obj.Namespace && m.Name == obj.Name {
			o.self = m
		}
	}
	o.entityClaim = ownership.ClaimOf(o.entity != nil, entityMetadata(o.entity), o.self)
	if o.roleID != "" {
		if a := aliasOn(o.entity, accessor); a == nil || a.Name != o.roleID {
			if o.aliasHolder, err = vc.LookupEntityByAlias(ctx, o.roleID, accessor); err != nil {
				return nil, fmt.Errorf("looking up the entity of AppRole %s/%s's role ID: %w", mount, role, err)
			}
		}
	}
	return o, nil
}

// provenByStatus: the entity is the one the operator recorded in the
// binding's status (which only the operator writes): the proof of the
// previous release's own objects, which carry no marker.
func provenByStatus(obj *v1alpha1.MinionBinding, e *vault.Entity) bool {
	st := obj.Status.Entity
	return e != nil && st != nil && st.ID != "" && st.ID == e.ID
}

func entityMetadata(e *vault.Entity) map[string]string {
	if e == nil {
		return nil
	}
	return e.Metadata
}

// decide applies the ownership rules to what was observed: what may be
// done with the entity and with the role, or why nothing may be written.
func (r *MinionBindingReconciler) decide(ctx context.Context, obj *v1alpha1.MinionBinding, tpl *v1alpha1.MinionTemplate, o *observed) (entity, role ownership.Decision, err error) {
	st := &obj.Status
	adopt := tpl.Spec.AdoptMinions
	// The previous release's own objects carry no marker; the IDs it
	// recorded in status (which only the operator writes) prove them.
	provenEntity := func(e *vault.Entity) bool { return provenByStatus(obj, e) }
	ef := ownership.EntityFacts{Name: o.entityName, Claim: o.entityClaim, Adopt: adopt}
	ef.ProvenByStatus = ef.Claim.Holder == ownership.HolderUnmarked && provenEntity(o.entity)
	o.entityProven = ef.ProvenByStatus
	if ef.Claim.Holder == ownership.HolderOther {
		if ef.Holder, err = r.holderState(ctx, ef.Claim.Other, o.self); err != nil {
			return 0, 0, err
		}
	}
	entity, why := ownership.DecideEntity(ef)
	if err := refusal(entity, why, ef.Claim); err != nil {
		return 0, 0, err
	}

	rf := ownership.RoleFacts{Mount: o.mount, Name: o.name, Exists: o.role != nil, RoleID: o.roleID, Adopt: adopt}
	if rf.Exists {
		onMount := aliasOn(o.entity, o.accessor)
		rf.SlotHeld = onMount != nil
		switch {
		case onMount != nil && onMount.Name == o.roleID:
			rf.Alias = ownership.Claim{Holder: ownership.HolderSelf}
		case o.aliasHolder != nil:
			rf.Alias = ownership.ClaimOf(true, o.aliasHolder.Metadata, o.self)
			if rf.Alias.Holder == ownership.HolderUnmarked && provenEntity(o.aliasHolder) {
				rf.Alias = ownership.Claim{Holder: ownership.HolderSelf}
			}
		}
		rf.ProvenByStatus = st.AppRole != nil && st.AppRole.RoleID != "" && st.AppRole.RoleID == o.roleID
		if rf.Alias.Holder == ownership.HolderOther {
			if rf.Holder, err = r.holderState(ctx, rf.Alias.Other, o.self); err != nil {
				return 0, 0, err
			}
		}
	}
	role, why = ownership.DecideRole(rf)
	if err := refusal(role, why, rf.Alias); err != nil {
		return 0, 0, err
	}
	return entity, role, nil
}

// refusal turns a Wait or Refuse decision into the binding's reason.
func refusal(d ownership.Decision, why string, c ownership.Claim) error {
	switch {
	case d == ownership.Wait:
		return &errRefused{reason: v1alpha1.MinionIDReleasingReason, msg: why}
	case d != ownership.Refuse:
		return nil
	case c.Holder == ownership.HolderOther:
		return &errRefused{reason: v1alpha1.MinionIDConflictReason, msg: why}
	}
	return &errRefused{reason: v1alpha1.NotOwnedReason, msg: why}
}

// holderState asks the API server about the binding a marker names, when
// it is in this cluster. It reads past the cache: a shard's cache does not
// hold the other shards' bindings. Not allowed to read it (a namespaced
// operator): the holder counts as live, so nothing is taken over.
func (r *MinionBindingReconciler) holderState(ctx context.Context, holder, self ownership.Owner) (ownership.HolderState, error) {
	if !holder.SameCluster(self) || holder.UID == "" {
		return ownership.HolderUnknown, nil
	}
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	b := &v1alpha1.MinionBinding{}
	err := reader.Get(ctx, types.NamespacedName{Namespace: holder.Namespace, Name: holder.Name}, b)
	switch {
	case apierrors.IsNotFound(err):
		return ownership.HolderGone, nil
	case apierrors.IsForbidden(err):
		return ownership.HolderLive, nil
	case err != nil:
		return 0, fmt.Errorf("reading the holder of the minion, %s: %w", holder, err)
	case string(b.UID) != holder.UID:
		return ownership.HolderGone, nil
	case !b.DeletionTimestamp.IsZero():
		return ownership.HolderDeleting, nil
	}
	return ownership.HolderLive, nil
}
