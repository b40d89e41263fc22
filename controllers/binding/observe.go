package binding

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// owner is the binding as its marker names it.
func (r *Reconciler) owner(obj *v1alpha1.MinionBinding) ownership.Owner {
	return ownerOf(r.ClusterID, obj)
}

// ownerOf is a binding of cluster as its marker names it.
func ownerOf(cluster string, obj *v1alpha1.MinionBinding) ownership.Owner {
	return ownership.Owner{Cluster: cluster, Namespace: obj.Namespace, Name: obj.Name, UID: string(obj.UID)}
}

// proof tells the binding's Vault objects from others': the owner marker,
// and for the previous release's unmarked objects the IDs the operator
// recorded in status (which only the operator writes).
type proof struct {
	self ownership.Owner
	// byName: a plan of manifests, whose bindings have no UID and whose
	// cluster is unknown, takes a marker naming the binding's namespace
	// and name as its own.
	byName           bool
	entityID, roleID string // status's
}

func (r *Reconciler) proofOf(obj *v1alpha1.MinionBinding) proof {
	return statusProof(r.owner(obj), obj)
}

// statusProof is the proof of self: its marker, and the IDs status
// recorded (bindingFacts).
func statusProof(self ownership.Owner, obj *v1alpha1.MinionBinding) proof {
	f := statusFacts(obj)
	return proof{self: self, entityID: f.entityID, roleID: f.roleID}
}

// claim reads an entity's marker (nil: no entity).
func (pr proof) claim(e *vault.Entity) ownership.Claim {
	c := ownership.ClaimOf(e != nil, entityMetadata(e), pr.self)
	if pr.byName && c.Holder == ownership.HolderOther && c.Other.Namespace == pr.self.Namespace && c.Other.Name == pr.self.Name {
		return ownership.Claim{Holder: ownership.HolderSelf}
	}
	return c
}

// roleClaim is whose a role at mount/name is by its role ID, among the
// candidates (the other claimants of the minion ID).
func (pr proof) roleClaim(roleID, mount, name string, candidates []ownership.Owner) ownership.Claim {
	p := ownership.ProveRoleID(roleID, pr.self.Cluster, ownership.RolePlace{Mount: mount, Role: name})
	return ownership.RoleClaim(p, pr.self, pr.byName, candidates)
}

// provenByStatus: the entity is the one status recorded: the proof of the
// previous release's own objects, which carry no marker.
func (pr proof) provenByStatus(e *vault.Entity) bool {
	return e != nil && pr.entityID != "" && pr.entityID == e.ID
}

// deletable: the entity is proven the binding's, so it may be deleted
// (and a role linked to it with it). linkedRole: it holds the alias of a
// role whose role ID proves it the binding's.
func (pr proof) deletable(e *vault.Entity, linkedRole bool) bool {
	return e != nil && ownership.Deletable(pr.claim(e), pr.provenByStatus(e), linkedRole)
}

// observed is everything planBinding decides from, read once.
type observed struct {
	proof    proof
	accessor string
	role     map[string]any // nil: absent
	roleID   string
	entity   *vault.Entity // nil: absent
	// aliasHolder is the entity that holds the alias named roleID on the
	// mount, when it is not the binding's entity (nil: nobody's, or not
	// looked up because the binding's entity holds it).
	aliasHolder *vault.Entity
	// rivals are the other claimants of the minion ID (the admission
	// gate's): the candidates a role ID may name, and who comes first.
	rivals ownership.Rivals
	// The claims, derived from the reads (deriveClaims).
	entityClaim, aliasClaim ownership.Claim
	// roleClaim is whose the role ID says the role is.
	roleClaim ownership.Claim
	// The state of the bindings the claims name, when they are another
	// binding's in this cluster.
	entityHolder, aliasHolderState, roleHolder ownership.HolderState
	// entityProven: the entity has no marker, and status proves it the
	// binding's (the previous release's, or its marker removed by hand).
	entityProven bool
	// linkedRole: the entity holds the alias of the role, whose role ID
	// proves it the binding's.
	linkedRole bool
	// roleKnown: the role was not read. This process found or wrote it as
	// the binding renders it now, under roleID, less than an interval ago
	// (checkSchedule): it is taken as it was, as between any two drift
	// checks, and role is the rendering.
	roleKnown   bool
	mount, name string
	entityName  string
	// places are the stale placements (a switch, or the binding's
	// deletion), read where they are.
	places []placeObserved
}

