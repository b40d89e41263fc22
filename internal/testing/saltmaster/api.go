package saltmaster

import (
	"context"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// The requests of utils/vault/api.py (AppRoleApi, IdentityApi) with the
// master's client. Every write is a POST: client.py's put() is one too.

func (m *Master) mount() (string, error) {
	v, err := m.Config.ValueOf("issue:approle:mount")
	return v.PyStr(), err
}

// readApprole is api.py:47-60 read_approle.
func (m *Master) readApprole(ctx context.Context, name string) (value.Value, error) {
	mount, err := m.mount()
	if err != nil {
		return value.Value{}, err
	}
	res, err := m.client().request(ctx, "GET", "auth/"+mount+"/role/"+name, nothing, false, nothing)
	if err != nil {
		return value.Value{}, err
	}
	return subscript(res, "data")
}

// writeApproleParams is the keyword order of api.py:62-85 write_approle,
// which is the order of its payload (177-200).
var writeApproleParams = []string{
	"bind_secret_id",
	"secret_id_bound_cidrs",
	"secret_id_num_uses",
	"secret_id_ttl",
	"local_secret_ids",
	"token_ttl",
	"token_max_ttl",
	"token_policies",
	"token_bound_cidrs",
	"token_explicit_max_ttl",
	"token_no_default_policy",
	"token_num_uses",
	"token_period",
	"token_type",
	"alias_metadata",
	"token_strictly_bind_ip",
}

// writeApprole is api.py:62-201 write_approle(name, **kwargs): a string
// for a list parameter becomes a one-item list, None values are left out.
func (m *Master) writeApprole(ctx context.Context, name string, kwargs value.Value) error {
	for _, p := range kwargs.Pairs() {
		if !contains(writeApproleParams, p.Key.PyStr()) {
			return saltErr("TypeError", "AppRoleApi.write_approle() got an unexpected keyword argument %s", str(p.Key.PyStr()).PyRepr())
		}
	}
	payload := value.NewMap(nil)
	for _, k := range writeApproleParams {
		v, ok := get(kwargs, k)
		if !ok || v.IsNull() {
			continue
		}
		switch k {
		case "secret_id_bound_cidrs", "token_policies", "token_bound_cidrs":
			if v.IsString() {
				v = value.NewList([]value.Value{v})
			}
			items, err := pyList(v)
			if err != nil {
				return err
			}
			v = items
		case "alias_metadata":
			if !v.IsMap() {
				return saltErr("TypeError", "'%s' object is not iterable", v.Kind().PyType())
			}
		}
		payload = set(payload, k, v)
	}
	mount, err := m.mount()
	if err != nil {
		return err
	}
	_, err = m.client().request(ctx, "POST", "auth/"+mount+"/role/"+name, payload, true, nothing)
	return err
}

// pyList is list(x) for what YAML can hold.
func pyList(v value.Value) (value.Value, error) {
	items, err := pyIter(v)
	if err != nil {
		return value.Value{}, err
	}
	return value.NewList(items), nil
}

// deleteApprole is api.py:203-216 delete_approle.
func (m *Master) deleteApprole(ctx context.Context, name string) error {
	mount, err := m.mount()
	if err != nil {
		return err
	}
	_, err = m.client().request(ctx, "DELETE", "auth/"+mount+"/role/"+name, nothing, false, nothing)
	return err
}

// listApproles is api.py:31-45 list_approles: a mount without roles
// answers 404, which is an empty list.
func (m *Master) listApproles(ctx context.Context) ([]string, error) {
	mount, err := m.mount()
	if err != nil {
		return nil, err
	}
	res, err := m.client().request(ctx, "LIST", "auth/"+mount+"/role", nothing, false, nothing)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	data, err := subscript(res, "data")
	if err != nil {
		return nil, err
	}
	keys, err := subscript(data, "keys")
	if err != nil {
		return nil, err
	}
	items, err := pyIter(keys)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.PyStr())
	}
	return out, nil
}

// readRoleID is api.py:226-248 read_role_id: the role ID, or the wrapped
// answer (serialize_for_minion) when wrap is truthy.
func (m *Master) readRoleID(ctx context.Context, name string, wrap value.Value) (value.Value, error) {
	mount, err := m.mount()
	if err != nil {
		return value.Value{}, err
	}
	endpoint := "auth/" + mount + "/role/" + name + "/role-id"
	if wrap.Truthy() {
		return m.client().request(ctx, "GET", endpoint, nothing, false, wrap)
	}
	res, err := m.client().request(ctx, "GET", endpoint, nothing, false, value.NewBool(false))
	if err != nil {
		return value.Value{}, err
	}
	data, err := subscript(res, "data")
	if err != nil {
		return value.Value{}, err
	}
	return subscript(data, "role_id")
}

// generateSecretIDCall is api.py:276-354 generate_secret_id with metadata:
// the metadata travels as a JSON string (salt.utils.json.dumps, so not
// ASCII-escaped), then as the request body (ASCII-escaped by requests).
func (m *Master) generateSecretIDCall(ctx context.Context, name string, metadata, wrap value.Value) (value.Value, error) {
	meta, err := pyJSON(metadata, false, true)
	if err != nil {
		return value.Value{}, err
	}
	mount, err := m.mount()
	if err != nil {
		return value.Value{}, err
	}
	endpoint := "auth/" + mount + "/role/" + name + "/secret-id"
	payload := omap("metadata", string(meta))
	if wrap.Truthy() {
		return m.client().request(ctx, "POST", endpoint, payload, true, wrap)
	}
	res, err := m.client().request(ctx, "POST", endpoint, payload, true, value.NewBool(false))
	if err != nil {
		return value.Value{}, err
	}
	data, err := subscript(res, "data")
	if err != nil {
		return value.Value{}, err
	}
	return m.secretIDForMinion(data)
}

