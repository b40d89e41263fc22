package vault

import (
	"context"
	"errors"
	"fmt"
)

// ReadOnly wraps c so that every write is refused: a plan decides by
// reading and prints the actions it would take (the reconcilers' own
// planners, which never write), so a write reaching Vault from a plan is
// a bug this stops.
func ReadOnly(c Client) Client {
	return readOnlyClient{c}
}

// ErrReadOnly is returned by a ReadOnly client's writes.
var ErrReadOnly = errors.New("a plan writes nothing to Vault")

type readOnlyClient struct {
	Client
}

func refused(op string) error { return fmt.Errorf("%s: %w", op, ErrReadOnly) }

func (readOnlyClient) WriteRole(context.Context, string, string, map[string]any) error {
	return refused("writing an AppRole role")
}

func (readOnlyClient) DeleteRole(context.Context, string, string) error {
	return refused("deleting an AppRole role")
}

func (readOnlyClient) WriteEntityByName(context.Context, string, map[string]string) (string, error) {
	return "", refused("writing an entity")
}

func (readOnlyClient) DeleteEntityByName(context.Context, string) error {
	return refused("deleting an entity")
}

func (readOnlyClient) CreateEntityAlias(context.Context, string, string, string) (string, error) {
	return "", refused("creating an entity alias")
}

func (readOnlyClient) UpdateEntityAlias(context.Context, string, string, string, string) error {
	return refused("updating an entity alias")
}

func (readOnlyClient) DeleteEntityAlias(context.Context, string) error {
	return refused("deleting an entity alias")
}

func (readOnlyClient) WritePolicy(context.Context, string, string) error {
	return refused("writing an ACL policy")
}

func (readOnlyClient) DeletePolicy(context.Context, string) error {
	return refused("deleting an ACL policy")
}
