package saltmaster

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/minionvault/minion-vault-operator/internal/saltext"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Master replays a Salt master running saltext-vault 1.8.0: the runner
// functions minions call through peer_run (and the master itself while
// compiling their pillar), and the manual runners, with the Vault calls of
// runners/vault.py and utils/vault/api.py. A Master is one loader context:
// it looks its own token up once and keeps the approle_meta cache.
//
// The methods return what the runner returns (a map; saltext answers
// failures with an "error" key, some also with "expire_cache") and, when
// the runner failed, the error behind it, which carries Vault's status
// (HTTPStatus) and renders as the runner does (PythonError).
type Master struct {
	Config *saltext.Config
	// Vault is where the master's requests go. NewMaster fills Address
	// from server:url; the namespace is always server:namespace.
	Vault Endpoint
	// Token is the master's own Vault token (auth:token).
	Token string
	// Now is the clock of the caches and of issued secret IDs.
	Now func() time.Time
	// MinionData returns a minion's grains and pillar, as
	// salt.utils.minions.get_minion_data or a fresh pillar compile
	// (refreshPillar) would. Nil: grains {"id": minion}, pillar {}.
	MinionData func(minionID string, refreshPillar bool) (grains, pillar value.Value, err error)
	// KnownMinions are the minions whose keys the master accepted
	// (pki_dir/minions): sync_approles and sync_entities default to them.
	KnownMinions []string
	// JID and User are the runner's __jid__ and __user__ for metadata
	// templates; empty: saltext's "<no jid set>", "<no user set>".
	JID, User string

	mu           sync.Mutex
	cache        map[cacheKey]cacheEntry
	tokenChecked bool
}

type cacheKey struct{ bank, key string }

type cacheEntry struct {
	updated int64
	data    value.Value
}

// NewMaster builds a master from its configuration, as saltext's
// _use_local_config does (factory.py:633-648): the Vault address from
// server:url, the token from auth:token. transport nil is
// http.DefaultTransport.
func NewMaster(cfg *saltext.Config, transport http.RoundTripper) *Master {
	return &Master{
		Config: cfg,
		Vault:  Endpoint{Address: cfg.MustValueOf("server:url").PyStr(), Transport: transport},
		Token:  cfg.MustValueOf("auth:token").PyStr(),
		Now:    time.Now,
	}
}

func (m *Master) now() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

// client is the master's AuthenticatedVaultClient (force_local: its own
// configuration, never a minion's).
func (m *Master) client() *vclient {
	return &vclient{
		address:   m.Vault.Address,
		namespace: m.Config.MustValueOf("server:namespace"),
		transport: m.Vault.Transport,
		timeout:   m.Vault.Timeout,
		token:     m.masterToken,
		now:       m.now,
	}
}

// masterToken is factory.py:758-779 (_fetch_token with a configured plain
// token): the first use looks the token up; saltext keeps the result in
// the loader context for the process's life, and so does the Master.
// Renewal (factory.py:120-127) is not ported: the token must outlive the
// Master.
func (m *Master) masterToken() (string, error) {
	if m.tokenChecked {
		return m.Token, nil
	}
	c := &vclient{address: m.Vault.Address, namespace: m.Config.MustValueOf("server:namespace"), transport: m.Vault.Transport, timeout: m.Vault.Timeout}
	res, err := c.requestRaw(context.Background(), "GET", "auth/token/lookup-self", value.NewMap(nil), true, nothing, map[string]string{"X-Vault-Token": m.Token})
	if err != nil {
		return "", err
	}
	if res.status != 200 {
		return "", &saltext.SaltError{
			Class: "VaultException",
			Msg:   "Configured token cannot be verified. It is most likely expired or invalid.",
			Err:   raiseStatus("GET", "auth/token/lookup-self", res),
		}
	}
	m.tokenChecked = true
	return m.Token, nil
}

// ---- salt.cache (salt/cache/__init__.py Cache.cache, flush) ----

