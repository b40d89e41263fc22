// Package vaulttest is test support: Fake, an in-memory vault.Client with
// Vault's semantics, for the unit tests of the controllers and the CLI (as
// net/http/httptest is for net/http). No product code imports it.
package vaulttest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	hclparser "github.com/hashicorp/hcl"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/internal/rules"
)

// Fake is an in-memory vault.Client for controller unit tests, with the
// semantics observed from Vault 1.21 (the integration test checks the same
// behaviour against a real server):
//
//   - AppRole role names are lowercased (and must match Vault's name
//     pattern, else 404 "unsupported path"); a write updates only the
//     parameters given (a new role gets Vault's defaults and a role ID); a
//     read returns every parameter, durations and counts as json.Number
//     (integer seconds), lists as []any, as the real client does; lists are
//     kept as given (trimmed, not lowercased, sorted or deduplicated);
//   - entity metadata is replaced wholesale on write and checked as Vault
//     does (at most 64 pairs, keys of [a-zA-Z0-9=/+_-] up to 128 bytes and
//     not starting with "vault-", values up to 512 bytes: else HTTP 500);
//     entity names are matched case-insensitively (writing another case
//     renames); deleting an entity deletes its aliases;
//   - an alias name + mount accessor pair is unique (creating it again
//     moves the existing alias), an entity has at most one alias per mount;
//   - policy names are lowercased, "root" cannot be written or deleted
//     (reading it answers found, with no rules), "default" exists and
//     cannot be deleted, the HCL must parse;
//   - reads of absent objects return nil/""/false, deletes of absent
//     objects succeed; errors are *vault.Error with Vault's status codes.
//
// The zero value is ready to use and has the AppRole auth method enabled
// at "salt-minions" (see EnableAuth). Every method counts as one call of
// its name (Calls("WriteRole")) and of its kind (Calls("write")); Writes
// counts the calls that change something. FailNext makes the next call
// fail.
type Fake struct {
	mu        sync.Mutex
	init      bool
	version   string
	clusterID string
	mounts    map[string]string         // auth mount -> accessor
	roles     map[string]map[string]any // "<mount>/<name>" -> parameters
	roleIDs   map[string]string         // "<mount>/<name>" -> role ID
	entities  map[string]*vault.Entity  // by ID (Aliases unused: see aliases)
	aliases   map[string]*vault.Alias   // by ID
	policies  map[string]string
	calls     map[string]int
	failNext  map[string][]error
	closed    bool
}

// NewFake returns an empty Fake (the zero value works as well).
func NewFake() *Fake {
	f := &Fake{}
	f.mu.Lock()
	f.lazyInit()
	f.mu.Unlock()
	return f
}

var _ vault.Client = (*Fake)(nil)

func (f *Fake) lazyInit() {
	if f.init {
		return
	}
	f.init = true
	if f.version == "" {
		f.version = "1.21.4"
	}
	f.clusterID = randomUUID()
	f.mounts = map[string]string{"token": "auth_token_" + randomHex(4), "salt-minions": "auth_approle_" + randomHex(4)}
	f.roles = map[string]map[string]any{}
	f.roleIDs = map[string]string{}
	f.entities = map[string]*vault.Entity{}
	f.aliases = map[string]*vault.Alias{}
	f.policies = map[string]string{"default": "# the default policy\n"}
	f.calls = map[string]int{}
	f.failNext = map[string][]error{}
}

// EnableAuth enables an auth method at mount (if not yet) and returns its
// accessor.
func (f *Fake) EnableAuth(mount string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lazyInit()
	mount = rules.CleanMount(mount)
	if acc, ok := f.mounts[mount]; ok {
		return acc
	}
	acc := "auth_approle_" + randomHex(4)
	f.mounts[mount] = acc
	return acc
}

// Reset makes the Fake a new Vault, as a dev server restarted with no
// storage: a new cluster ID, nothing written, the AppRole mounts enabled
// again with new accessors. The counters stay.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lazyInit()
	mounts := f.mounts
	calls, failNext, version := f.calls, f.failNext, f.version
	f.init = false
	f.lazyInit()
	f.calls, f.failNext, f.version = calls, failNext, version
	for m := range mounts {
		if _, ok := f.mounts[m]; !ok {
			f.mounts[m] = "auth_approle_" + randomHex(4)
		}
	}
}