// secretIDForMinion is leases.VaultSecretId(**data).serialize_for_minion()
// (leases.py:386-461): Vault's answer with the master's clock as its
// creation time.
func (m *Master) secretIDForMinion(data value.Value) (value.Value, error) {
	if !data.IsMap() {
		return value.Value{}, saltErr("TypeError", "saltext.vault.utils.vault.leases.VaultSecretId() argument after ** must be a mapping, not %s", data.Kind().PyType())
	}
	id, ok := get(data, "secret_id")
	if !ok {
		return value.Value{}, saltErr("TypeError", "BaseLease.__init__() missing 1 required positional argument: 'lease_id'")
	}
	ttl, ok := get(data, "secret_id_ttl")
	if !ok {
		return value.Value{}, saltErr("KeyError", "'secret_id_ttl'")
	}
	numUses, ok := get(data, "secret_id_num_uses")
	if !ok {
		numUses = value.NewInt(0)
	}
	created := pyRoundTime(m.now().UnixNano())
	d, ok := pyNumber(ttl)
	if !ok {
		return value.Value{}, saltErr("TypeError", "unsupported operand type(s) for +: 'int' and '%s'", ttl.Kind().PyType())
	}
	expire := value.NewInt(created + int64(d))
	if ttl.Kind() == value.Float {
		expire = value.NewFloat(float64(created) + d)
	}
	return omap(
		"secret_id", id,
		"secret_id_ttl", ttl,
		"secret_id_num_uses", numUses,
		"creation_time", created,
		"expire_time", expire,
	), nil
}

// readEntity is api.py:467-476 read_entity.
func (m *Master) readEntity(ctx context.Context, name string) (value.Value, error) {
	res, err := m.client().request(ctx, "GET", "identity/entity/name/"+name, nothing, false, nothing)
	if err != nil {
		return value.Value{}, err
	}
	return subscript(res, "data")
}

// writeEntity is api.py:513-547 write_entity with metadata only: Vault
// replaces the entity's whole metadata map with it.
func (m *Master) writeEntity(ctx context.Context, name string, metadata value.Value) error {
	_, err := m.client().request(ctx, "POST", "identity/entity/name/"+name, omap("metadata", metadata), true, nothing)
	return err
}

// deleteEntity is api.py:549-558 delete_entity.
func (m *Master) deleteEntity(ctx context.Context, name string) error {
	_, err := m.client().request(ctx, "DELETE", "identity/entity/name/"+name, nothing, false, nothing)
	return err
}

// lookupMountAccessor is api.py:606-608.
func (m *Master) lookupMountAccessor(ctx context.Context, mount string) (value.Value, error) {
	res, err := m.client().request(ctx, "GET", "sys/auth/"+mount, nothing, false, nothing)
	if err != nil {
		return value.Value{}, err
	}
	data, err := subscript(res, "data")
	if err != nil {
		return value.Value{}, err
	}
	return subscript(data, "accessor")
}

// readEntityByAlias is api.py:489-511 read_entity_by_alias: Vault answers
// 204 when no alias matches, which saltext turns into VaultNotFoundError.
func (m *Master) readEntityByAlias(ctx context.Context, alias value.Value, mount string) (value.Value, error) {
	accessor, err := m.lookupMountAccessor(ctx, mount)
	if err != nil {
		return value.Value{}, err
	}
	payload := omap("alias_name", alias, "alias_mount_accessor", accessor)
	res, err := m.client().request(ctx, "POST", "identity/lookup/entity", payload, true, nothing)
	if err != nil {
		return value.Value{}, err
	}
	if !res.IsMap() {
		return value.Value{}, saltErr("VaultNotFoundError", "")
	}
	return subscript(res, "data")
}

// writeEntityAlias is api.py:560-604 write_entity_alias: the entity's
// existing alias on the mount is updated (its id sent along), else Vault
// creates one, or moves the alias of that name to this entity.
func (m *Master) writeEntityAlias(ctx context.Context, name string, aliasName value.Value, mount string) error {
	entity, err := m.readEntity(ctx, name)
	if err != nil {
		return err
	}
	accessor, err := m.lookupMountAccessor(ctx, mount)
	if err != nil {
		return err
	}
	id, err := subscript(entity, "id")
	if err != nil {
		return err
	}
	payload := omap("canonical_id", id, "mount_accessor", accessor, "name", aliasName)
	aliases, err := subscript(entity, "aliases")
	if err != nil {
		return err
	}
	list, err := pyIter(aliases)
	if err != nil {
		return err
	}
	for _, alias := range list {
		acc, err := subscript(alias, "mount_accessor")
		if err != nil {
			return err
		}
		if value.Equal(acc, accessor) {
			aid, err := subscript(alias, "id")
			if err != nil {
				return err
			}
			payload = set(payload, "id", aid)
			break
		}
	}
	_, err = m.client().request(ctx, "POST", "identity/entity-alias", payload, true, nothing)
	return err
}