// cached is Cache.cache: the stored data while it is younger than expire
// seconds (int(time.time()) - updated > expire refreshes) and truthy; else
// fun's result, stored. A falsy result is stored too, and so never served.
func (m *Master) cached(bank, key string, expire int64, fun func() (value.Value, error)) (value.Value, error) {
	if m.cache == nil {
		m.cache = map[cacheKey]cacheEntry{}
	}
	now := m.now().Unix()
	e, ok := m.cache[cacheKey{bank, key}]
	if ok && now-e.updated <= expire && e.data.Truthy() {
		return e.data, nil
	}
	data, err := fun()
	if err != nil {
		return value.Value{}, err
	}
	m.cache[cacheKey{bank, key}] = cacheEntry{updated: now, data: data}
	return data, nil
}

func (m *Master) flush(bank, key string) {
	delete(m.cache, cacheKey{bank, key})
}

// approleMetaExpiry is runners/vault.py:1195's hard-coded expire=3600.
const approleMetaExpiry = 3600

// lookupApproleCached is runners/vault.py:1195-1225
// _lookup_approle_cached. A role that is absent is looked up twice: the
// False result is not a dict, so saltext flushes and asks again.
func (m *Master) lookupApproleCached(ctx context.Context, minion string, refresh bool) (value.Value, error) {
	bank, key := "minions/"+minion+"/vault", "approle_meta"
	if refresh {
		m.flush(bank, key)
	}
	fun := func() (value.Value, error) { return m.lookupApprole(ctx, minion) }
	meta, err := m.cached(bank, key, approleMetaExpiry, fun)
	if err != nil {
		return value.Value{}, err
	}
	if !meta.IsMap() {
		m.flush(bank, key)
		return m.cached(bank, key, approleMetaExpiry, fun)
	}
	return meta, nil
}

// lookupApprole is runners/vault.py:1187-1192: the role, or False.
func (m *Master) lookupApprole(ctx context.Context, minion string) (value.Value, error) {
	role, err := m.readApprole(ctx, minion)
	if isNotFound(err) {
		return value.NewBool(false), nil
	}
	return role, err
}

// lookupRoleID is runners/vault.py:1228-1233: the role ID (wrapped when
// wrap is truthy), or False.
func (m *Master) lookupRoleID(ctx context.Context, minion string, wrap value.Value) (value.Value, error) {
	rid, err := m.readRoleID(ctx, minion, wrap)
	if isNotFound(err) {
		return value.NewBool(false), nil
	}
	return rid, err
}

// validateSignature is runners/vault.py:955-980 _validate_signature
// without the signature itself (the caller has authenticated the minion):
// issue:block_minion_requests refuses every non-impersonated request.
func (m *Master) validateSignature(impersonated bool) error {
	if impersonated {
		return nil
	}
	block, err := m.Config.ValueOf("issue:block_minion_requests")
	if err != nil {
		return err
	}
	if block.Truthy() {
		return saltErr("AuthenticationError", "Non-impersonated requests have been disabled in the config")
	}
	return nil
}

// answer is the runner's `except Exception as err: return {"error": ...}`.
func answer(err error) map[string]any {
	return map[string]any{"error": PythonError(err)}
}

// expireCache is an answer that also makes the minion drop its cached
// configuration.
func expireCache(msg string) map[string]any {
	return map[string]any{"expire_cache": true, "error": msg}
}

// GetConfig is runners/vault.py:298-371 get_config: the configuration a
// minion works with, including a role ID (response-wrapped unless
// issue:wrap is false). With issue:type approle it creates or rewrites the
// minion's AppRole as _get_role_id (425-457) does. impersonated is a
// request from the master itself, compiling the minion's pillar (saltext's
// impersonated_by_master and SALT_RUNTYPE_MASTER_IMPERSONATING together);
// false is a minion's peer run. issueParams are the minion's
// vault:issue_params (honoured with issue:allow_minion_override_params).
func (m *Master) GetConfig(minionID string, impersonated bool, issueParams map[string]any) (map[string]any, error) {
	return m.getConfig(context.Background(), minionID, impersonated, fromAnyOrNull(issueParams))
}

func fromAnyOrNull(p map[string]any) value.Value {
	if p == nil {
		return value.Value{}
	}
	return fromAny(p)
}