// SetVersion sets the version ServerInfo returns.
func (f *Fake) SetVersion(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lazyInit()
	f.version = v
}

// FailNext makes the next call of op fail with err. op is a method name
// ("WriteRole"), a kind ("read", "write", "delete") or "*" (any call).
// Several FailNext for one op fail that many calls, in order.
func (f *Fake) FailNext(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lazyInit()
	f.failNext[op] = append(f.failNext[op], err)
}

// Calls is how many times op was called (failed calls included). op is a
// method name, a kind ("read", "write", "delete") or "*" (all calls).
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lazyInit()
	return f.calls[op]
}

// Writes is how many calls could change Vault (Calls("write") +
// Calls("delete")), failed ones included.
func (f *Fake) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lazyInit()
	return f.calls[vault.OpWrite] + f.calls[vault.OpDelete]
}

// ResetCalls sets every counter to zero.
func (f *Fake) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lazyInit()
	clear(f.calls)
}

// Close marks the Fake closed (Closed reports it); calls keep working.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Closed reports whether Close was called (e.g. by a Cache).
func (f *Fake) Closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// begin counts a call and returns an injected failure, if any. It is called
// with f.mu held.
func (f *Fake) begin(method, kind string) error {
	f.lazyInit()
	f.calls[method]++
	f.calls[kind]++
	f.calls["*"]++
	for _, key := range []string{method, kind, "*"} {
		if q := f.failNext[key]; len(q) > 0 {
			err := q[0]
			if len(q) == 1 {
				delete(f.failNext, key)
			} else {
				f.failNext[key] = q[1:]
			}
			return err
		}
	}
	return nil
}

func fakeErr(op, path string, code int, msg string) *vault.Error {
	e := &vault.Error{Op: op + " " + path, StatusCode: code}
	if msg != "" {
		e.Messages = []string{msg}
	}
	return e
}

func (f *Fake) ServerInfo(ctx context.Context) (vault.ServerInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ServerInfo", vault.OpRead); err != nil {
		return vault.ServerInfo{}, err
	}
	return vault.ServerInfo{Version: f.version, ClusterID: f.clusterID}, nil
}

// CheckToken implements vault.Client; FailNext("CheckToken", ...) makes it fail.
func (f *Fake) CheckToken(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.begin("CheckToken", vault.OpRead)
}

func (f *Fake) MountAccessor(ctx context.Context, authMount string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("MountAccessor", vault.OpRead); err != nil {
		return "", err
	}
	mount := rules.CleanMount(authMount)
	if err := rules.Segments("auth mount", mount); err != nil {
		return "", invalid(vault.OpRead, "sys/auth", err)
	}
	return f.mounts[mount], nil
}

func (f *Fake) AuthMounts(ctx context.Context) (map[string]vault.AuthMount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("AuthMounts", vault.OpRead); err != nil {
		return nil, err
	}
	out := map[string]vault.AuthMount{}
	for m, acc := range f.mounts {
		typ := "approle"
		if m == "token" {
			typ = "token"
		}
		out[m] = vault.AuthMount{Type: typ, Accessor: acc}
	}
	return out, nil
}

// roleKey checks mount and name and returns the role's key, lowercased,
// and its path.
func (f *Fake) roleKey(op, mount, name, suffix string) (string, string, error) {
	p, err := rules.RolePath(mount, name)
	if err != nil {
		return "", "", invalid(op, "auth/"+mount+"/role/"+name+suffix, err)
	}
	mount = rules.CleanMount(mount)
	if _, ok := f.mounts[mount]; !ok || mount == "token" {
		return "", "", fakeErr(op, p+suffix, http.StatusNotFound, fmt.Sprintf("no handler for route %q. route entry not found.", p+suffix))
	}
	if !fakeRoleNameRE.MatchString(name) {
		return "", "", fakeErr(op, p+suffix, http.StatusNotFound, "1 error occurred:\n\t* unsupported path\n\n")
	}
	return mount + "/" + strings.ToLower(name), p, nil
}

