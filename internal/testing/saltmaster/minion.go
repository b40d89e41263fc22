package saltmaster

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Minion is the minion side of saltext's AppRole flow, for tests: what a
// minion (or the master compiling its pillar) does with the master's
// answers. Unwrapping and login follow factory.py _query_master and
// _build_authd_client with client.py/auth.py; pillar reads follow kv.py.
type Minion struct {
	ID    string // the AppRole name (auth:approle_name)
	Mount string // auth:approle_mount
	// Vault is the server the master's answer names (its "server").
	Vault Endpoint
	Now   func() time.Time

	mu     sync.Mutex
	token  *minionToken
	kvMeta value.Value // kv.py's secret_path_metadata cache: path -> mount info
}

// NewMinion returns the minion id with the AppRole mount the master
// issues on (issue:approle:mount).
func NewMinion(id, mount string, vault Endpoint) *Minion {
	return &Minion{ID: id, Mount: mount, Vault: vault, Now: time.Now}
}

// Login is what an AppRole login answered.
type Login struct {
	ClientToken   string
	Accessor      string
	EntityID      string
	Policies      []string
	TokenPolicies []string
	Metadata      map[string]any
	LeaseDuration int64
	NumUses       int64
	Renewable     bool
}

// minionToken is leases.VaultToken as the minion's client tracks it: it
// refuses to use a token past its lease or its uses (auth.py:51-58).
type minionToken struct {
	id       string
	duration float64
	expire   float64
	numUses  int64
	useCount int64
}

func (m *Minion) now() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

func (m *Minion) unauthd() *vclient {
	return &vclient{address: m.Vault.Address, namespace: namespaceValue(m.Vault.Namespace), transport: m.Vault.Transport, timeout: m.Vault.Timeout, now: m.now}
}

func namespaceValue(ns string) value.Value {
	if ns == "" {
		return value.Value{}
	}
	return str(ns)
}

// Login unwraps the role ID and the secret ID the master answered with
// (GetConfig's auth.role_id, GenerateSecretID's wrap_info), checking each
// wrapping token's creation path as client.py:593-640 does, then logs in
// (auth.py:166-174). wrappedSecretID "" is a role with bind_secret_id
// false.
func (m *Minion) Login(wrappedRoleID, wrappedSecretID string) (*Login, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx := context.Background()
	c := m.unauthd()
	res, err := c.unwrap(ctx, wrappedRoleID, expectedCreationPath("role_id", m.Mount, m.ID))
	if err != nil {
		return nil, err
	}
	data, err := subscript(res, "data")
	if err != nil {
		return nil, err
	}
	roleID, err := subscript(data, "role_id")
	if err != nil {
		return nil, err
	}
	secretID := value.Value{}
	if wrappedSecretID != "" {
		res, err := c.unwrap(ctx, wrappedSecretID, expectedCreationPath("secret_id", m.Mount, m.ID))
		if err != nil {
			return nil, err
		}
		data, err := subscript(res, "data")
		if err != nil {
			return nil, err
		}
		if secretID, err = subscript(data, "secret_id"); err != nil {
			return nil, err
		}
	}
	return m.login(ctx, roleID, secretID)
}

// Unwrap unwraps a wrapping token the master handed out for this minion's
// role ID (secretType "role_id") or secret ID ("secret_id"), after checking
// its creation path, and returns the wrapped answer's data.
func (m *Minion) Unwrap(wrapToken, secretType string) (map[string]any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.unauthd().unwrap(context.Background(), wrapToken, expectedCreationPath(secretType, m.Mount, m.ID))
	if err != nil {
		return nil, err
	}
	data, err := subscript(res, "data")
	if err != nil {
		return nil, err
	}
	return toMap(data), nil
}

// LoginAppRole logs in with a role ID and secret ID in the clear (issue:wrap
// false); secretID "" sends none.
func (m *Minion) LoginAppRole(roleID, secretID string) (*Login, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sid := value.Value{}
	if secretID != "" {
		sid = str(secretID)
	}
	return m.login(context.Background(), str(roleID), sid)
}

// login is auth.py:166-174 with VaultAppRole.payload (233-241): the secret
// ID first, then the role ID.
func (m *Minion) login(ctx context.Context, roleID, secretID value.Value) (*Login, error) {
	payload := value.NewMap(nil)
	if !secretID.IsNull() {
		payload = set(payload, "secret_id", str(secretID.PyStr()))
	}
	payload = set(payload, "role_id", roleID)
	res, err := m.unauthd().request(ctx, "POST", "auth/"+m.Mount+"/login", payload, true, nothing)
	if err != nil {
		return nil, err
	}
	auth, err := subscript(res, "auth")
	if err != nil {
		return nil, err
	}
	l := &Login{}
	strs := func(k string) []string {
		v, _ := get(auth, k)
		var out []string
		for _, it := range v.Items() {
			out = append(out, it.PyStr())
		}
		return out
	}
	tok, _ := get(auth, "client_token")
	l.ClientToken = tok.PyStr()
	if v, ok := get(auth, "accessor"); ok {
		l.Accessor = v.PyStr()
	}
	if v, ok := get(auth, "entity_id"); ok && !v.IsNull() {
		l.EntityID = v.PyStr()
	}
	l.Policies, l.TokenPolicies = strs("policies"), strs("token_policies")
	if v, ok := get(auth, "metadata"); ok && v.IsMap() {
		l.Metadata = toMap(v)
	}
	dur, _ := get(auth, "lease_duration")
	d, _ := pyNumber(dur)
	l.LeaseDuration = int64(d)
	if v, ok := get(auth, "num_uses"); ok {
		n, _ := pyNumber(v)
		l.NumUses = int64(n)
	}
	if v, ok := get(auth, "renewable"); ok {
		l.Renewable = v.Truthy()
	}
	created := float64(pyRoundTime(m.now().UnixNano()))
	m.token = &minionToken{id: l.ClientToken, duration: d, expire: created + d, numUses: l.NumUses}
	return l, nil
}

