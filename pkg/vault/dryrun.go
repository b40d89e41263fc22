package vault

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Change is one write the operator would make, as DryRun records it.
type Change struct {
	// Action is "create", "update" or "delete".
	Action string `json:"action"`
	// Kind is "approle-role", "entity", "entity-alias" or "acl-policy".
	Kind string `json:"kind"`
	// Path is the Vault API path written.
	Path string `json:"path"`
	// Before and After are the object's relevant content: role parameters
	// (map), entity metadata (map of strings), alias fields (map) or policy
	// text (string). Before is nil for a create, After for a delete.
	Before any `json:"before,omitempty"`
	After  any `json:"after,omitempty"`
}

// Placeholder stands for a value Vault only assigns when the write is made
// (a new role's role ID, a new entity's ID).
const Placeholder = "(known after apply)"

// DryRun is a Client that reads from Vault and records writes instead of
// making them, so that running the operator's own apply logic against it
// yields exactly the changes the operator would make: the plan. Reads of
// objects it has "written" answer with the recorded state, so a plan of a
// new minion includes the alias that links the new entity to the new role.
type DryRun struct {
	Client

	mu       sync.Mutex
	changes  []Change
	roles    map[string]map[string]any // path -> params (nil: deleted)
	entities map[string]*Entity        // name -> entity (nil: deleted)
	policies map[string]*string        // name -> text (nil: deleted)
}

// NewDryRun wraps c.
func NewDryRun(c Client) *DryRun {
	return &DryRun{Client: c, roles: map[string]map[string]any{}, entities: map[string]*Entity{}, policies: map[string]*string{}}
}

// Changes returns the recorded writes in order.
func (d *DryRun) Changes() []Change {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.changes)
}

func (d *DryRun) record(c Change) {
	d.mu.Lock()
	d.changes = append(d.changes, c)
	d.mu.Unlock()
}

func planRolePath(mount, name string) string {
	return "auth/" + cleanMount(mount) + "/role/" + strings.ToLower(name)
}

func (d *DryRun) ReadRole(ctx context.Context, mount, name string) (map[string]any, error) {
	d.mu.Lock()
	params, ok := d.roles[planRolePath(mount, name)]
	d.mu.Unlock()
	if ok {
		return maps.Clone(params), nil
	}
	return d.Client.ReadRole(ctx, mount, name)
}

func (d *DryRun) WriteRole(ctx context.Context, mount, name string, params map[string]any) error {
	before, err := d.ReadRole(ctx, mount, name)
	if err != nil {
		return err
	}
	action := "update"
	var shown map[string]any
	if before == nil {
		action = "create"
	} else {
		// Only the parameters the operator sets: Vault returns many more.
		shown = map[string]any{}
		for k := range params {
			if v, ok := before[k]; ok {
				shown[k] = v
			}
		}
	}
	path := planRolePath(mount, name)
	d.record(Change{Action: action, Kind: "approle-role", Path: path, Before: shown, After: maps.Clone(params)})
	d.mu.Lock()
	d.roles[path] = maps.Clone(params)
	d.mu.Unlock()
	return nil
}

func (d *DryRun) DeleteRole(ctx context.Context, mount, name string) error {
	before, err := d.ReadRole(ctx, mount, name)
	if err != nil || before == nil {
		return err
	}
	path := planRolePath(mount, name)
	d.record(Change{Action: "delete", Kind: "approle-role", Path: path, Before: before})
	d.mu.Lock()
	d.roles[path] = nil
	d.mu.Unlock()
	return nil
}

func (d *DryRun) ReadRoleID(ctx context.Context, mount, name string) (string, error) {
	d.mu.Lock()
	params, planned := d.roles[planRolePath(mount, name)]
	d.mu.Unlock()
	id, err := d.Client.ReadRoleID(ctx, mount, name)
	if err == nil && id == "" && planned && params != nil {
		return Placeholder, nil
	}
	return id, err
}

func (d *DryRun) ReadEntityByName(ctx context.Context, name string) (*Entity, error) {
	d.mu.Lock()
	e, ok := d.entities[name]
	d.mu.Unlock()
	if ok {
		return cloneEntity(e), nil
	}
	return d.Client.ReadEntityByName(ctx, name)
}