func (f *Fake) ReadRole(ctx context.Context, mount, name string) (map[string]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ReadRole", vault.OpRead); err != nil {
		return nil, err
	}
	key, _, err := f.roleKey(vault.OpRead, mount, name, "")
	if err != nil {
		return nil, err
	}
	r, ok := f.roles[key]
	if !ok {
		return nil, nil
	}
	return cloneJSON(r), nil
}

// fakeRoleNameRE is the AppRole role name pattern (framework.GenericNameWithAtRegex).
var fakeRoleNameRE = regexp.MustCompile(`^\w(([\w-.@]+)?\w)?$`)

// Role parameters as Vault 1.21 returns them.
var (
	fakeRoleDurations = []string{"secret_id_ttl", "token_explicit_max_ttl", "token_max_ttl", "token_period", "token_ttl"}
	fakeRoleInts      = []string{"secret_id_num_uses", "token_num_uses"}
	fakeRoleBools     = []string{"bind_secret_id", "token_no_default_policy", "local_secret_ids"}
	fakeRoleLists     = []string{"secret_id_bound_cidrs", "token_bound_cidrs", "token_policies"}
)

func (f *Fake) WriteRole(ctx context.Context, mount, name string, params map[string]any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("WriteRole", vault.OpWrite); err != nil {
		return err
	}
	key, p, err := f.roleKey(vault.OpWrite, mount, name, "")
	if err != nil {
		return err
	}
	bad := func(msg string) error { return fakeErr(vault.OpWrite, p, http.StatusBadRequest, msg) }
	old, exists := f.roles[key]
	r := vault.RoleDefaults()
	if exists {
		r = cloneJSON(old)
	}
	if _, ok := params["local_secret_ids"]; ok && exists {
		return bad("local_secret_ids can only be modified during role creation")
	}
	for k, v := range params {
		switch {
		case slices.Contains(fakeRoleDurations, k):
			secs, err := fakeSeconds(v)
			if err != nil {
				return bad(fmt.Sprintf("error converting input %v for field %q: %v", v, k, err))
			}
			r[k] = json.Number(strconv.FormatInt(secs, 10))
		case slices.Contains(fakeRoleInts, k):
			n, err := fakeInt(v)
			if err != nil {
				return bad(fmt.Sprintf("error converting input %v for field %q: %v", v, k, err))
			}
			if n < 0 {
				return bad(fmt.Sprintf("'%s' cannot be negative", k))
			}
			r[k] = json.Number(strconv.FormatInt(n, 10))
		case slices.Contains(fakeRoleBools, k):
			b, err := fakeBool(v)
			if err != nil {
				return bad(fmt.Sprintf("error converting input %v for field %q: %v", v, k, err))
			}
			r[k] = b
		case slices.Contains(fakeRoleLists, k):
			list, err := fakeStrings(v)
			if err != nil {
				return bad(fmt.Sprintf("error converting input %v for field %q: %v", v, k, err))
			}
			if k != "token_policies" {
				for _, cidr := range list {
					if _, err := netip.ParsePrefix(cidr); err != nil {
						if _, err := netip.ParseAddr(cidr); err != nil {
							return bad("invalid CIDR blocks")
						}
					}
				}
			}
			out := make([]any, len(list))
			for i, s := range list {
				out[i] = s
			}
			r[k] = out
		case k == "token_type":
			s, _ := v.(string)
			switch s {
			case "", "default":
				s = "default"
			case "service", "batch":
			case "default-service":
				s = "service"
			case "default-batch":
				s = "batch"
			default:
				return bad(fmt.Sprintf("invalid 'token_type' value %q", s))
			}
			r[k] = s
		default:
			// Vault ignores unknown parameters (with a warning).
		}
	}
	ttl, maxTTL := rules.Number(r["token_ttl"]), rules.Number(r["token_max_ttl"])
	if ttl > 0 && maxTTL > 0 && ttl > maxTTL {
		return bad("'token_ttl' cannot be greater than 'token_max_ttl'")
	}
	if r["token_type"] == "batch" && (rules.Number(r["token_period"]) != 0 || rules.Number(r["token_num_uses"]) != 0) {
		return bad("'token_type' cannot be 'batch' or 'default_batch' when set to generate periodic tokens or tokens with limited use count")
	}
	if r["bind_secret_id"] == false && fakeLen(r["secret_id_bound_cidrs"]) == 0 && fakeLen(r["token_bound_cidrs"]) == 0 {
		// Vault 1.21 answers this one with a 500.
		return fakeErr(vault.OpWrite, p, http.StatusInternalServerError, "1 error occurred:\n\t* at least one constraint should be enabled on the role\n\n")
	}
	roleID, _ := params["role_id"].(string)
	if roleID != "" {
		// Vault keeps role IDs unique per mount (approle's role-id index).
		prefix := key[:strings.LastIndex(key, "/")+1]
		for k, id := range f.roleIDs {
			if k != key && strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], "/") && id == roleID {
				// A Go error in approle's setRoleEntry: Vault answers 500.
				return fakeErr(vault.OpWrite, p, http.StatusInternalServerError, "1 error occurred:\n\t* role_id already in use\n\n")
			}
		}
		f.roleIDs[key] = roleID
	} else if _, ok := f.roleIDs[key]; !ok {
		f.roleIDs[key] = randomUUID()
	}
	f.roles[key] = r
	return nil
}

