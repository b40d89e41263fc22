package vault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Change is one write the operator would make, as a plan shows it.
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

// DryRun is a Client that reads from Vault and never writes to it. The
// binding planner only reads (its plan is its list of actions), so writes
// of roles, entities and aliases are refused; ACL policy writes, which the
// template reconciler's own policy step makes, are recorded instead, and
// later reads of those policies answer with the recorded state: the
// changes are the plan of the policies.
type DryRun struct {
	Client

	mu       sync.Mutex
	changes  []Change
	policies map[string]*string // name -> text (nil: deleted)
}

// ErrReadOnly is returned by a DryRun's writes of roles, entities and
// aliases.
var ErrReadOnly = errors.New("a plan writes nothing to Vault")

// NewDryRun wraps c.
func NewDryRun(c Client) *DryRun {
	return &DryRun{Client: c, policies: map[string]*string{}}
}

// Changes returns the recorded policy writes in order.
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

func readOnly(op string) error { return fmt.Errorf("%s: %w", op, ErrReadOnly) }

func (d *DryRun) WriteRole(context.Context, string, string, map[string]any) error {
	return readOnly("writing an AppRole role")
}

func (d *DryRun) DeleteRole(context.Context, string, string) error {
	return readOnly("deleting an AppRole role")
}

func (d *DryRun) WriteEntityByName(context.Context, string, map[string]string) (string, error) {
	return "", readOnly("writing an entity")
}

func (d *DryRun) DeleteEntityByName(context.Context, string) error {
	return readOnly("deleting an entity")
}

func (d *DryRun) CreateEntityAlias(context.Context, string, string, string) (string, error) {
	return "", readOnly("creating an entity alias")
}

func (d *DryRun) UpdateEntityAlias(context.Context, string, string, string, string) error {
	return readOnly("updating an entity alias")
}

func (d *DryRun) DeleteEntityAlias(context.Context, string) error {
	return readOnly("deleting an entity alias")
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