// GetConfigValue is GetConfig with the minion's issue_params as any value
// (saltext ignores one that is not a mapping).
func (m *Master) GetConfigValue(minionID string, impersonated bool, issueParams value.Value) (map[string]any, error) {
	return m.getConfig(context.Background(), minionID, impersonated, issueParams)
}

func (m *Master) getConfig(ctx context.Context, minion string, impersonated bool, issueParams value.Value) (map[string]any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.validateSignature(impersonated); err != nil {
		return nil, err
	}
	ret, err := m.minionConfig(ctx, minion, impersonated, issueParams)
	if err != nil {
		return answer(err), err
	}
	return toMap(ret), nil
}

func (m *Master) minionConfig(ctx context.Context, minion string, impersonated bool, issueParams value.Value) (value.Value, error) {
	c := m.Config
	typ, err := c.ValueOf("issue:type")
	if err != nil {
		return value.Value{}, err
	}
	lifecycle, err := c.ValueOf("auth:token_lifecycle")
	if err != nil {
		return value.Value{}, err
	}
	auth := omap("method", typ, "token_lifecycle", lifecycle)
	cache, err := c.ValueOf("cache")
	if err != nil {
		return value.Value{}, err
	}
	client, err := c.ValueOf("client")
	if err != nil {
		return value.Value{}, err
	}
	nested := []value.Value{}
	wrap, err := c.ValueOf("issue:wrap")
	if err != nil {
		return value.Value{}, err
	}
	var misc value.Value
	if value.Equal(typ, str("token")) {
		tok, numUses, err := m.generateToken(ctx, minion, issueParams, wrap)
		if err != nil {
			return value.Value{}, err
		}
		auth = set(auth, "token", tok)
		if wrap.Truthy() {
			nested = append(nested, str("auth:token"))
			misc = omap("token:num_uses", numUses)
		}
	}
	if value.Equal(typ, str("approle")) {
		mount, err := c.ValueOf("issue:approle:mount")
		if err != nil {
			return value.Value{}, err
		}
		auth = set(auth, "approle_mount", mount)
		auth = set(auth, "approle_name", str(minion))
		bind, err := c.ValueOf("issue:approle:params:bind_secret_id")
		if err != nil {
			return value.Value{}, err
		}
		auth = set(auth, "secret_id", bind)
		rid, err := m.getRoleID(ctx, minion, impersonated, issueParams, wrap)
		if err != nil {
			return value.Value{}, err
		}
		auth = set(auth, "role_id", rid)
		if wrap.Truthy() {
			nested = append(nested, str("auth:role_id"))
		}
	}
	ret := omap("auth", auth, "cache", cache, "client", client, "server", serverConfig(c),
		"wrap_info_nested", value.NewList(nested))
	if !misc.IsNull() {
		ret = set(ret, "misc_data", misc)
	}
	return ret, nil
}

// getRoleID is runners/vault.py:425-457 _get_role_id.
func (m *Master) getRoleID(ctx context.Context, minion string, impersonated bool, issueParams, wrap value.Value) (value.Value, error) {
	approle, err := m.lookupApproleCached(ctx, minion, false)
	if err != nil {
		return value.Value{}, err
	}
	parsed, err := m.Config.ParseIssueParamsValue(issueParams, "")
	if err != nil {
		return value.Value{}, err
	}
	absent := isFalse(approle)
	// impersonated is helpers.get_salt_run_type() ==
	// SALT_RUNTYPE_MASTER_IMPERSONATING: the master compiling the minion's
	// pillar never rewrites an existing role.
	if absent || !impersonated && !approleParamsMatch(approle, parsed) {
		// create/update the AppRole, then refresh the cached read
		if err := m.manageApprole(ctx, minion, issueParams); err != nil {
			return value.Value{}, err
		}
		if _, err := m.lookupApproleCached(ctx, minion, true); err != nil {
			return value.Value{}, err
		}
	}
	rid, err := m.lookupRoleID(ctx, minion, wrap)
	if err != nil {
		return value.Value{}, err
	}
	if isFalse(rid) {
		return value.Value{}, saltErr("SaltRunnerError", "Failed to create AppRole for minion %s.", minion)
	}
	if absent {
		// the AppRole was just created: the entity with its metadata, and
		// the alias that maps the role to it
		if err := m.manageEntity(ctx, minion); err != nil {
			return value.Value{}, err
		}
		if err := m.manageEntityAlias(ctx, minion); err != nil {
			return value.Value{}, err
		}
	}
	return rid, nil
}