func (f *Fake) DeleteRole(ctx context.Context, mount, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("DeleteRole", vault.OpDelete); err != nil {
		return err
	}
	key, _, err := f.roleKey(vault.OpDelete, mount, name, "")
	if err != nil {
		return err
	}
	delete(f.roles, key)
	delete(f.roleIDs, key)
	return nil
}

func (f *Fake) ReadRoleID(ctx context.Context, mount, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ReadRoleID", vault.OpRead); err != nil {
		return "", err
	}
	key, _, err := f.roleKey(vault.OpRead, mount, name, "/role-id")
	if err != nil {
		return "", err
	}
	return f.roleIDs[key], nil
}

func (f *Fake) entityByName(name string) *vault.Entity {
	for _, e := range f.entities {
		if strings.EqualFold(e.Name, name) {
			return e
		}
	}
	return nil
}

// entityCopy returns e with its aliases, sorted by ID.
func (f *Fake) entityCopy(e *vault.Entity) *vault.Entity {
	out := &vault.Entity{ID: e.ID, Name: e.Name, Metadata: maps.Clone(e.Metadata)}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	for _, a := range f.aliases {
		if a.CanonicalID == e.ID {
			out.Aliases = append(out.Aliases, *a)
		}
	}
	slices.SortFunc(out.Aliases, func(a, b vault.Alias) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (f *Fake) ReadEntityByName(ctx context.Context, name string) (*vault.Entity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ReadEntityByName", vault.OpRead); err != nil {
		return nil, err
	}
	if _, err := rules.EntityPath(name); err != nil {
		return nil, invalid(vault.OpRead, "identity/entity/name/"+name, err)
	}
	e := f.entityByName(name)
	if e == nil {
		return nil, nil
	}
	return f.entityCopy(e), nil
}

// Vault's metadata rules (vault/identity_store_util.go validateMetadata).
const (
	maxMetadataPairs    = 64
	maxMetadataKeyLen   = 128
	maxMetadataValueLen = 512
)

var metadataKeyRE = regexp.MustCompile(`^[a-zA-Z0-9=/+_-]+$`)

func fakeValidateMetadata(md map[string]string) error {
	if len(md) > maxMetadataPairs {
		return fmt.Errorf("metadata cannot contain more than %d key/value pairs", maxMetadataPairs)
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		v := md[k]
		var err error
		switch {
		case k == "":
			err = errors.New("key cannot be blank")
		case !metadataKeyRE.MatchString(k):
			err = errors.New("key contains invalid characters")
		case len(k) > maxMetadataKeyLen:
			err = fmt.Errorf("key is too long (limit: %d characters)", maxMetadataKeyLen)
		case strings.HasPrefix(k, "vault-"):
			err = fmt.Errorf("key prefix %q is reserved for internal use", "vault-")
		case len(v) > maxMetadataValueLen:
			err = fmt.Errorf("value is too long (limit: %d characters)", maxMetadataValueLen)
		}
		if err != nil {
			return fmt.Errorf("failed to load metadata pair (%q, %q): %w", k, v, err)
		}
	}
	return nil
}

func (f *Fake) WriteEntityByName(ctx context.Context, name string, metadata map[string]string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("WriteEntityByName", vault.OpWrite); err != nil {
		return "", err
	}
	p, err := rules.EntityPath(name)
	if err != nil {
		return "", invalid(vault.OpWrite, "identity/entity/name/"+name, err)
	}
	if err := fakeValidateMetadata(metadata); err != nil {
		// Vault 1.21 answers these with a 500.
		return "", fakeErr(vault.OpWrite, p, http.StatusInternalServerError, "1 error occurred:\n\t* invalid entity metadata: "+err.Error()+"\n\n")
	}
	created := ""
	e := f.entityByName(name)
	if e == nil {
		e = &vault.Entity{ID: randomUUID()}
		f.entities[e.ID] = e
		created = e.ID
	}
	e.Name = name // another case renames it
	e.Metadata = maps.Clone(metadata)
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	return created, nil
}

func (f *Fake) DeleteEntityByName(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("DeleteEntityByName", vault.OpDelete); err != nil {
		return err
	}
	if _, err := rules.EntityPath(name); err != nil {
		return invalid(vault.OpDelete, "identity/entity/name/"+name, err)
	}
	e := f.entityByName(name)
	if e == nil {
		return nil
	}
	for id, a := range f.aliases {
		if a.CanonicalID == e.ID {
			delete(f.aliases, id)
		}
	}
	delete(f.entities, e.ID)
	return nil
}

func (f *Fake) accessorKnown(acc string) bool {
	for _, a := range f.mounts {
		if a == acc {
			return true
		}
	}
	return false
}

func (f *Fake) aliasByFactors(name, acc string) *vault.Alias {
	var fold *vault.Alias
	for _, a := range f.aliases {
		if a.MountAccessor != acc {
			continue
		}
		if a.Name == name {
			return a
		}
		if strings.EqualFold(a.Name, name) {
			fold = a
		}
	}
	return fold
}

func (f *Fake) LookupEntityByAlias(ctx context.Context, name, mountAccessor string) (*vault.Entity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	const p = "identity/lookup/entity"
	if err := f.begin("LookupEntityByAlias", vault.OpRead); err != nil {
		return nil, err
	}
	if name == "" || mountAccessor == "" {
		return nil, invalid(vault.OpRead, p, fmt.Errorf("%w: a lookup needs an alias name and a mount accessor", vault.ErrInvalid))
	}
	if a := f.aliasByFactors(name, mountAccessor); a != nil {
		if e, ok := f.entities[a.CanonicalID]; ok {
			return f.entityCopy(e), nil
		}
	}
	return nil, nil
}

func (f *Fake) CreateEntityAlias(ctx context.Context, name, mountAccessor, canonicalID string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	const p = "identity/entity-alias"
	if err := f.begin("CreateEntityAlias", vault.OpWrite); err != nil {
		return "", err
	}
	if name == "" || mountAccessor == "" || canonicalID == "" {
		return "", invalid(vault.OpWrite, p, fmt.Errorf("%w: an alias needs a name, a mount accessor and an entity ID", vault.ErrInvalid))
	}
	if !f.accessorKnown(mountAccessor) {
		return "", fakeErr(vault.OpWrite, p, http.StatusBadRequest, fmt.Sprintf("invalid mount accessor %q", mountAccessor))
	}
	if existing := f.aliasByFactors(name, mountAccessor); existing != nil {
		// Vault turns this into an update of the existing alias.
		if err := f.updateAlias(vault.OpWrite, p, existing, name, mountAccessor, canonicalID); err != nil {
			return "", err
		}
		return existing.ID, nil
	}
	if _, ok := f.entities[canonicalID]; !ok {
		return "", fakeErr(vault.OpWrite, p, http.StatusBadRequest, "invalid canonical ID")
	}
	for _, a := range f.aliases {
		if a.CanonicalID == canonicalID && a.MountAccessor == mountAccessor {
			return "", fakeErr(vault.OpWrite, p, http.StatusBadRequest, "Alias already exists for requested entity and mount accessor")
		}
	}
	a := &vault.Alias{ID: randomUUID(), Name: name, MountAccessor: mountAccessor, CanonicalID: canonicalID}
	f.aliases[a.ID] = a
	return a.ID, nil
}

// updateAlias is Vault's handleAliasUpdate.
func (f *Fake) updateAlias(op, p string, a *vault.Alias, name, acc, canonicalID string) error {
	if name == "" {
		name = a.Name
	}
	if acc == "" {
		acc = a.MountAccessor
	}
	if canonicalID == "" {
		canonicalID = a.CanonicalID
	}
	if name == a.Name && acc == a.MountAccessor && canonicalID == a.CanonicalID {
		return nil
	}
	if acc != a.MountAccessor && !f.accessorKnown(acc) {
		return fakeErr(op, p, http.StatusBadRequest, fmt.Sprintf("invalid mount accessor %q", acc))
	}
	if name != a.Name || acc != a.MountAccessor {
		if other := f.aliasByFactors(name, acc); other != nil && other.ID != a.ID {
			return fakeErr(op, p, http.StatusBadRequest, "alias with combination of mount accessor and name already exists")
		}
	}
	if _, ok := f.entities[canonicalID]; !ok {
		return fakeErr(op, p, http.StatusBadRequest, "given 'canonical_id' is not associated with an entity")
	}
	for _, other := range f.aliases {
		if other.ID != a.ID && other.CanonicalID == canonicalID && other.MountAccessor == acc {
			return fakeErr(op, p, http.StatusBadRequest, "Alias cannot be updated as the given entity already has an alias for this mount ")
		}
	}
	a.Name, a.MountAccessor, a.CanonicalID = name, acc, canonicalID
	return nil
}

func (f *Fake) UpdateEntityAlias(ctx context.Context, id, name, mountAccessor, canonicalID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("UpdateEntityAlias", vault.OpWrite); err != nil {
		return err
	}
	if err := rules.Segment("alias ID", id); err != nil {
		return invalid(vault.OpWrite, "identity/entity-alias/id/"+id, err)
	}
	p := "identity/entity-alias/id/" + id
	a, ok := f.aliases[id]
	if !ok {
		return fakeErr(vault.OpWrite, p, http.StatusBadRequest, "invalid alias ID provided")
	}
	return f.updateAlias(vault.OpWrite, p, a, name, mountAccessor, canonicalID)
}

func (f *Fake) DeleteEntityAlias(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("DeleteEntityAlias", vault.OpDelete); err != nil {
		return err
	}
	if err := rules.Segment("alias ID", id); err != nil {
		return invalid(vault.OpDelete, "identity/entity-alias/id/"+id, err)
	}
	delete(f.aliases, id)
	return nil
}

func (f *Fake) ReadPolicy(ctx context.Context, name string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ReadPolicy", vault.OpRead); err != nil {
		return "", false, err
	}
	if _, err := rules.PolicyPath(name); err != nil {
		return "", false, invalid(vault.OpRead, "sys/policies/acl/"+name, err)
	}
	name = strings.ToLower(name)
	if name == "root" {
		return "", true, nil // Vault: found, with no rules
	}
	hcl, ok := f.policies[name]
	return hcl, ok, nil
}

