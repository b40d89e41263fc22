package binding

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// The planner is tested the way CloudNativePG tests
// evaluateNextRoleActions: Vault's state as observed in, the ordered
// actions out, no Vault at all.

var (
	planSelf    = ownership.Owner{Cluster: "c1", Namespace: "salt", Name: "web01", UID: "uid-self"}
	planOther   = ownership.Owner{Cluster: "c1", Namespace: "salt", Name: "web01-b", UID: "uid-other"}
	planEarlier = ownership.Owner{Cluster: "c1", Namespace: "salt", Name: "web01", UID: "uid-earlier"}
)

// ownRoleID is a role ID the operator chose for owner.
func ownRoleID(res *render.Result, owner ownership.Owner) string {
	return ownership.NewRoleID(owner, ownership.RolePlace{Mount: res.AppRole.Mount, Role: res.AppRole.RoleName}, [16]byte{7})
}

const (
	accA, accB = "acc-a", "acc-b" // the accessors of salt-minions and salt-minions-b
	newID      = "new-role-id"
)

func planResult(mount, entity string, roles ...string) *render.Result {
	var md []template.KV
	for i, r := range roles {
		md = append(md, template.KV{Key: "roles", Value: r}, template.KV{Key: fmt.Sprintf("roles__%d", i), Value: r})
	}
	return &render.Result{EntityName: entity, EntityMetadata: md[:min(len(md), 2)],
		AppRole: render.AppRolePayload{Mount: mount, RoleName: "web01", Params: []render.Param{{Name: "token_policies", Value: []string{"salt_role_web"}}}}}
}

// entityOf is an entity marked for owner (zero: unmarked) with its
// metadata rendered from res, and aliases "name@accessor#id".
func entityOf(res *render.Result, owner ownership.Owner, id string, aliases ...vault.Alias) *vault.Entity {
	md, _ := ownership.Metadata(nil, res.EntityMetadata, owner)
	if owner == (ownership.Owner{}) {
		delete(md, ownership.MarkerKey)
	}
	return &vault.Entity{ID: id, Name: res.EntityName, Metadata: md, Aliases: aliases}
}

func alias(id, name, acc string) vault.Alias {
	return vault.Alias{ID: id, Name: name, MountAccessor: acc}
}

var syncedRole = map[string]any{"token_policies": []any{"salt_role_web"}}

// world builds what observe would have read, deriving the claims the way
// observe does.
func world(res *render.Result, pr proof, o observed) *observed {
	o.proof, o.accessor = pr, accA
	if res.AppRole.Mount == "salt-minions-b" {
		o.accessor = accB
	}
	o.mount, o.name, o.entityName = res.AppRole.Mount, res.AppRole.RoleName, res.EntityName
	o.deriveClaims()
	if o.aliasClaim == o.entityClaim && o.aliasHolderState == ownership.HolderUnknown {
		// The API server's answer for the one binding both claims name.
		o.aliasHolderState = o.entityHolder
	}
	return &o
}

func show(as []vaultAction) []string {
	var out []string
	for _, a := range as {
		s := fmt.Sprintf("%s %s %s", a.kind, a.object, a.path())
		switch {
		case a.held:
			s += " (held)"
		case a.drift:
			s += " (drift)"
		}
		if a.place > 0 {
			s += fmt.Sprintf(" @%d", a.place)
		}
		out = append(out, s)
	}
	return out
}