// isFalse is `x is False`.
func isFalse(v value.Value) bool { return v.Kind() == value.Bool && !v.Bool() }

// approleParamsMatch is runners/vault.py:460-467 on the cached role read.
func approleParamsMatch(current, issue value.Value) bool {
	ok, _ := paramsMatch(current, issue)
	return ok
}

// GenerateSecretID is runners/vault.py:470-552 generate_secret_id: a secret
// ID for the minion's AppRole (response-wrapped unless issue:wrap is
// false), after rewriting the role when its parameters differ (not when
// impersonated). It never creates a role: without one it asks the minion
// to refresh its configuration.
func (m *Master) GenerateSecretID(minionID string, impersonated bool, issueParams map[string]any) (map[string]any, error) {
	return m.GenerateSecretIDValue(minionID, impersonated, fromAnyOrNull(issueParams))
}

// GenerateSecretIDValue is GenerateSecretID with issue_params as any value.
func (m *Master) GenerateSecretIDValue(minionID string, impersonated bool, issueParams value.Value) (map[string]any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.validateSignature(impersonated); err != nil {
		return nil, err
	}
	ret, err := m.generateSecretID(context.Background(), minionID, impersonated, issueParams)
	var ra *RunnerAnswer
	switch {
	case err == nil:
		return toMap(ret), nil
	case errors.As(err, &ra):
		return ra.answer(), err
	case isNotFound(err):
		// the minion then requests new configuration, which creates the role
		return expireCache(PythonError(err)), err
	}
	return answer(err), err
}

// RunnerAnswer is a refusal the runner answers without an exception
// (runners/vault.py:248, 504-507, 520-524): Msg is the answer's "error".
type RunnerAnswer struct {
	Msg         string
	ExpireCache bool
}

func (r *RunnerAnswer) Error() string { return r.Msg }

func (r *RunnerAnswer) answer() map[string]any {
	if r.ExpireCache {
		return expireCache(r.Msg)
	}
	return map[string]any{"error": r.Msg}
}

func (m *Master) generateSecretID(ctx context.Context, minion string, impersonated bool, issueParams value.Value) (value.Value, error) {
	c := m.Config
	typ, err := c.ValueOf("issue:type")
	if err != nil {
		return value.Value{}, err
	}
	if !value.Equal(typ, str("approle")) {
		return value.Value{}, &RunnerAnswer{Msg: "Master does not issue AppRoles nor secret IDs.", ExpireCache: true}
	}
	meta, err := m.lookupApproleCached(ctx, minion, false)
	if err != nil {
		return value.Value{}, err
	}
	if isFalse(meta) {
		return value.Value{}, saltErr("VaultNotFoundError", "No AppRole found for minion %s.", minion)
	}
	parsed, err := c.ParseIssueParamsValue(issueParams, "")
	if err != nil {
		return value.Value{}, err
	}
	if !impersonated && !approleParamsMatch(meta, parsed) {
		// saltext passes the parsed parameters on, parsed again there
		if err := m.manageApprole(ctx, minion, parsed); err != nil {
			return value.Value{}, err
		}
		if meta, err = m.lookupApproleCached(ctx, minion, true); err != nil {
			return value.Value{}, err
		}
	}
	bind, err := subscript(meta, "bind_secret_id")
	if err != nil {
		return value.Value{}, err
	}
	if !bind.Truthy() {
		return value.Value{}, &RunnerAnswer{Msg: "Minion AppRole does not require a secret ID.", ExpireCache: true}
	}
	server := serverConfig(c)
	wrap, err := c.ValueOf("issue:wrap")
	if err != nil {
		return value.Value{}, err
	}
	sid, err := m.getSecretID(ctx, minion, wrap)
	if err != nil {
		return value.Value{}, err
	}
	ret := omap("server", server, "data", value.NewMap(nil))
	if wrap.Truthy() {
		for _, p := range sid.Pairs() {
			ret = ret.Set(p.Key, p.Val)
		}
	} else {
		ret = set(ret, "data", sid)
	}
	numUses, err := subscript(meta, "secret_id_num_uses")
	if err != nil {
		return value.Value{}, err
	}
	return set(ret, "misc_data", omap("secret_id_num_uses", numUses)), nil
}