func (f *Fake) WritePolicy(ctx context.Context, name, hcl string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("WritePolicy", vault.OpWrite); err != nil {
		return err
	}
	p, err := rules.PolicyPath(name)
	if err != nil {
		return invalid(vault.OpWrite, "sys/policies/acl/"+name, err)
	}
	name = strings.ToLower(name)
	if name == "root" {
		return fakeErr(vault.OpWrite, p, http.StatusBadRequest, `cannot update "root" policy`)
	}
	if hcl == "" {
		return fakeErr(vault.OpWrite, p, http.StatusBadRequest, "'policy' parameter not supplied or empty")
	}
	if _, err := hclparser.Parse(hcl); err != nil {
		return fakeErr(vault.OpWrite, p, http.StatusBadRequest, "failed to parse policy: "+err.Error())
	}
	f.policies[name] = hcl
	return nil
}

func (f *Fake) DeletePolicy(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("DeletePolicy", vault.OpDelete); err != nil {
		return err
	}
	p, err := rules.PolicyPath(name)
	if err != nil {
		return invalid(vault.OpDelete, "sys/policies/acl/"+name, err)
	}
	name = strings.ToLower(name)
	if name == "root" || name == "default" {
		return fakeErr(vault.OpDelete, p, http.StatusBadRequest, fmt.Sprintf("cannot delete %q policy", name))
	}
	delete(f.policies, name)
	return nil
}