func (d *DryRun) WriteEntityByName(ctx context.Context, name string, metadata map[string]string) (string, error) {
	before, err := d.ReadEntityByName(ctx, name)
	if err != nil {
		return "", err
	}
	after := &Entity{ID: Placeholder, Name: name, Metadata: maps.Clone(metadata)}
	c := Change{Action: "create", Kind: "entity", Path: "identity/entity/name/" + name, After: maps.Clone(metadata)}
	created := Placeholder
	if before != nil {
		c.Action, c.Before = "update", maps.Clone(before.Metadata)
		after.ID, after.Aliases = before.ID, before.Aliases
		created = ""
	}
	d.record(c)
	d.mu.Lock()
	d.entities[name] = after
	d.mu.Unlock()
	return created, nil
}

func (d *DryRun) DeleteEntityByName(ctx context.Context, name string) error {
	before, err := d.ReadEntityByName(ctx, name)
	if err != nil || before == nil {
		return err
	}
	d.record(Change{Action: "delete", Kind: "entity", Path: "identity/entity/name/" + name, Before: maps.Clone(before.Metadata)})
	d.mu.Lock()
	d.entities[name] = nil
	d.mu.Unlock()
	return nil
}

// LookupEntityByAlias answers from Vault: the plan's own aliases are
// always on the binding's entity, which the caller has read.
func (d *DryRun) LookupEntityByAlias(ctx context.Context, name, mountAccessor string) (*Entity, error) {
	return d.Client.LookupEntityByAlias(ctx, name, mountAccessor)
}

func aliasFields(name, mountAccessor, canonicalID string) map[string]any {
	return map[string]any{"name": name, "mount_accessor": mountAccessor, "canonical_id": canonicalID}
}

func (d *DryRun) CreateEntityAlias(_ context.Context, name, mountAccessor, canonicalID string) (string, error) {
	d.record(Change{Action: "create", Kind: "entity-alias", Path: "identity/entity-alias", After: aliasFields(name, mountAccessor, canonicalID)})
	return Placeholder, nil
}

func (d *DryRun) UpdateEntityAlias(ctx context.Context, id, name, mountAccessor, canonicalID string) error {
	d.record(Change{Action: "update", Kind: "entity-alias", Path: "identity/entity-alias/id/" + id,
		Before: map[string]any{"name": name, "mount_accessor": mountAccessor}, After: aliasFields(name, mountAccessor, canonicalID)})
	return nil
}

func (d *DryRun) DeleteEntityAlias(_ context.Context, id string) error {
	d.record(Change{Action: "delete", Kind: "entity-alias", Path: "identity/entity-alias/id/" + id})
	return nil
}

func (d *DryRun) ReadPolicy(ctx context.Context, name string) (string, bool, error) {
	d.mu.Lock()
	p, ok := d.policies[strings.ToLower(name)]
	d.mu.Unlock()
	if ok {
		if p == nil {
			return "", false, nil
		}
		return *p, true, nil
	}
	return d.Client.ReadPolicy(ctx, name)
}

func (d *DryRun) WritePolicy(ctx context.Context, name, hcl string) error {
	before, found, err := d.ReadPolicy(ctx, name)
	if err != nil {
		return err
	}
	c := Change{Action: "create", Kind: "acl-policy", Path: "sys/policies/acl/" + name, After: hcl}
	if found {
		c.Action, c.Before = "update", before
	}
	d.record(c)
	d.mu.Lock()
	d.policies[strings.ToLower(name)] = &hcl
	d.mu.Unlock()
	return nil
}

func (d *DryRun) DeletePolicy(ctx context.Context, name string) error {
	before, found, err := d.ReadPolicy(ctx, name)
	if err != nil || !found {
		return err
	}
	d.record(Change{Action: "delete", Kind: "acl-policy", Path: "sys/policies/acl/" + name, Before: before})
	d.mu.Lock()
	d.policies[strings.ToLower(name)] = nil
	d.mu.Unlock()
	return nil
}

func cloneEntity(e *Entity) *Entity {
	if e == nil {
		return nil
	}
	c := *e
	c.Metadata = maps.Clone(e.Metadata)
	c.Aliases = slices.Clone(e.Aliases)
	return &c
}