// subscript is Python's d[key] with its errors.
func subscript(d value.Value, key string) (value.Value, error) {
	switch d.Kind() {
	case value.Map:
		v, ok := get(d, key)
		if !ok {
			return value.Value{}, saltErr("KeyError", "%s", str(key).PyRepr())
		}
		return v, nil
	case value.List:
		return value.Value{}, saltErr("TypeError", "list indices must be integers or slices, not str")
	case value.String:
		return value.Value{}, saltErr("TypeError", "string indices must be integers, not 'str'")
	}
	return value.Value{}, saltErr("TypeError", "'%s' object is not subscriptable", d.Kind().PyType())
}

// getSecretID is runners/vault.py:1236-1243 _get_secret_id: secret ID
// metadata from metadata:secret, rendered with the minion's cached pillar.
func (m *Master) getSecretID(ctx context.Context, minion string, wrap value.Value) (value.Value, error) {
	patterns, err := m.Config.ValueOf("metadata:secret")
	if err != nil {
		return value.Value{}, err
	}
	meta, err := m.metadata(minion, patterns, false)
	if err != nil {
		return value.Value{}, err
	}
	return m.generateSecretIDCall(ctx, minion, meta, wrap)
}

// manageApprole is runners/vault.py:1171-1178 _manage_approle: the
// parameters, token_policies rendered with a fresh pillar, one write.
func (m *Master) manageApprole(ctx context.Context, minion string, issueParams value.Value) error {
	payload, err := m.Config.ParseIssueParamsValue(issueParams, "")
	if err != nil {
		return err
	}
	pol, err := m.policies(minion, true)
	if err != nil {
		return err
	}
	payload = set(payload, "token_policies", pol)
	return m.writeApprole(ctx, minion, payload)
}

// manageEntity is runners/vault.py:1267-1272 _manage_entity: the entity
// salt_minion_<id> with metadata:entity, rendered with a fresh pillar. The
// write replaces the entity's whole metadata.
func (m *Master) manageEntity(ctx context.Context, minion string) error {
	patterns, err := m.Config.ValueOf("metadata:entity")
	if err != nil {
		return err
	}
	meta, err := m.metadata(minion, patterns, true)
	if err != nil {
		return err
	}
	return m.writeEntity(ctx, "salt_minion_"+minion, meta)
}

// manageEntityAlias is runners/vault.py:1280-1293 _manage_entity_alias.
func (m *Master) manageEntityAlias(ctx context.Context, minion string) error {
	rid, err := m.lookupRoleID(ctx, minion, value.NewBool(false))
	if err != nil {
		return err
	}
	mount, err := m.Config.ValueOf("issue:approle:mount")
	if err != nil {
		return err
	}
	err = m.writeEntityAlias(ctx, "salt_minion_"+minion, rid, mount.PyStr())
	if isNotFound(err) {
		return &saltext.SaltError{Class: "SaltRunnerError", Msg: "Cannot create alias for minion " + minion + ": no entity found.", Err: err}
	}
	return err
}

// ManageApprole is _manage_approle called directly: write the minion's
// AppRole with the master's parameters and rendered policies.
func (m *Master) ManageApprole(minionID string, issueParams map[string]any) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.manageApprole(context.Background(), minionID, fromAnyOrNull(issueParams))
}

// ManageEntity is _manage_entity called directly: write salt_minion_<id>
// with the rendered metadata:entity (replacing all of its metadata).
func (m *Master) ManageEntity(minionID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.manageEntity(context.Background(), minionID)
}