// Conversions of role parameters, as Vault's framework does them.

func fakeSeconds(v any) (int64, error) {
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if s == "" {
			return 0, nil
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
		if strings.HasSuffix(s, "d") {
			if n, err := strconv.ParseInt(strings.TrimSuffix(s, "d"), 10, 64); err == nil {
				return n * 86400, nil
			}
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, err
		}
		return int64(d / time.Second), nil
	case time.Duration:
		return int64(x / time.Second), nil
	default:
		return fakeInt(v)
	}
}

func fakeInt(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, errors.New("out of range")
		}
		return int64(x), nil
	case float64:
		return int64(x), nil
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		fl, err := x.Float64()
		return int64(fl), err
	case string:
		return strconv.ParseInt(strings.TrimSpace(x), 10, 64)
	}
	return 0, fmt.Errorf("cannot use %T as an integer", v)
}

func fakeBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		return strconv.ParseBool(x)
	}
	n, err := fakeInt(v)
	return n != 0, err
}

// fakeStrings reads a TypeCommaStringSlice as Vault does: a list, or a
// comma-separated string ("" is the empty list); items are trimmed, but
// empty items and duplicates stay.
func fakeStrings(v any) ([]string, error) {
	var raw []string
	switch x := v.(type) {
	case nil:
	case string:
		if x != "" {
			raw = strings.Split(x, ",")
		}
	case []string:
		raw = x
	case []any:
		for _, item := range x {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("list item %v is not a string", item)
			}
			raw = append(raw, s)
		}
	default:
		return nil, fmt.Errorf("cannot use %T as a list of strings", v)
	}
	out := make([]string, len(raw))
	for i, s := range raw {
		out[i] = strings.TrimSpace(s)
	}
	return out, nil
}