// Token is the client token of the last login ("" before one).
func (m *Minion) Token() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.token == nil {
		return ""
	}
	return m.token.id
}

// client is the AuthenticatedVaultClient of the logged-in minion.
func (m *Minion) client() *vclient {
	c := m.unauthd()
	t := m.token
	c.token = func() (string, error) {
		// VaultToken.is_valid (leases.py:74-95, 125-130)
		now := float64(m.now().UnixNano()) / 1e9
		if t.duration != 0 && t.expire-now < 0 || t.numUses != 0 && t.numUses-(t.useCount+1) < 0 {
			return "", saltErr("VaultAuthExpired", "")
		}
		return t.id, nil
	}
	c.used = func() { t.useCount++ }
	return c
}

// ReadPillar reads a KV secret as the Vault ext_pillar does (kv.py:48-72
// read): sys/internal/ui/mounts/<path> tells KV v2, cached per path for
// this Minion, then the path with data/ inserted (_v2_the_path).
func (m *Minion) ReadPillar(path string) (map[string]any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.token == nil {
		return nil, saltErr("VaultAuthExpired", "not logged in")
	}
	ctx := context.Background()
	c := m.client()
	meta := m.pathMetadata(ctx, c, path)
	dataPath := path
	v2 := false
	if !meta.IsNull() {
		typ, ok := get(meta, "type")
		if !ok {
			typ = str("kv")
		}
		opts, err := subscript(meta, "options")
		if err != nil {
			return nil, err
		}
		version := str("1")
		if v, ok := get(opts, "version"); ok {
			version = v
		}
		if value.Equal(typ, str("kv")) && !opts.IsNull() && value.Equal(version, str("2")) {
			v2 = true
			pfilter := path
			if p, ok := get(meta, "path"); ok {
				pfilter = p.PyStr()
			}
			dataPath = v2ThePath(path, pfilter, "data")
		}
	}
	res, err := c.request(ctx, "GET", dataPath, nothing, false, nothing)
	if err != nil {
		return nil, err
	}
	ret, err := subscript(res, "data")
	if err != nil {
		return nil, err
	}
	if v2 {
		if ret, err = subscript(ret, "data"); err != nil {
			return nil, err
		}
	}
	return toMap(ret), nil
}

// pathMetadata is kv.py:387-412 _get_secret_path_metadata: a cached entry
// whose path is a prefix of path, else a lookup; every failure is logged
// and swallowed upstream (null here).
func (m *Minion) pathMetadata(ctx context.Context, c *vclient, path string) value.Value {
	for _, p := range m.kvMeta.Pairs() {
		k := p.Key.PyStr()
		if strings.HasPrefix(path, k+"/") || path == k {
			return p.Val
		}
	}
	res, err := c.request(ctx, "GET", "sys/internal/ui/mounts/"+path, nothing, false, nothing)
	if err != nil || !res.IsMap() {
		return value.Value{}
	}
	data, ok := get(res, "data")
	if !ok {
		return value.Value{}
	}
	if m.kvMeta.IsNull() {
		m.kvMeta = value.NewMap(nil)
	}
	m.kvMeta = set(m.kvMeta, path, data)
	return data
}

// v2ThePath is kv.py:360-385 _v2_the_path.
func v2ThePath(path, pfilter, ptype string) string {
	path = strings.TrimLeft(strings.TrimRight(path, "/"), "/")
	pfilter = strings.TrimLeft(strings.TrimRight(pfilter, "/"), "/")
	together := pfilter + "/" + ptype
	otype := "data"
	if ptype == "data" {
		otype = "metadata"
	}
	other := pfilter + "/" + otype
	switch {
	case path == other || strings.HasPrefix(path, other+"/"):
		return strings.Replace(path, other, together, 1)
	case path != together && !strings.HasPrefix(path, together+"/"):
		return strings.Replace(path, pfilter, together, 1)
	}
	return path
}

// WrapToken digs a wrapping token out of a runner answer: keys lead to the
// wrapped object, e.g. ("auth", "role_id") in GetConfig's answer, none in
// GenerateSecretID's. "" when there is none.
func WrapToken(answer map[string]any, keys ...string) string {
	var cur any = answer
	for _, k := range append(keys, "wrap_info", "token") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[k]
	}
	s, _ := cur.(string)
	return s
}