// ManageEntityAlias is _manage_entity_alias called directly: point the
// AppRole mount's alias named by the role ID at salt_minion_<id>.
func (m *Master) ManageEntityAlias(minionID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.manageEntityAlias(context.Background(), minionID)
}

// ListApproles is runners/vault.py:686-710 list_approles.
func (m *Master) ListApproles() ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.listApprolesChecked(context.Background())
}

func (m *Master) listApprolesChecked(ctx context.Context) ([]string, error) {
	if err := m.issuesAppRoles(); err != nil {
		return nil, err
	}
	return m.listApproles(ctx)
}

// issuesAppRoles is the manual runners' `_config("issue:type") !=
// "approle"` check.
func (m *Master) issuesAppRoles() error {
	typ, err := m.Config.ValueOf("issue:type")
	if err != nil {
		return err
	}
	if !value.Equal(typ, str("approle")) {
		return saltErr("SaltRunnerError", "Master does not issue AppRoles to minions.")
	}
	return nil
}

// minionsOrKnown is the runners' `minions` argument: None means every
// minion whose key the master accepted.
func (m *Master) minionsOrKnown(minions []string) []string {
	if minions == nil {
		return m.KnownMinions
	}
	return minions
}

// intersect is set(minions) & set(roles), in sorted order (saltext
// iterates the set in CPython's hash order).
func intersect(minions, roles []string) []string {
	in := map[string]bool{}
	for _, r := range roles {
		in[r] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, mn := range minions {
		if in[mn] && !seen[mn] {
			seen[mn] = true
			out = append(out, mn)
		}
	}
	sort.Strings(out)
	return out
}

// SyncApproles is runners/vault.py:625-683 sync_approles: rewrite the
// AppRole of every given minion that has one, without comparing. nil
// minions means KnownMinions.
func (m *Master) SyncApproles(minions []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx := context.Background()
	if err := m.issuesAppRoles(); err != nil {
		return err
	}
	wanted := m.minionsOrKnown(minions)
	roles, err := m.listApprolesChecked(ctx)
	if err != nil {
		return err
	}
	for _, mn := range intersect(wanted, roles) {
		if err := m.manageApprole(ctx, mn, value.Value{}); err != nil {
			return err
		}
		if _, err := m.lookupApproleCached(ctx, mn, true); err != nil {
			return err
		}
	}
	return nil
}

// SyncEntities is runners/vault.py:713-770 sync_entities: rewrite the
// entity (all of its metadata) of every given minion that has an AppRole,
// and re-point the alias when it does not lead to salt_minion_<id>.
func (m *Master) SyncEntities(minions []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx := context.Background()
	typ, err := m.Config.ValueOf("issue:type")
	if err != nil {
		return err
	}
	if !value.Equal(typ, str("approle")) {
		return saltErr("SaltRunnerError", "Master is not configured to issue AppRoles to minions, which is a requirement to use managed entities with Salt.")
	}
	wanted := m.minionsOrKnown(minions)
	roles, err := m.listApprolesChecked(ctx)
	if err != nil {
		return err
	}
	for _, mn := range intersect(wanted, roles) {
		if err := m.manageEntity(ctx, mn); err != nil {
			return err
		}
		entity, err := m.lookupEntityByAlias(ctx, mn)
		if err != nil {
			return err
		}
		relink := !entity.Truthy()
		if !relink {
			name, err := subscript(entity, "name")
			if err != nil {
				return err
			}
			relink = !value.Equal(name, str("salt_minion_"+mn))
		}
		if relink {
			if err := m.manageEntityAlias(ctx, mn); err != nil {
				return err
			}
		}
	}
	return nil
}

// lookupEntityByAlias is runners/vault.py:1246-1256: the entity the role ID
// alias leads to, or False.
func (m *Master) lookupEntityByAlias(ctx context.Context, minion string) (value.Value, error) {
	rid, err := m.lookupRoleID(ctx, minion, value.NewBool(false))
	if err != nil {
		return value.Value{}, err
	}
	mount, err := m.Config.ValueOf("issue:approle:mount")
	if err != nil {
		return value.Value{}, err
	}
	entity, err := m.readEntityByAlias(ctx, rid, mount.PyStr())
	if isNotFound(err) {
		return value.NewBool(false), nil
	}
	return entity, err
}

// CleanupAuth is runners/vault.py:837-867 cleanup_auth: delete the AppRole,
// and the entity salt_minion_<id> if there is one, of every role on the
// mount whose minion is not in knownMinions (nil: KnownMinions). It
// returns {"deleted": {"approles": [...], "entities": [...]}}.
func (m *Master) CleanupAuth(knownMinions []string) (map[string]any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx := context.Background()
	roles, err := m.listApprolesChecked(ctx)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, mn := range m.minionsOrKnown(knownMinions) {
		known[mn] = true
	}
	var stale []string
	for _, r := range roles {
		if !known[r] {
			stale = append(stale, r)
		}
	}
	sort.Strings(stale) // saltext iterates a set
	approles, entities := []any{}, []any{}
	for _, mn := range stale {
		entity, err := m.readEntity(ctx, "salt_minion_"+mn)
		if isNotFound(err) {
			entity, err = value.NewBool(false), nil
		}
		if err != nil {
			return nil, err
		}
		if entity.Truthy() {
			if err := m.deleteEntity(ctx, "salt_minion_"+mn); err != nil {
				return nil, err
			}
			entities = append(entities, mn)
		}
		if err := m.deleteApprole(ctx, mn); err != nil {
			return nil, err
		}
		approles = append(approles, mn)
	}
	return map[string]any{"deleted": map[string]any{"approles": approles, "entities": entities}}, nil
}

// GenerateToken is the deprecated runners/vault.py:127-214 generate_token,
// still called by minions without the extension: it issues a token with
// the master's policies and no entity, whatever issue:type says. ttl and
// uses are the minion's arguments (nil: not given); they only count with
// issue:allow_minion_override_params. upgrade_request is not ported.
func (m *Master) GenerateToken(minionID string, impersonated bool, ttl, uses any) (map[string]any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.validateSignature(impersonated); err != nil {
		return nil, err
	}
	ctx := context.Background()
	params := value.NewMap(nil)
	if ttl != nil {
		params = set(params, "explicit_max_ttl", fromAny(ttl))
	}
	if uses != nil {
		params = set(params, "num_uses", fromAny(uses))
	}
	if len(params.Pairs()) == 0 {
		params = value.Value{} // issue_params or None
	}
	tok, _, err := m.generateToken(ctx, minionID, params, value.NewBool(false))
	if err != nil {
		return answer(err), err
	}
	field := func(k string) any {
		v, _ := get(tok, k)
		return toAny(v)
	}
	ret := map[string]any{
		"token":          field("client_token"),
		"lease_duration": field("lease_duration"),
		"renewable":      field("renewable"),
		"issued":         field("creation_time"),
	}
	for _, kv := range [][2]string{{"url", "server:url"}, {"verify", "server:verify"}, {"token_backend", "cache:backend"}, {"namespace", "server:namespace"}} {
		v, err := m.Config.ValueOf(kv[1])
		if err != nil {
			return answer(err), err
		}
		ret[kv[0]] = toAny(v)
	}
	numUses, _ := get(tok, "num_uses")
	if n, ok := pyNumber(numUses); ok && n >= 0 {
		ret["uses"] = toAny(numUses)
	}
	return ret, nil
}

// pyNumber is a number's value for a comparison.
func pyNumber(v value.Value) (float64, bool) {
	switch v.Kind() {
	case value.Bool:
		if v.Bool() {
			return 1, true
		}
		return 0, true
	case value.Int:
		return float64(v.Int()), true
	case value.Float:
		return v.Float(), true
	}
	return 0, false
}

// generateToken is runners/vault.py:269-295 _generate_token: a token with
// the cached rendered policies and metadata:secret as its meta. It returns
// the token as serialised for the minion (wrapped if wrap is truthy) and
// the num_uses it was issued with. The parameters are always those of
// issue:token, whatever issue:type says.
func (m *Master) generateToken(ctx context.Context, minion string, issueParams, wrap value.Value) (value.Value, value.Value, error) {
	c := m.Config
	endpoint := "auth/token/create"
	role, err := c.ValueOf("issue:token:role_name")
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	if !role.IsNull() {
		endpoint += "/" + role.PyStr()
	}
	payload, err := c.ParseIssueParamsValue(issueParams, "token")
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	refresh, err := c.ValueOf("policies:refresh_pillar")
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	expire, err := c.ValueOf("policies:cache_time")
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	pol, err := m.policiesCached(minion, value.Equal(refresh, value.NewBool(true)), expire)
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	payload = set(payload, "policies", pol)
	if !pol.Truthy() {
		return value.Value{}, value.Value{}, saltErr("SaltRunnerError", "No policies matched minion.")
	}
	patterns, err := c.ValueOf("metadata:secret")
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	meta, err := m.metadata(minion, patterns, false)
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	payload = set(payload, "meta", meta)
	res, err := m.client().request(ctx, "POST", endpoint, payload, true, wrap)
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	numUses, hasUses := get(payload, "num_uses")
	if wrap.Truthy() {
		if !hasUses {
			return value.Value{}, value.Value{}, saltErr("KeyError", "'num_uses'")
		}
		return res, numUses, nil
	}
	auth, err := subscript(res, "auth")
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	if !has(auth, "num_uses") {
		if !hasUses {
			return value.Value{}, value.Value{}, saltErr("KeyError", "'num_uses'")
		}
		auth = set(auth, "num_uses", numUses)
	}
	tok, err := m.tokenForMinion(auth)
	if err != nil {
		return value.Value{}, value.Value{}, err
	}
	if !hasUses {
		return value.Value{}, value.Value{}, saltErr("KeyError", "'num_uses'")
	}
	return tok, numUses, nil
}

// tokenForMinion is vault.VaultToken(**auth).serialize_for_minion()
// (leases.py:326-383).
func (m *Master) tokenForMinion(auth value.Value) (value.Value, error) {
	id, ok := get(auth, "client_token")
	if !ok {
		return value.Value{}, saltErr("TypeError", "BaseLease.__init__() missing 1 required positional argument: 'lease_id'")
	}
	renewable, ok := get(auth, "renewable")
	if !ok {
		renewable = value.NewBool(false)
	}
	duration, ok := get(auth, "lease_duration")
	if !ok {
		duration = value.NewInt(0)
	}
	numUses, ok := get(auth, "num_uses")
	if !ok {
		numUses = value.NewInt(0)
	}
	created := pyRoundTime(m.now().UnixNano())
	d, ok := pyNumber(duration)
	if !ok {
		return value.Value{}, saltErr("TypeError", "unsupported operand type(s) for +: 'int' and '%s'", duration.Kind().PyType())
	}
	expire := value.NewInt(created + int64(d))
	if duration.Kind() == value.Float {
		expire = value.NewFloat(float64(created) + d)
	}
	return omap(
		"client_token", id,
		"renewable", renewable,
		"lease_duration", duration,
		"num_uses", numUses,
		"creation_time", created,
		"expire_time", expire,
	), nil
}

// policiesCached is runners/vault.py:1002-1028 _get_policies_cached: the
// rendered policies, kept policies:cache_time seconds (0: not cached).
func (m *Master) policiesCached(minion string, refresh bool, expire value.Value) (value.Value, error) {
	if !expire.Truthy() {
		return m.policies(minion, refresh)
	}
	secs, ok := pyNumber(expire)
	if !ok {
		return value.Value{}, saltErr("TypeError", "'>' not supported between instances of 'int' and '%s'", expire.Kind().PyType())
	}
	bank, key := "minions/"+minion+"/vault", "policies"
	fun := func() (value.Value, error) { return m.policies(minion, refresh) }
	pol, err := m.cached(bank, key, int64(secs), fun)
	if err != nil {
		return value.Value{}, err
	}
	if !pol.IsList() {
		m.flush(bank, key)
		return m.cached(bank, key, int64(secs), fun)
	}
	return pol, nil
}