func fakeLen(v any) int {
	l, _ := v.([]any)
	return len(l)
}

// cloneJSON deep-copies a map of JSON values.
func cloneJSON(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if l, ok := v.([]any); ok {
			v = slices.Clone(l)
		}
		out[k] = v
	}
	return out
}

// invalid is the client's error for a request it refuses to send.
func invalid(op, path string, err error) error { return &vault.Error{Op: op + " " + path, Err: err} }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// randomUUID is a random (version 4) UUID, as Vault's IDs look.
func randomUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ListPolicies implements vault.Client, like Vault: sorted, with
// "default" and "root" besides the written ones.
func (f *Fake) ListPolicies(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ListPolicies", vault.OpList); err != nil {
		return nil, err
	}
	out := []string{"default", "root"}
	for name := range f.policies {
		if name != "default" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ListEntities implements vault.Client, like Vault: IDs, names and aliases (no
// metadata), sorted by name.
func (f *Fake) ListEntities(context.Context) ([]vault.Entity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ListEntities", vault.OpList); err != nil {
		return nil, err
	}
	out := make([]vault.Entity, 0, len(f.entities))
	for _, e := range f.entities {
		listed := vault.Entity{ID: e.ID, Name: e.Name}
		for _, a := range f.aliases {
			if a.CanonicalID == e.ID {
				listed.Aliases = append(listed.Aliases, vault.Alias{ID: a.ID, Name: a.Name, MountAccessor: a.MountAccessor, CanonicalID: e.ID})
			}
		}
		out = append(out, listed)
	}
	slices.SortFunc(out, func(a, b vault.Entity) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ListRoles implements vault.Client, like Vault: the mount's role names
// (lowercased), sorted; 404 when nothing is mounted there.
func (f *Fake) ListRoles(_ context.Context, mount string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ListRoles", vault.OpList); err != nil {
		return nil, err
	}
	mount = rules.CleanMount(mount)
	if _, ok := f.mounts[mount]; !ok || mount == "token" {
		p := "auth/" + mount + "/role"
		return nil, fakeErr(vault.OpList, p, http.StatusNotFound, fmt.Sprintf("no handler for route %q. route entry not found.", p))
	}
	var out []string
	for key := range f.roles {
		if i := strings.LastIndex(key, "/"); key[:i] == mount {
			out = append(out, key[i+1:])
		}
	}
	slices.Sort(out)
	return out, nil
}