func TestPlanBinding(t *testing.T) {
	res := planResult("salt-minions", "salt_minion_web01", "web")
	self := proof{self: planSelf}
	mine := entityOf(res, planSelf, "e1", alias("a1", "r1", accA))
	drifted := entityOf(res, planSelf, "e1", alias("a1", "r1", accA))
	drifted.Metadata["roles"] = "changed by hand"
	oldPlace := ownership.Placement{Vault: "v", Connection: "vault", Mount: "salt-minions", Entity: "salt_minion_web01"}
	onB := planResult("salt-minions-b", "minion_b_web01", "web")
	renamed := planResult("salt-minions", "minion_x_web01", "web")
	sync := planMode{newRoleID: newID}
	unchanged := planMode{newRoleID: newID, unchanged: true}

	tests := []struct {
		name   string
		res    *render.Result
		o      *observed
		mode   planMode
		want   []string
		refuse string // the ErrRefused reason
	}{
		{name: "new binding: entity, then the alias named by the new role ID, then the role", res: res, o: world(res, self, observed{}), mode: sync,
			want: []string{"create entity identity/entity/name/salt_minion_web01", "create entity-alias identity/entity-alias", "create approle-role auth/salt-minions/role/web01"}},
		{name: "in sync: nothing", res: res, o: world(res, self, observed{role: syncedRole, roleID: "r1", entity: mine}), mode: unchanged},
		{name: "drift: a role field changed in Vault", res: res, o: world(res, self, observed{role: map[string]any{"token_policies": []any{"root"}}, roleID: "r1", entity: mine}), mode: unchanged,
			want: []string{"update approle-role auth/salt-minions/role/web01 (drift)"}},
		{name: "drift: entity metadata changed", res: res, o: world(res, self, observed{role: syncedRole, roleID: "r1", entity: drifted}), mode: unchanged,
			want: []string{"update entity identity/entity/name/salt_minion_web01 (drift)"}},
		{name: "drift in detect-only mode: held, not written", res: res, o: world(res, self, observed{role: syncedRole, roleID: "r1", entity: drifted}), mode: planMode{unchanged: true, detectOnly: true},
			want: []string{"update entity identity/entity/name/salt_minion_web01 (held)"}},
		{name: "detect-only, entity deleted: nothing to link a role to", res: res, o: world(res, proof{self: planSelf, roleID: "r1"}, observed{role: syncedRole, roleID: "r1"}), mode: planMode{unchanged: true, detectOnly: true},
			want: []string{"create entity identity/entity/name/salt_minion_web01 (held)"}},
		{name: "drift: alias deleted (the role proven by status is linked again)", res: res,
			o: world(res, proof{self: planSelf, roleID: "r1"}, observed{role: syncedRole, roleID: "r1", entity: entityOf(res, planSelf, "e1")}), mode: unchanged,
			want: []string{"take approle-role auth/salt-minions/role/web01", "create entity-alias identity/entity-alias (drift)"}},
		{name: "drift: role deleted (a new role ID; the entity's alias renamed to it)", res: res, o: world(res, self, observed{entity: mine}), mode: unchanged,
			want: []string{"update entity-alias identity/entity-alias/id/a1", "create approle-role auth/salt-minions/role/web01 (drift)"}},
		{name: "role re-created and a minion logged in first: the login's alias moves to the entity", res: res,
			o: world(res, self, observed{role: syncedRole, roleID: "r2", entity: mine, aliasHolder: &vault.Entity{ID: "login", Aliases: []vault.Alias{alias("a2", "r2", accA)}}}), mode: sync,
			want: []string{"take approle-role auth/salt-minions/role/web01", "delete entity-alias identity/entity-alias/id/a1", "create entity-alias identity/entity-alias"}},
		{name: "half-failed apply (entity and alias written, the role not): the alias is renamed, the role created", res: res,
			o: world(res, proof{self: planSelf, entityID: "e1"}, observed{entity: entityOf(res, planSelf, "e1", alias("a1", "half", accA))}), mode: sync,
			want: []string{"update entity-alias identity/entity-alias/id/a1", "create approle-role auth/salt-minions/role/web01"}},
		{name: "switch of template (mount and entity name): new objects first, then the old role and entity", res: onB,
			o: world(onB, self, observed{places: []placeObserved{{place: oldPlace, roleStale: true, entityStale: true, roleName: "web01", accessor: accA, entity: mine, roleID: "r1"}}}), mode: sync,
			want: []string{"create entity identity/entity/name/minion_b_web01", "create entity-alias identity/entity-alias", "create approle-role auth/salt-minions-b/role/web01",
				"delete approle-role auth/salt-minions/role/web01 @1", "delete entity identity/entity/name/salt_minion_web01 @1"}},
		{name: "switch of mount: the entity stays, its alias on the old mount goes with the old role", res: planResult("salt-minions-b", "salt_minion_web01", "web"),
			o: world(planResult("salt-minions-b", "salt_minion_web01", "web"), self, observed{entity: mine,
				places: []placeObserved{{place: oldPlace, roleStale: true, roleName: "web01", accessor: accA, roleID: "r1", current: mine}}}), mode: sync,
			want: []string{"create entity-alias identity/entity-alias", "create approle-role auth/salt-minions-b/role/web01",
				"delete approle-role auth/salt-minions/role/web01 @1", "delete entity-alias identity/entity-alias/id/a1 @1"}},
		{name: "switch of entity name: the role's alias moves to the new entity, the old entity goes", res: renamed,
			o: world(renamed, self, observed{role: syncedRole, roleID: "r1", aliasHolder: mine,
				places: []placeObserved{{place: oldPlace, entityStale: true, roleName: "web01", accessor: accA, entity: mine}}}), mode: sync,
			want: []string{"create entity identity/entity/name/minion_x_web01", "create entity-alias identity/entity-alias", "delete entity identity/entity/name/salt_minion_web01 @1"}},
		{name: "the entity is another live binding's", res: res, o: world(res, self, observed{entity: entityOf(res, planOther, "e2"), entityHolder: ownership.HolderLive}),
			refuse: v1alpha1.MinionIDConflictReason},
		{name: "the entity's holder is being deleted: wait", res: res, o: world(res, self, observed{entity: entityOf(res, planOther, "e2"), entityHolder: ownership.HolderDeleting}),
			refuse: v1alpha1.MinionIDReleasingReason},
		{name: "the entity's holder (another binding) is gone without its deletion: lost, the claimant waits", res: res,
			o: world(res, self, observed{role: syncedRole, roleID: "r1", entity: entityOf(res, planOther, "e2", alias("a1", "r1", accA)), entityHolder: ownership.HolderGone}), mode: unchanged,
			refuse: v1alpha1.MinionIDLostReason},
		{name: "lost, in detect-only mode: the claimant waits all the same", res: res,
			o:    world(res, self, observed{role: syncedRole, roleID: "r1", entity: entityOf(res, planOther, "e2", alias("a1", "r1", accA)), entityHolder: ownership.HolderGone}),
			mode: planMode{unchanged: true, detectOnly: true, newRoleID: newID}, refuse: v1alpha1.MinionIDLostReason},
		{name: "the binding's earlier incarnation's (a restore): the marker is taken, the role kept", res: res,
			o: world(res, self, observed{role: syncedRole, roleID: "r1", entity: entityOf(res, planEarlier, "e2", alias("a1", "r1", accA))}), mode: unchanged,
			want: []string{"take entity identity/entity/name/salt_minion_web01"}},
		{name: "gone holder, the binding it was is back: it keeps the minion", res: res,
			o: world(res, self, observed{role: syncedRole, roleID: "r1", entity: entityOf(res, planOther, "e2", alias("a1", "r1", accA)), entityHolder: ownership.HolderGone,
				rivals: ownership.Rivals{Others: []ownership.Owner{{Cluster: "c1", Namespace: "salt", Name: "web01-b", UID: "uid-back"}}}}),
			refuse: v1alpha1.DuplicateMinionIDReason},
		{name: "entity and alias deleted by hand: the role's ID proves it; entity created, alias linked", res: res,
			o: world(res, self, observed{role: syncedRole, roleID: ownRoleID(res, planSelf)}), mode: unchanged,
			want: []string{"create entity identity/entity/name/salt_minion_web01 (drift)", "create entity-alias identity/entity-alias (drift)"}},
		{name: "metadata map replaced (no marker): the linked role proves it; the marker written back", res: res,
			o: world(res, self, observed{role: syncedRole, roleID: ownRoleID(res, planSelf), entity: entityOf(res, ownership.Owner{}, "e1", alias("a1", ownRoleID(res, planSelf), accA))}), mode: unchanged,
			want: []string{"take entity identity/entity/name/salt_minion_web01 (drift)"}},
		{name: "metadata map replaced in detect-only mode: the marker is written back all the same", res: res,
			o:    world(res, self, observed{role: syncedRole, roleID: ownRoleID(res, planSelf), entity: entityOf(res, ownership.Owner{}, "e1", alias("a1", ownRoleID(res, planSelf), accA))}),
			mode: planMode{unchanged: true, detectOnly: true, newRoleID: newID}, want: []string{"take entity identity/entity/name/salt_minion_web01 (drift)"}},
		{name: "a role left by a binding that is gone (its ID says so), the entity deleted: lost, the claimant waits", res: res,
			o: world(res, self, observed{role: syncedRole, roleID: ownRoleID(res, planOther), roleHolder: ownership.HolderGone}), mode: sync,
			refuse: v1alpha1.MinionIDLostReason},
		{name: "another claimant comes first and Vault has nothing of this binding's", res: res,
			o: world(res, self, observed{rivals: ownership.Rivals{Ahead: &planOther, Others: []ownership.Owner{planOther}}}), refuse: v1alpha1.DuplicateMinionIDReason},
		{name: "an unmarked entity without adoptMinions", res: res, o: world(res, self, observed{entity: entityOf(res, ownership.Owner{}, "e3")}), refuse: v1alpha1.NotOwnedReason},
		{name: "an unmarked entity with adoptMinions: taken over", res: res, o: world(res, self, observed{entity: entityOf(res, ownership.Owner{}, "e3")}), mode: planMode{adopt: true, newRoleID: newID},
			want: []string{"take entity identity/entity/name/salt_minion_web01", "create entity-alias identity/entity-alias", "create approle-role auth/salt-minions/role/web01"}},
		{name: "the previous release's entity, proven by status: the marker written as an update", res: res,
			o: world(res, proof{self: planSelf, entityID: "e3", roleID: "r1"}, observed{role: syncedRole, roleID: "r1", entity: entityOf(res, ownership.Owner{}, "e3", alias("a1", "r1", accA))}), mode: sync,
			want: []string{"update entity identity/entity/name/salt_minion_web01"}},
		{name: "a role linked to nobody's entity", res: res, o: world(res, self, observed{role: syncedRole, roleID: "r9", entity: entityOf(res, planSelf, "e1")}), refuse: v1alpha1.NotOwnedReason},
		{name: "a role linked to another live binding's entity", res: res,
			o:      world(res, self, observed{role: syncedRole, roleID: "r9", aliasHolder: entityOf(res, planOther, "e2"), aliasHolderState: ownership.HolderLive}),
			refuse: v1alpha1.MinionIDConflictReason},
		{name: "a plan of manifests takes a marker naming the binding's namespace and name as its own", res: res,
			o: world(res, proof{self: ownership.Owner{Cluster: "this-cluster", Namespace: "salt", Name: "web01", UID: "known-after-apply"}, byName: true},
				observed{role: syncedRole, roleID: "r1", aliasHolder: mine, places: []placeObserved{{place: oldPlace, entityStale: true, roleName: "web01", accessor: accA, entity: mine}}}),
			mode: sync, want: []string{"create entity identity/entity/name/salt_minion_web01", "create entity-alias identity/entity-alias", "delete entity identity/entity/name/salt_minion_web01 @1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := planBinding(tt.res, tt.o, tt.mode)
			var refused *outcome.ErrRefused
			switch {
			case tt.refuse != "":
				if !errors.As(err, &refused) || refused.Reason != tt.refuse || len(plan.actions) != 0 {
					t.Fatalf("err %v, actions %q; want refused %s", err, show(plan.actions), tt.refuse)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if got := show(plan.actions); !slices.Equal(got, tt.want) {
				t.Errorf("actions\n %q\nwant\n %q", got, tt.want)
			}
		})
	}
}

// A new role is created under the role ID its alias is named by, and the
// alias links the entity this plan creates.
func TestPlanCarriesTheNewRoleID(t *testing.T) {
	res := planResult("salt-minions", "salt_minion_web01", "web")
	plan, err := planBinding(res, world(res, proof{self: planSelf}, observed{}), planMode{newRoleID: newID})
	if err != nil || len(plan.actions) != 3 {
		t.Fatalf("%q, %v", show(plan.actions), err)
	}
	entity, link, role := plan.actions[0], plan.actions[1], plan.actions[2]
	if m, ok := ownership.ParseMarker(entity.metadata[ownership.MarkerKey]); !ok || !m.Same(planSelf) {
		t.Errorf("entity created without the binding's marker: %v", entity.metadata)
	}
	if link.aliasName != newID || link.entityID != "" || role.params["role_id"] != newID || role.roleID != newID {
		t.Errorf("alias %+v, role %+v", link, role)
	}
}

// Removals (a deletion, or a forged record) touch only what Vault proves
// the binding's.
func TestPlanRemovals(t *testing.T) {
	res := planResult("salt-minions", "salt_minion_web01", "web")
	p := ownership.Placement{Vault: "v", Connection: "vault", Mount: "salt-minions", Entity: "salt_minion_web01"}
	mine := entityOf(res, planSelf, "e1", alias("a1", "r1", accA))
	theirs := entityOf(res, planOther, "e2", alias("a2", "r2", accA))
	unmarked := entityOf(res, ownership.Owner{}, "e3", alias("a3", "r3", accA))
	tests := []struct {
		name         string
		pr           proof
		po           placeObserved
		want         []string
		wantNotOwned int
	}{
		{"the binding's own: role, then entity", proof{self: planSelf}, placeObserved{entity: mine, roleID: "r1"},
			[]string{"delete approle-role auth/salt-minions/role/web01 @1", "delete entity identity/entity/name/salt_minion_web01 @1"}, 0},
		{"another binding's (a forged record): nothing", proof{self: planSelf}, placeObserved{entity: theirs, roleID: "r2", roleHolder: theirs}, nil, 2},
		{"the previous release's, proven by status", proof{self: planSelf, entityID: "e3"}, placeObserved{entity: unmarked, roleID: "r3"},
			[]string{"delete approle-role auth/salt-minions/role/web01 @1", "delete entity identity/entity/name/salt_minion_web01 @1"}, 0},
		{"an administrator's unmarked entity, no role", proof{self: planSelf}, placeObserved{entity: unmarked}, nil, 1},
		{"nothing mounted there any more: only the entity", proof{self: planSelf}, placeObserved{entity: mine, roleID: "r1", accessor: "-"},
			[]string{"delete entity identity/entity/name/salt_minion_web01 @1"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			po := tt.po
			po.place, po.roleStale, po.entityStale, po.roleName = p, true, true, "web01"
			if po.accessor == "-" {
				po.accessor = ""
			} else {
				po.accessor = accA
			}
			plan := planRemovals([]placeObserved{po}, tt.pr)
			if got := show(plan.actions); !slices.Equal(got, tt.want) || len(plan.notOwned) != tt.wantNotOwned {
				t.Errorf("actions %q, not owned %q; want %q and %d", got, plan.notOwned, tt.want, tt.wantNotOwned)
			}
		})
	}
}