// observe reads the role, its role ID and the entity, and, only when the
// role is not linked to the entity, whose login the role leads to, and the
// state of a binding a claim names. A binding in sync costs the first
// three (the accessor comes from the client's cache). knownRoleID: the
// role is as the binding renders it under that role ID, known from this
// process's last check (checkSchedule): only the entity is read.
func (p *bindingPipeline) observeCurrent(ctx context.Context, vc vault.Client, obj *v1alpha1.MinionBinding, res *render.Result, rivals ownership.Rivals,
	knownRoleID string) (*observed, error) {
	mount, role := res.AppRole.Mount, res.AppRole.RoleName
	accessor, err := vc.MountAccessor(ctx, mount)
	if err != nil {
		return nil, fmt.Errorf("reading the accessor of auth/%s: %w", mount, err)
	}
	if accessor == "" {
		return nil, outcome.VaultState(nil, fmt.Sprintf("no auth method is mounted at auth/%s", mount))
	}
	o := &observed{proof: p.proof, accessor: accessor, mount: mount, name: role, entityName: res.EntityName, rivals: rivals}
	if knownRoleID != "" {
		o.role, o.roleID, o.roleKnown = roleParams(res.AppRole.Params), knownRoleID, true
	} else if o.role, err = vc.ReadRole(ctx, mount, role); err != nil {
		return nil, fmt.Errorf("reading AppRole %s/%s: %w", mount, role, err)
	}
	if o.role != nil && !o.roleKnown {
		if o.roleID, err = vc.ReadRoleID(ctx, mount, role); err != nil {
			return nil, fmt.Errorf("reading the role ID of AppRole %s/%s: %w", mount, role, err)
		}
	}
	if o.entity, err = vc.ReadEntityByName(ctx, res.EntityName); err != nil {
		return nil, fmt.Errorf("reading entity %s: %w", res.EntityName, err)
	}
	if m, ok := ownership.ParseMarker(entityMetadata(o.entity)[ownership.MarkerKey]); ok && p.proof.byName && m.Namespace == obj.Namespace && m.Name == obj.Name {
		// The marker to keep writing is the one the entity has.
		o.proof.self = m
	}
	if o.roleID != "" {
		if a := aliasOn(o.entity, accessor); a == nil || a.Name != o.roleID {
			if o.aliasHolder, err = vc.LookupEntityByAlias(ctx, o.roleID, accessor); err != nil {
				return nil, fmt.Errorf("looking up the entity of AppRole %s/%s's role ID: %w", mount, role, err)
			}
		}
	}
	o.deriveClaims()
	// The claims often name one holder: asked of the API server once.
	states := map[ownership.Claim]ownership.HolderState{}
	state := func(c ownership.Claim) (ownership.HolderState, error) {
		if st, ok := states[c]; ok {
			return st, nil
		}
		st, err := p.holders(ctx, c, o.proof.self)
		states[c] = st
		return st, err
	}
	if o.entityHolder, err = state(o.entityClaim); err != nil {
		return nil, err
	}
	if o.role != nil {
		if o.aliasHolderState, err = state(o.aliasClaim); err != nil {
			return nil, err
		}
		if o.roleHolder, err = state(o.roleClaim); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// deriveClaims reads whose each object is from what was read: the
// entity's marker, the role's role ID, and the alias that links them.
func (o *observed) deriveClaims() {
	o.entityClaim = o.proof.claim(o.entity)
	o.entityProven = o.entityClaim.Holder == ownership.HolderUnmarked && o.proof.provenByStatus(o.entity)
	o.roleClaim = ownership.Claim{}
	if o.role != nil {
		o.roleClaim = o.proof.roleClaim(o.roleID, o.mount, o.name, o.rivals.Others)
	}
	onMount := aliasOn(o.entity, o.accessor)
	o.linkedRole = o.roleClaim.Holder == ownership.HolderSelf && onMount != nil && onMount.Name == o.roleID
	o.aliasClaim = aliasClaim(o)
}

// aliasClaim is who holds the alias named by the role's role ID: the
// binding when it is on its entity (or on an unmarked entity status
// proves the binding's), else the holder's marker.
func aliasClaim(o *observed) ownership.Claim {
	if o.role == nil {
		return ownership.Claim{}
	}
	switch onMount := aliasOn(o.entity, o.accessor); {
	case onMount != nil && onMount.Name == o.roleID:
		if o.entityClaim.Holder == ownership.HolderOther {
			// On an entity someone else holds: the role follows it.
			return o.entityClaim
		}
		return ownership.Claim{Holder: ownership.HolderSelf}
	case o.aliasHolder != nil:
		c := o.proof.claim(o.aliasHolder)
		if c.Holder == ownership.HolderUnmarked && o.proof.provenByStatus(o.aliasHolder) {
			return ownership.Claim{Holder: ownership.HolderSelf}
		}
		return c
	}
	return ownership.Claim{}
}

func entityMetadata(e *vault.Entity) map[string]string {
	if e == nil {
		return nil
	}
	return e.Metadata
}

// decisions is what may be done with the binding's entity and role.
type decisions struct {
	entity, role ownership.Verdict
}

// decide applies the ownership rules to what was observed: what may be
// done with the entity and with the role, or why nothing may be written.
func decide(o *observed, adopt bool, window time.Duration) (decisions, error) {
	ef := ownership.EntityFacts{Name: o.entityName, Claim: o.entityClaim, Adopt: adopt, ProvenByStatus: o.entityProven,
		LinkedRole: o.linkedRole, Holder: o.entityHolder, Rivals: o.rivals, Window: window}
	d := decisions{entity: ownership.DecideEntity(ef)}
	if err := refusal(d.entity); err != nil {
		return d, err
	}
	rf := ownership.RoleFacts{Mount: o.mount, Name: o.name, Exists: o.role != nil, RoleID: o.roleID, Adopt: adopt,
		ID: o.roleClaim, IDHolder: o.roleHolder, Alias: o.aliasClaim, Holder: o.aliasHolderState, Rivals: o.rivals, Window: window}
	if rf.Exists {
		rf.SlotHeld = aliasOn(o.entity, o.accessor) != nil
		rf.ProvenByStatus = o.proof.roleID != "" && o.proof.roleID == o.roleID
	}
	d.role = ownership.DecideRole(rf)
	return d, refusal(d.role)
}

// refusal turns a Wait or Refuse verdict into the binding's reason.
func refusal(v ownership.Verdict) error {
	switch v.Reason {
	case ownership.ReasonReleasing:
		return &outcome.ErrRefused{Reason: v1alpha1.MinionIDReleasingReason, Msg: v.Why}
	case ownership.ReasonConflict:
		return &outcome.ErrRefused{Reason: v1alpha1.MinionIDConflictReason, Msg: v.Why}
	case ownership.ReasonDuplicate:
		return &outcome.ErrRefused{Reason: v1alpha1.DuplicateMinionIDReason, Msg: v.Why}
	case ownership.ReasonNotOwned:
		return &outcome.ErrRefused{Reason: v1alpha1.NotOwnedReason, Msg: v.Why}
	case ownership.ReasonRetained:
		return &outcome.ErrRefused{Reason: v1alpha1.MinionIDRetainedReason, Msg: v.Why}
	case ownership.ReasonLost:
		return &outcome.ErrRefused{Reason: v1alpha1.MinionIDLostReason, Msg: v.Why}
	}
	return nil
}

// claimState is the state of the binding a claim names, when it is
// another binding of this cluster: asked of the API server when it is
// named; for a role ID of this cluster that names no claimant, gone when
// this operator sees every binding of the cluster (the claimants are all
// there are), unknown otherwise (a shard: another may hold it).
func (r *Reconciler) claimState(ctx context.Context, c ownership.Claim, self ownership.Owner) (ownership.HolderState, error) {
	switch {
	case c.Holder != ownership.HolderOther:
		return ownership.HolderUnknown, nil
	case c.Unnamed == ownership.UnnamedGone && r.SeesAllBindings:
		return ownership.HolderGone, nil
	}
	return r.holderState(ctx, c.Other, self)
}

// holderState asks the API server about the binding a marker names, when
// it is in this cluster (lostnotice.HolderOf).
func (r *Reconciler) holderState(ctx context.Context, holder, self ownership.Owner) (ownership.HolderState, error) {
	if !holder.SameCluster(self) || holder.UID == "" {
		return ownership.HolderUnknown, nil
	}
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	state, _, err := lostnotice.HolderOf(ctx, reader, holder)
	return state, err
}
