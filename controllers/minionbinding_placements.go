package controllers

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// A placement is where a binding's Vault objects live: the AppRole role
// lower(minionID) on mount, the entity named entity, and the entity's alias
// on the mount, all in the Vault of connection. A binding has one current
// placement (what it renders now); a switch of template, mount, entity name
// or connection leaves an old one behind, to be removed.
//
// The operator records a placement in the binding's VaultObjectsAnnotation
// before it writes anything there, in the same request that adds the
// finalizer: a crash, or a write that fails half-way, never loses track of
// an object, and deletion finds everything the binding ever created.
// (Status cannot hold this record: the finalizer is metadata, so a first
// write would cost two requests before Vault is touched.)
type placement struct {
	Connection string `json:"connection"`
	Mount      string `json:"mount"`
	Entity     string `json:"entity"`
}

// sameRole: the two placements name the same AppRole role (Vault lowercases
// role names; mounts are cleaned by the renderer).
func (p placement) sameRole(q placement) bool {
	return p.Connection == q.Connection && strings.Trim(p.Mount, "/") == strings.Trim(q.Mount, "/")
}

// sameEntity: the two placements name the same entity (entity names are
// case-insensitive in Vault).
func (p placement) sameEntity(q placement) bool {
	return p.Connection == q.Connection && strings.EqualFold(p.Entity, q.Entity)
}

func (p placement) same(q placement) bool { return p.sameRole(q) && p.sameEntity(q) }

func (p placement) String() string {
	return fmt.Sprintf("AppRole %s and entity %s in VaultConnection %s", p.Mount, p.Entity, p.Connection)
}

// recordedPlacements reads the annotation, and adds the placement that
// status names (bindings applied by an operator version without the
// annotation, or whose annotation was removed). An annotation that is not
// a list of placements is an error: the binding must not forget objects
// because someone broke the record.
func recordedPlacements(obj *v1alpha1.MinionBinding) ([]placement, error) {
	var out []placement
	if raw, ok := obj.Annotations[v1alpha1.VaultObjectsAnnotation]; ok && raw != "" {
		if err := json.Unmarshal([]byte(raw), &out); err != nil {
			return nil, fmt.Errorf("annotation %s is not a JSON list of {connection, mount, entity}: %w", v1alpha1.VaultObjectsAnnotation, err)
		}
		for _, p := range out {
			if p.Connection == "" || p.Mount == "" || p.Entity == "" {
				return nil, fmt.Errorf("annotation %s: every entry needs a connection, a mount and an entity: %s", v1alpha1.VaultObjectsAnnotation, raw)
			}
		}
	}
	st := &obj.Status
	if st.AppRole != nil && st.Entity != nil && st.Connection != "" && st.AppRole.Mount != "" && st.Entity.Name != "" {
		out = addPlacement(out, placement{Connection: st.Connection, Mount: st.AppRole.Mount, Entity: st.Entity.Name})
	}
	return out, nil
}

// addPlacement appends p unless it is recorded already.
func addPlacement(ps []placement, p placement) []placement {
	if slices.ContainsFunc(ps, p.same) {
		return ps
	}
	return append(ps, p)
}

// setPlacements writes the record into obj's annotations (the caller
// patches), or removes the annotation when there is nothing left.
func setPlacements(obj *v1alpha1.MinionBinding, ps []placement) {
	if len(ps) == 0 {
		delete(obj.Annotations, v1alpha1.VaultObjectsAnnotation)
		return
	}
	raw, _ := json.Marshal(ps) // strings only: cannot fail
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[v1alpha1.VaultObjectsAnnotation] = string(raw)
}
