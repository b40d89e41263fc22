package saltmaster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// FakeVault is the scripted Vault of hack/saltext/issue_trace.py (class
// FakeVault), line for line: just enough Vault for saltext's issuing calls
// (AppRole roles, role IDs, secret IDs and logins, entities and aliases,
// response wrapping, token create and lookup-self, KV reads), answering
// 403 from a simplified ACL (the capabilities of every matching rule,
// deny wins), 404 and 400 as Vault does for those paths. Identifiers come
// from one counter and times from Now, so a run is reproducible. It is an
// http.RoundTripper and an http.Handler.
type FakeVault struct {
	Now func() time.Time

	mu       sync.Mutex
	s        *FakeState
	policies map[string][]FakeRule
	globs    map[string]*regexp.Regexp // compiled policy paths
}

// FakeRule is one path rule of a policy.
type FakeRule struct {
	Path         string   `json:"path"`
	Capabilities []string `json:"capabilities"`
}

// FakeState is everything the fake Vault holds (the generator's state
// dict; the trace holds it before and after each case).
type FakeState struct {
	ApproleMounts map[string]FakeMount            `json:"approle_mounts"`
	Counter       int64                           `json:"counter"`
	Entities      []*FakeEntity                   `json:"entities"`
	KV            map[string]map[string]any       `json:"kv"`
	KVMounts      map[string]FakeKVMount          `json:"kv_mounts"`
	Roles         map[string]map[string]*FakeRole `json:"roles"`
	SecretIDs     []*FakeSecretID                 `json:"secret_ids"`
	Tokens        map[string]*FakeToken           `json:"tokens"`
	Wrapped       map[string]*FakeWrapped         `json:"wrapped"`
}

// FakeMount is an AppRole auth mount.
type FakeMount struct {
	Accessor string `json:"accessor"`
}

// FakeKVMount is a KV secrets engine mount.
type FakeKVMount struct {
	Version string `json:"version"`
}

// FakeRole is an AppRole role: params as Vault reads them back.
type FakeRole struct {
	Params map[string]any `json:"params"`
	RoleID string         `json:"role_id"`
}

// FakeEntity is an identity entity.
type FakeEntity struct {
	Aliases  []*FakeAlias      `json:"aliases"`
	Disabled bool              `json:"disabled"`
	ID       string            `json:"id"`
	Metadata map[string]string `json:"metadata"`
	Name     string            `json:"name"`
	Policies []string          `json:"policies"`
}

// FakeAlias is an entity alias.
type FakeAlias struct {
	CustomMetadata map[string]string `json:"custom_metadata"`
	ID             string            `json:"id"`
	Metadata       map[string]any    `json:"metadata"`
	MountAccessor  string            `json:"mount_accessor"`
	Name           string            `json:"name"`
}

// FakeSecretID is an issued secret ID.
type FakeSecretID struct {
	Accessor     string         `json:"accessor"`
	CreationTime int64          `json:"creation_time"`
	Metadata     map[string]any `json:"metadata"`
	Mount        string         `json:"mount"`
	NumUses      int64          `json:"num_uses"`
	Role         string         `json:"role"`
	SecretID     string         `json:"secret_id"`
	TTL          int64          `json:"ttl"`
	Uses         int64          `json:"uses"`
}

// FakeToken is a token: the master's, or one a login or token create issued.
type FakeToken struct {
	Accessor     string         `json:"accessor"`
	CreationTime int64          `json:"creation_time"`
	DisplayName  string         `json:"display_name"`
	EntityID     string         `json:"entity_id"`
	ExpireTime   int64          `json:"expire_time"` // 0: never
	Meta         map[string]any `json:"meta"`
	NumUses      int64          `json:"num_uses"`
	Policies     []string       `json:"policies"`
	Renewable    bool           `json:"renewable"`
	TTL          int64          `json:"ttl"`
	Uses         int64          `json:"uses"`
}

// FakeWrapped is a response held behind a wrapping token.
type FakeWrapped struct {
	CreationPath string    `json:"creation_path"`
	CreationTime int64     `json:"creation_time"`
	CreationTTL  int64     `json:"creation_ttl"`
	Response     *envelope `json:"response"`
}

// envelope is Vault's answer around data, auth or wrap_info.
type envelope struct {
	Auth          any    `json:"auth"`
	Data          any    `json:"data"`
	LeaseDuration int64  `json:"lease_duration"`
	LeaseID       string `json:"lease_id"`
	Renewable     bool   `json:"renewable"`
	Warnings      any    `json:"warnings"`
	WrapInfo      any    `json:"wrap_info"`
}

// roleDefaults are a new role's parameters (Vault's defaults).
func roleDefaults() map[string]any {
	return map[string]any{
		"bind_secret_id":          true,
		"local_secret_ids":        false,
		"secret_id_bound_cidrs":   nil,
		"secret_id_num_uses":      int64(0),
		"secret_id_ttl":           int64(0),
		"token_bound_cidrs":       []string{},
		"token_explicit_max_ttl":  int64(0),
		"token_max_ttl":           int64(0),
		"token_no_default_policy": false,
		"token_num_uses":          int64(0),
		"token_period":            int64(0),
		"token_policies":          []string{},
		"token_ttl":               int64(0),
		"token_type":              "default",
	}
}

var (
	roleIntFields = []string{"secret_id_num_uses", "token_num_uses"}
	roleTTLFields = []string{"secret_id_ttl", "token_explicit_max_ttl", "token_max_ttl", "token_period", "token_ttl"}
)

const (
	defaultTokenTTL = 2764800 // Vault's default max lease TTL, 768h
	deniedACL       = "1 error occurred:\n\t* permission denied\n\n"
)

// LoadFakeState decodes a state as the trace holds it.
func LoadFakeState(data []byte) (*FakeState, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	s := &FakeState{}
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("decoding the fake Vault state: %w", err)
	}
	for _, roles := range s.Roles {
		for _, r := range roles {
			normParams(r.Params)
		}
	}
	for k, v := range s.KV {
		s.KV[k] = plain(v).(map[string]any)
	}
	for _, e := range s.Entities {
		for _, a := range e.Aliases {
			a.Metadata, _ = plain(a.Metadata).(map[string]any)
		}
	}
	for _, sid := range s.SecretIDs {
		sid.Metadata, _ = plain(sid.Metadata).(map[string]any)
	}
	for _, t := range s.Tokens {
		t.Meta, _ = plain(t.Meta).(map[string]any)
	}
	return s, nil
}

// plain turns json.Numbers into int64 or float64.
func plain(x any) any {
	switch t := x.(type) {
	case json.Number:
		return toAny(fromAny(t))
	case map[string]any:
		if t == nil {
			return t
		}
		out := make(map[string]any, len(t))
		for k, v := range t {
			out[k] = plain(v)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			out[i] = plain(v)
		}
		return out
	}
	return x
}

// normParams gives role parameters the Go types the fake writes.
func normParams(p map[string]any) {
	for k, v := range p {
		switch t := plain(v).(type) {
		case []any:
			l := make([]string, len(t))
			for i, it := range t {
				l[i] = fmt.Sprint(it)
			}
			p[k] = l
		default:
			p[k] = t
		}
	}
}

// NewFakeVault serves state (which it changes) with the given policies;
// a token with the "root" policy may do anything.
func NewFakeVault(state *FakeState, policies map[string][]FakeRule, now func() time.Time) *FakeVault {
	if state.Wrapped == nil {
		state.Wrapped = map[string]*FakeWrapped{}
	}
	if state.Tokens == nil {
		state.Tokens = map[string]*FakeToken{}
	}
	return &FakeVault{Now: now, s: state, policies: policies}
}

// State returns a copy of the current state.
func (f *FakeVault) State() *FakeState {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(f.s)
	if err != nil {
		panic(err) // only our own types
	}
	s, err := LoadFakeState(b)
	if err != nil {
		panic(err)
	}
	return s
}

func (f *FakeVault) now() int64 {
	if f.Now == nil {
		return time.Now().Unix()
	}
	return f.Now().Unix()
}

// fakeErr is an error answer.
type fakeErr struct {
	status int
	errors []string
}

func (e *fakeErr) Error() string { return fmt.Sprintf("%d %v", e.status, e.errors) }

func vaultErr(status int, errs ...string) error {
	if errs == nil {
		errs = []string{}
	}
	return &fakeErr{status, errs}
}

// RoundTrip answers req without a network.
func (f *FakeVault) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
	}
	status, payload := f.serve(req.Method, req.URL.Path, req.Header, body)
	res := &http.Response{
		StatusCode: status,
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": []string{"application/json"}},
		Body:    io.NopCloser(bytes.NewReader(payload)),
		Request: req,
	}
	res.ContentLength = int64(len(payload))
	return res, nil
}

// ServeHTTP answers over a real connection (httptest.NewServer).
func (f *FakeVault) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	status, payload := f.serve(req.Method, req.URL.Path, req.Header, body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(payload)
}

func (f *FakeVault) serve(method, urlPath string, header http.Header, body []byte) (int, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.HasPrefix(urlPath, "/v1/") {
		return 404, []byte(`{"errors": []}`)
	}
	var b value.Value
	if len(body) > 0 {
		var err error
		if b, err = value.DecodeJSON(body); err != nil {
			return 400, []byte(`{"errors": ["failed to parse JSON input"]}`)
		}
	}
	status, payload := f.handle(method, strings.TrimPrefix(urlPath, "/v1/"), header, b)
	if payload == nil {
		return status, nil
	}
	out, err := json.Marshal(payload)
	if err != nil {
		return 500, []byte(`{"errors": ["` + err.Error() + `"]}`)
	}
	return status, out
}

// handle is FakeVault.handle: the status and the JSON answer (nil: none).
func (f *FakeVault) handle(method, path string, header http.Header, body value.Value) (int, any) {
	status, payload, err := f.route(method, path, header, body)
	if err != nil {
		fe := err.(*fakeErr)
		return fe.status, map[string]any{"errors": fe.errors}
	}
	return status, payload
}

func bodyGet(body value.Value, key string) (value.Value, bool) {
	return get(body, key)
}

func bodyStr(body value.Value, key string) string {
	v, _ := get(body, key)
	if v.IsString() {
		return v.Str()
	}
	return ""
}

// ---- identifiers ----

func (f *FakeVault) nextN() int64 {
	f.s.Counter++
	return f.s.Counter
}

func (f *FakeVault) newUUID() string {
	n := f.nextN()
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n)
}

func (f *FakeVault) newToken(kind string) string {
	return fmt.Sprintf("hvs.%s%06d", kind, f.nextN())
}

// fakeISO is the generator's iso(): RFC 3339 with a sub-second part.
func fakeISO(ts int64) string {
	return time.Unix(ts, 0).UTC().Format("2006-01-02T15:04:05") + ".123456789Z"
}

// ---- lookups ----

func (f *FakeVault) entityByName(name string) *FakeEntity {
	for _, e := range f.s.Entities {
		if e.Name == name {
			return e
		}
	}
	return nil
}

func (f *FakeVault) entityByID(id string) *FakeEntity {
	for _, e := range f.s.Entities {
		if e.ID == id {
			return e
		}
	}
	return nil
}

func (f *FakeVault) aliasByFactors(accessor, name string) (*FakeEntity, *FakeAlias) {
	for _, e := range f.s.Entities {
		for _, a := range e.Aliases {
			if a.MountAccessor == accessor && a.Name == name {
				return e, a
			}
		}
	}
	return nil, nil
}

func (f *FakeVault) aliasByID(id string) (*FakeEntity, *FakeAlias) {
	for _, e := range f.s.Entities {
		for _, a := range e.Aliases {
			if a.ID == id {
				return e, a
			}
		}
	}
	return nil, nil
}

func (f *FakeVault) mountOfAccessor(accessor string) (string, bool) {
	for name, m := range f.s.ApproleMounts {
		if m.Accessor == accessor {
			return name, true
		}
	}
	return "", false
}

func nilIfEmpty[M ~map[string]V, V any](m M) any {
	if len(m) == 0 {
		return nil
	}
	return m
}

func (f *FakeVault) entityView(e *FakeEntity) map[string]any {
	aliases := make([]any, 0, len(e.Aliases))
	for _, a := range e.Aliases {
		aliases = append(aliases, f.aliasView(a, e))
	}
	return map[string]any{
		"aliases":  aliases,
		"disabled": e.Disabled,
		"id":       e.ID,
		"metadata": nilIfEmpty(e.Metadata),
		"name":     e.Name,
		"policies": e.Policies,
	}
}

func (f *FakeVault) aliasView(a *FakeAlias, e *FakeEntity) map[string]any {
	mount, ok := f.mountOfAccessor(a.MountAccessor)
	if !ok {
		mount = "None"
	}
	return map[string]any{
		"canonical_id":    e.ID,
		"custom_metadata": a.CustomMetadata,
		"id":              a.ID,
		"metadata":        nilIfEmpty(a.Metadata),
		"mount_accessor":  a.MountAccessor,
		"mount_path":      "auth/" + mount + "/",
		"mount_type":      "approle",
		"name":            a.Name,
	}
}

// ---- tokens and ACL ----

func (f *FakeVault) token(tok string) *FakeToken {
	t, ok := f.s.Tokens[tok]
	if !ok {
		return nil
	}
	if t.ExpireTime != 0 && f.now() >= t.ExpireTime {
		delete(f.s.Tokens, tok)
		return nil
	}
	return t
}

// fakeGlob is a policy path: '+' is one segment, a trailing '*' a prefix.
func (f *FakeVault) fakeGlob(rule, path string) bool {
	re, ok := f.globs[rule]
	if !ok {
		re = globRegexp(rule)
		if f.globs == nil {
			f.globs = map[string]*regexp.Regexp{}
		}
		f.globs[rule] = re
	}
	return re.MatchString(path)
}

func globRegexp(rule string) *regexp.Regexp {
	prefix := strings.HasSuffix(rule, "*")
	rule = strings.TrimSuffix(rule, "*")
	segs := strings.Split(rule, "/")
	for i, s := range segs {
		if s == "+" {
			segs[i] = "[^/]+"
		} else {
			segs[i] = regexp.QuoteMeta(s)
		}
	}
	pattern := strings.Join(segs, "/")
	if prefix {
		pattern += ".*"
	}
	return regexp.MustCompile("^(?:" + pattern + ")$")
}

func (f *FakeVault) capabilities(t *FakeToken, path string) map[string]bool {
	if contains(t.Policies, "root") {
		return map[string]bool{"root": true}
	}
	caps := map[string]bool{}
	for _, name := range t.Policies {
		for _, rule := range f.policies[name] {
			if f.fakeGlob(rule.Path, path) {
				for _, c := range rule.Capabilities {
					caps[c] = true
				}
			}
		}
	}
	if caps["deny"] {
		return map[string]bool{}
	}
	return caps
}

// exists is the existence check of a POST: nil where Vault has none.
func (f *FakeVault) authorize(header http.Header, method, path string, exists *bool) (*FakeToken, error) {
	tok := header.Get("X-Vault-Token")
	t := f.token(tok)
	if t == nil {
		return nil, vaultErr(403, "permission denied")
	}
	if path != "auth/token/lookup-self" {
		var need []string
		switch method {
		case "GET":
			need = []string{"read"}
		case "LIST":
			need = []string{"list"}
		case "DELETE":
			need = []string{"delete"}
		case "POST":
			need = []string{"update"}
			if exists != nil && !*exists {
				need = []string{"create"}
			}
		default:
			return nil, vaultErr(405, "unsupported operation")
		}
		if strings.HasPrefix(path, "sys/auth/") {
			need = append(need, "sudo")
		}
		caps := f.capabilities(t, path)
		if !caps["root"] {
			for _, c := range need {
				if !caps[c] {
					return nil, vaultErr(403, deniedACL)
				}
			}
		}
	}
	if t.NumUses != 0 {
		t.Uses++
		if t.Uses >= t.NumUses {
			delete(f.s.Tokens, tok)
		}
	}
	return t, nil
}

func (f *FakeVault) issueToken(policies, tokenPolicies []string, meta map[string]any, ttl, numUses int64, entityID string, renewable bool) map[string]any {
	tok := f.newToken("token")
	accessor := f.newUUID()
	expire := int64(0)
	if ttl != 0 {
		expire = f.now() + ttl
	}
	f.s.Tokens[tok] = &FakeToken{
		Accessor: accessor, CreationTime: f.now(), DisplayName: "token", EntityID: entityID,
		ExpireTime: expire, Meta: meta, NumUses: numUses, Policies: policies, Renewable: renewable, TTL: ttl,
	}
	return map[string]any{
		"accessor":       accessor,
		"client_token":   tok,
		"entity_id":      entityID,
		"lease_duration": ttl,
		"metadata":       nilMap(meta),
		"num_uses":       numUses,
		"orphan":         false,
		"policies":       policies,
		"renewable":      renewable,
		"token_policies": tokenPolicies,
		"token_type":     "service",
	}
}

func nilMap(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// ---- responses ----

func (f *FakeVault) maybeWrap(header http.Header, path string, resp *envelope) (int, any, error) {
	ttl := header.Get("X-Vault-Wrap-TTL")
	if ttl == "" {
		return 200, resp, nil
	}
	secs, err := parseDuration(str(ttl))
	if err != nil {
		return 0, nil, err
	}
	tok := f.newToken("wrap")
	f.s.Wrapped[tok] = &FakeWrapped{CreationPath: path, CreationTime: f.now(), CreationTTL: secs, Response: resp}
	wrappedAccessor := ""
	if d, ok := resp.Data.(map[string]any); ok {
		wrappedAccessor, _ = d["secret_id_accessor"].(string)
	}
	if a, ok := resp.Auth.(map[string]any); ok && wrappedAccessor == "" {
		wrappedAccessor, _ = a["accessor"].(string)
	}
	return 200, &envelope{WrapInfo: map[string]any{
		"accessor":         f.newUUID(),
		"creation_path":    path,
		"creation_time":    fakeISO(f.now()),
		"token":            tok,
		"ttl":              secs,
		"wrapped_accessor": wrappedAccessor,
	}}, nil
}

// wrappedOf is the wrapped answer of a sys/wrapping request: the token in
// the body, else the request's own token.
func (f *FakeVault) wrappedOf(body value.Value, header http.Header) (string, *FakeWrapped, error) {
	tok := bodyStr(body, "token")
	if tok == "" {
		tok = header.Get("X-Vault-Token")
	}
	w, err := f.wrapped(tok)
	return tok, w, err
}

func (f *FakeVault) wrapped(tok string) (*FakeWrapped, error) {
	w, ok := f.s.Wrapped[tok]
	if !ok || f.now() >= w.CreationTime+w.CreationTTL {
		delete(f.s.Wrapped, tok)
		return nil, vaultErr(400, "wrapping token is not valid or does not exist")
	}
	return w, nil
}

// ---- parsing request fields as Vault's field types ----

var (
	intRE      = regexp.MustCompile(`^-?[0-9]+$`)
	durationRE = regexp.MustCompile(`^([0-9]+)([smhd])$`)
)

func convErr(v value.Value, what string) error {
	b, _ := pyJSON(v, true, true)
	return vaultErr(400, fmt.Sprintf("error converting input %s for field: %s", b, what))
}

func parseDuration(v value.Value) (int64, error) {
	if v.Kind() == value.String {
		if m := durationRE.FindStringSubmatch(v.Str()); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			return n * map[string]int64{"s": 1, "m": 60, "h": 3600, "d": 86400}[m[2]], nil
		}
	}
	return parseWhole(v, "invalid duration")
}

func parseInt(v value.Value) (int64, error) { return parseWhole(v, "invalid integer") }

// parseWhole reads a whole number (an int, a whole float, a string of
// digits) as Vault's field parsing does; what names the field's type in
// the error.
func parseWhole(v value.Value, what string) (int64, error) {
	switch v.Kind() {
	case value.Bool:
		return 0, vaultErr(400, what)
	case value.Int:
		return v.Int(), nil
	case value.Float:
		if v.Float() == float64(int64(v.Float())) {
			return int64(v.Float()), nil
		}
	case value.String:
		if intRE.MatchString(v.Str()) {
			return strconv.ParseInt(v.Str(), 10, 64)
		}
	}
	return 0, convErr(v, what)
}

func parseBool(v value.Value) (bool, error) {
	switch v.Kind() {
	case value.Bool:
		return v.Bool(), nil
	case value.String:
		switch strings.ToLower(v.Str()) {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
	case value.Int:
		return v.Int() != 0, nil
	}
	return false, convErr(v, "invalid boolean")
}

func parseStringList(v value.Value) ([]string, error) {
	switch v.Kind() {
	case value.Null:
		return []string{}, nil
	case value.String:
		out := []string{}
		for _, s := range strings.Split(v.Str(), ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, nil
	case value.List:
		out := make([]string, 0, len(v.Items()))
		for _, it := range v.Items() {
			out = append(out, it.PyStr())
		}
		return out, nil
	}
	return nil, vaultErr(400, "invalid string list")
}

// canonicalCIDR is sockaddr's String(): a single host keeps no mask.
func canonicalCIDR(c string) string {
	if strings.HasSuffix(c, "/32") && !strings.Contains(c, ":") {
		return strings.TrimSuffix(c, "/32")
	}
	if strings.HasSuffix(c, "/128") && strings.Contains(c, ":") {
		return strings.TrimSuffix(c, "/128")
	}
	return c
}

// ---- routing ----

var (
	reAuthMount   = regexp.MustCompile(`^auth/([^/]+)/(.*)$`)
	reTokenCreate = regexp.MustCompile(`^auth/token/create(/[^/]+)?$`)
	reSysAuth     = regexp.MustCompile(`^sys/auth/([^/]+)$`)
	reUIMounts    = regexp.MustCompile(`^sys/internal/ui/mounts/(.+)$`)
	reRole        = regexp.MustCompile(`^role/([^/]+)$`)
	reRoleID      = regexp.MustCompile(`^role/([^/]+)/role-id$`)
	reSecretID    = regexp.MustCompile(`^role/([^/]+)/secret-id$`)
	reEntityName  = regexp.MustCompile(`^identity/entity/name/([^/]+)$`)
)

func noHandler(path string) error {
	return vaultErr(404, fmt.Sprintf("no handler for route %q. route entry not found.", path))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (f *FakeVault) route(method, path string, header http.Header, body value.Value) (int, any, error) {
	if m := reAuthMount.FindStringSubmatch(path); m != nil {
		if _, ok := f.s.ApproleMounts[m[1]]; ok {
			return f.approle(method, m[1], m[2], path, header, body)
		}
	}
	if path == "auth/token/lookup-self" && method == "GET" {
		t, err := f.authorize(header, method, path, nil)
		if err != nil {
			return 0, nil, err
		}
		var expire, ttl any = nil, int64(0)
		if t.ExpireTime != 0 {
			expire, ttl = fakeISO(t.ExpireTime), t.ExpireTime-f.now()
		}
		return 200, &envelope{Data: map[string]any{
			"accessor":         t.Accessor,
			"creation_time":    t.CreationTime,
			"creation_ttl":     t.TTL,
			"display_name":     t.DisplayName,
			"entity_id":        t.EntityID,
			"expire_time":      expire,
			"explicit_max_ttl": 0,
			"id":               header.Get("X-Vault-Token"),
			"meta":             nilMap(t.Meta),
			"num_uses":         t.NumUses,
			"orphan":           true,
			"path":             "auth/token/create",
			"policies":         t.Policies,
			"renewable":        t.Renewable,
			"ttl":              ttl,
			"type":             "service",
		}}, nil
	}
	if reTokenCreate.MatchString(path) && method == "POST" {
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		resp, err := f.tokenCreate(body)
		if err != nil {
			return 0, nil, err
		}
		return f.maybeWrap(header, path, resp)
	}
	if path == "sys/wrapping/lookup" && method == "POST" {
		_, w, err := f.wrappedOf(body, header)
		if err != nil {
			return 0, nil, err
		}
		return 200, &envelope{Data: map[string]any{
			"creation_path": w.CreationPath,
			"creation_time": fakeISO(w.CreationTime),
			"creation_ttl":  w.CreationTTL,
		}}, nil
	}
	if path == "sys/wrapping/unwrap" && method == "POST" {
		tok, w, err := f.wrappedOf(body, header)
		if err != nil {
			return 0, nil, err
		}
		delete(f.s.Wrapped, tok)
		return 200, w.Response, nil
	}
	if m := reSysAuth.FindStringSubmatch(path); m != nil && method == "GET" {
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		mount, ok := f.s.ApproleMounts[m[1]]
		if !ok {
			return 0, nil, vaultErr(400, "No auth engine at "+m[1])
		}
		return 200, &envelope{Data: map[string]any{"accessor": mount.Accessor, "description": "", "local": false, "type": "approle"}}, nil
	}
	if strings.HasPrefix(path, "identity/") {
		return f.identity(method, path, header, body)
	}
	if m := reUIMounts.FindStringSubmatch(path); m != nil && method == "GET" {
		if f.token(header.Get("X-Vault-Token")) == nil {
			return 0, nil, vaultErr(403, "permission denied")
		}
		for _, mount := range sortedKeys(f.s.KVMounts) {
			if m[1] == mount || strings.HasPrefix(m[1], mount+"/") {
				return 200, &envelope{Data: map[string]any{
					"description": "",
					"options":     map[string]any{"version": f.s.KVMounts[mount].Version},
					"path":        mount + "/",
					"type":        "kv",
				}}, nil
			}
		}
		return 0, nil, vaultErr(400, "no mount found for path")
	}
	for _, mount := range sortedKeys(f.s.KVMounts) {
		if !strings.HasPrefix(path, mount+"/") || method != "GET" {
			continue
		}
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		rest := path[len(mount)+1:]
		v2 := f.s.KVMounts[mount].Version == "2"
		if v2 {
			if !strings.HasPrefix(rest, "data/") {
				return 0, nil, vaultErr(404)
			}
			rest = strings.TrimPrefix(rest, "data/")
		}
		secret, ok := f.s.KV[mount+"/"+rest]
		if !ok {
			return 0, nil, vaultErr(404)
		}
		if !v2 {
			return 200, &envelope{Data: secret}, nil
		}
		meta := map[string]any{
			"created_time":    fakeISO(1767225600),
			"custom_metadata": nil,
			"deletion_time":   "",
			"destroyed":       false,
			"version":         1,
		}
		return 200, &envelope{Data: map[string]any{"data": secret, "metadata": meta}}, nil
	}
	if _, err := f.authorize(header, method, path, nil); err != nil {
		return 0, nil, err
	}
	return 0, nil, noHandler(path)
}

// ---- auth/<approle mount>/... ----

func (f *FakeVault) approle(method, mount, sub, path string, header http.Header, body value.Value) (int, any, error) {
	if f.s.Roles == nil {
		f.s.Roles = map[string]map[string]*FakeRole{}
	}
	roles, ok := f.s.Roles[mount]
	if !ok {
		roles = map[string]*FakeRole{}
		f.s.Roles[mount] = roles
	}
	if sub == "login" && method == "POST" {
		return f.login(mount, body)
	}
	if sub == "role" && method == "LIST" {
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		if len(roles) == 0 {
			return 0, nil, vaultErr(404)
		}
		return 200, &envelope{Data: map[string]any{"keys": sortedKeys(roles)}}, nil
	}
	if m := reRole.FindStringSubmatch(sub); m != nil {
		name := m[1]
		role := roles[name]
		switch method {
		case "GET":
			if _, err := f.authorize(header, method, path, nil); err != nil {
				return 0, nil, err
			}
			if role == nil {
				return 0, nil, vaultErr(404)
			}
			return 200, &envelope{Data: role.Params}, nil
		case "POST":
			exists := role != nil
			if _, err := f.authorize(header, method, path, &exists); err != nil {
				return 0, nil, err
			}
			return f.roleWrite(roles, name, role, body)
		case "DELETE":
			if _, err := f.authorize(header, method, path, nil); err != nil {
				return 0, nil, err
			}
			delete(roles, name)
			kept := f.s.SecretIDs[:0]
			for _, s := range f.s.SecretIDs {
				if !(s.Mount == mount && s.Role == name) {
					kept = append(kept, s)
				}
			}
			f.s.SecretIDs = kept
			return 204, nil, nil
		}
	}
	if m := reRoleID.FindStringSubmatch(sub); m != nil && method == "GET" {
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		role := roles[m[1]]
		if role == nil {
			return 0, nil, vaultErr(404)
		}
		return f.maybeWrap(header, path, &envelope{Data: map[string]any{"role_id": role.RoleID}})
	}
	if m := reSecretID.FindStringSubmatch(sub); m != nil && method == "POST" {
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		role := roles[m[1]]
		if role == nil {
			return 0, nil, vaultErr(404, fmt.Sprintf("role %q does not exist", m[1]))
		}
		if !role.Params["bind_secret_id"].(bool) {
			return 0, nil, vaultErr(400, "bind_secret_id is not set on the role")
		}
		metadata := map[string]any{}
		if raw, ok := bodyGet(body, "metadata"); ok && raw.Truthy() {
			v, err := value.DecodeJSON([]byte(raw.PyStr()))
			if err != nil || !raw.IsString() {
				return 0, nil, vaultErr(400, "failed to parse metadata")
			}
			metadata, _ = toAny(v).(map[string]any)
		}
		sid := &FakeSecretID{
			Accessor:     f.newUUID(),
			CreationTime: f.now(),
			Metadata:     metadata,
			Mount:        mount,
			NumUses:      role.Params["secret_id_num_uses"].(int64),
			Role:         m[1],
			SecretID:     f.newUUID(),
			TTL:          role.Params["secret_id_ttl"].(int64),
		}
		f.s.SecretIDs = append(f.s.SecretIDs, sid)
		data := map[string]any{
			"secret_id":          sid.SecretID,
			"secret_id_accessor": sid.Accessor,
			"secret_id_num_uses": sid.NumUses,
			"secret_id_ttl":      sid.TTL,
		}
		return f.maybeWrap(header, path, &envelope{Data: data})
	}
	if _, err := f.authorize(header, method, path, nil); err != nil {
		return 0, nil, err
	}
	return 0, nil, noHandler(path)
}

func copyParams(p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		if l, ok := v.([]string); ok {
			v = append([]string{}, l...)
		}
		out[k] = v
	}
	return out
}

func (f *FakeVault) roleWrite(roles map[string]*FakeRole, name string, role *FakeRole, body value.Value) (int, any, error) {
	params := roleDefaults()
	if role != nil {
		params = copyParams(role.Params)
	}
	defaults := roleDefaults()
	for _, p := range body.Pairs() {
		key, val := p.Key.PyStr(), p.Val
		if _, known := defaults[key]; !known {
			continue // Vault ignores unknown fields (with a warning)
		}
		var err error
		switch {
		case contains(roleTTLFields, key):
			params[key], err = parseDuration(val)
		case contains(roleIntFields, key):
			params[key], err = parseInt(val)
		case key == "bind_secret_id" || key == "token_no_default_policy" || key == "local_secret_ids":
			if key == "local_secret_ids" && role != nil {
				continue
			}
			params[key], err = parseBool(val)
		case key == "token_bound_cidrs":
			var l []string
			if l, err = parseStringList(val); err == nil {
				for i := range l {
					l[i] = canonicalCIDR(l[i])
				}
				params[key] = l
			}
		case key == "secret_id_bound_cidrs" || key == "token_policies":
			params[key], err = parseStringList(val)
		default:
			params[key] = val.PyStr()
		}
		if err != nil {
			return 0, nil, err
		}
	}
	cidrs, _ := params["secret_id_bound_cidrs"].([]string)
	tokenCIDRs, _ := params["token_bound_cidrs"].([]string)
	if !params["bind_secret_id"].(bool) && len(cidrs) == 0 && len(tokenCIDRs) == 0 {
		return 0, nil, vaultErr(400, "at least one constraint should be enabled on the role")
	}
	if role == nil {
		roles[name] = &FakeRole{Params: params, RoleID: f.newUUID()}
	} else {
		role.Params = params
	}
	return 204, nil, nil
}

func (f *FakeVault) login(mount string, body value.Value) (int, any, error) {
	roleName, role := "", (*FakeRole)(nil)
	wantRole, _ := bodyGet(body, "role_id")
	for _, name := range sortedKeys(f.s.Roles[mount]) {
		r := f.s.Roles[mount][name]
		if value.Equal(str(r.RoleID), wantRole) {
			roleName, role = name, r
		}
	}
	if role == nil {
		return 0, nil, vaultErr(400, "invalid role or secret ID")
	}
	meta := map[string]any{}
	if role.Params["bind_secret_id"].(bool) {
		want, _ := bodyGet(body, "secret_id")
		var sid *FakeSecretID
		for _, s := range f.s.SecretIDs {
			if s.Mount == mount && s.Role == roleName && value.Equal(str(s.SecretID), want) {
				sid = s
			}
		}
		if sid == nil || sid.TTL != 0 && f.now() >= sid.CreationTime+sid.TTL {
			return 0, nil, vaultErr(400, "invalid role or secret ID")
		}
		sid.Uses++
		if sid.NumUses != 0 && sid.Uses >= sid.NumUses {
			for i, s := range f.s.SecretIDs {
				if s == sid {
					f.s.SecretIDs = append(f.s.SecretIDs[:i], f.s.SecretIDs[i+1:]...)
					break
				}
			}
		}
		for k, v := range sid.Metadata {
			meta[k] = v
		}
	}
	meta["role_name"] = roleName
	accessor := f.s.ApproleMounts[mount].Accessor
	entity, alias := f.aliasByFactors(accessor, role.RoleID)
	if entity == nil {
		entity = &FakeEntity{Aliases: []*FakeAlias{}, ID: f.newUUID(), Metadata: map[string]string{}, Policies: []string{}}
		entity.Name = "entity_" + entity.ID[:8]
		alias = &FakeAlias{CustomMetadata: map[string]string{}, ID: f.newUUID(), Metadata: map[string]any{}, MountAccessor: accessor, Name: role.RoleID}
		entity.Aliases = append(entity.Aliases, alias)
		f.s.Entities = append(f.s.Entities, entity)
	}
	alias.Metadata = meta
	p := role.Params
	tokenPolicies := append([]string{}, p["token_policies"].([]string)...)
	set := map[string]bool{}
	for _, x := range tokenPolicies {
		set[x] = true
	}
	if !p["token_no_default_policy"].(bool) {
		set["default"] = true
	}
	policies := sortedKeys(set)
	ttl := p["token_ttl"].(int64)
	if ttl == 0 {
		ttl = defaultTokenTTL
	}
	if max := p["token_explicit_max_ttl"].(int64); max != 0 && max < ttl {
		ttl = max
	}
	auth := f.issueToken(policies, tokenPolicies, meta, ttl, p["token_num_uses"].(int64), entity.ID, true)
	return 200, &envelope{Auth: auth}, nil
}

func (f *FakeVault) tokenCreate(body value.Value) (*envelope, error) {
	pol, _ := bodyGet(body, "policies")
	policies, err := parseStringList(pol)
	if err != nil {
		return nil, err
	}
	noDefault := false
	if v, ok := bodyGet(body, "no_default_policy"); ok {
		if noDefault, err = parseBool(v); err != nil {
			return nil, err
		}
	}
	set := map[string]bool{}
	for _, p := range policies {
		set[p] = true
	}
	if !noDefault {
		set["default"] = true
	}
	tokenPolicies := sortedKeys(set)
	ttlV := value.NewInt(defaultTokenTTL)
	if v, ok := bodyGet(body, "explicit_max_ttl"); ok && v.Truthy() {
		ttlV = v
	} else if v, ok := bodyGet(body, "ttl"); ok && v.Truthy() {
		ttlV = v
	}
	ttl, err := parseDuration(ttlV)
	if err != nil {
		return nil, err
	}
	numUses := int64(0)
	if v, ok := bodyGet(body, "num_uses"); ok {
		if numUses, err = parseInt(v); err != nil {
			return nil, err
		}
	}
	renewable := true
	if v, ok := bodyGet(body, "renewable"); ok {
		if renewable, err = parseBool(v); err != nil {
			return nil, err
		}
	}
	var meta map[string]any
	if v, ok := bodyGet(body, "meta"); ok && v.Truthy() {
		meta, _ = toAny(v).(map[string]any)
	}
	return &envelope{Auth: f.issueToken(tokenPolicies, tokenPolicies, meta, ttl, numUses, "", renewable)}, nil
}

// ---- identity/... ----

func (f *FakeVault) identity(method, path string, header http.Header, body value.Value) (int, any, error) {
	if path == "identity/entity/name" && method == "LIST" {
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		if len(f.s.Entities) == 0 {
			return 0, nil, vaultErr(404)
		}
		names := make([]string, 0, len(f.s.Entities))
		for _, e := range f.s.Entities {
			names = append(names, e.Name)
		}
		sort.Strings(names)
		return 200, &envelope{Data: map[string]any{"keys": names}}, nil
	}
	if m := reEntityName.FindStringSubmatch(path); m != nil {
		name := m[1]
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		e := f.entityByName(name)
		switch method {
		case "GET":
			if e == nil {
				return 0, nil, vaultErr(404)
			}
			return 200, &envelope{Data: f.entityView(e)}, nil
		case "DELETE":
			if e != nil {
				for i, x := range f.s.Entities {
					if x == e {
						f.s.Entities = append(f.s.Entities[:i], f.s.Entities[i+1:]...)
						break
					}
				}
			}
			return 204, nil, nil
		case "POST":
			created := e == nil
			if created {
				e = &FakeEntity{Aliases: []*FakeAlias{}, ID: f.newUUID(), Metadata: map[string]string{}, Name: name, Policies: []string{}}
				f.s.Entities = append(f.s.Entities, e)
			}
			if meta, ok := bodyGet(body, "metadata"); ok {
				if !meta.Truthy() {
					meta = value.NewMap(nil)
				}
				if !meta.IsMap() {
					return 0, nil, vaultErr(400, "invalid metadata")
				}
				e.Metadata = map[string]string{}
				for _, p := range meta.Pairs() {
					e.Metadata[p.Key.PyStr()] = p.Val.PyStr()
				}
			}
			if pol, ok := bodyGet(body, "policies"); ok {
				l, err := parseStringList(pol)
				if err != nil {
					return 0, nil, err
				}
				e.Policies = l
			}
			if dis, ok := bodyGet(body, "disabled"); ok {
				b, err := parseBool(dis)
				if err != nil {
					return 0, nil, err
				}
				e.Disabled = b
			}
			if !created {
				return 204, nil, nil
			}
			return 200, &envelope{Data: map[string]any{"aliases": nil, "id": e.ID, "name": e.Name}}, nil
		}
	}
	if path == "identity/entity-alias" && method == "POST" {
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		return f.aliasWrite(body)
	}
	if path == "identity/lookup/entity" && method == "POST" {
		if _, err := f.authorize(header, method, path, nil); err != nil {
			return 0, nil, err
		}
		e, _ := f.aliasByFactors(bodyStr(body, "alias_mount_accessor"), bodyStr(body, "alias_name"))
		if e == nil {
			return 204, nil, nil
		}
		return 200, &envelope{Data: f.entityView(e)}, nil
	}
	if _, err := f.authorize(header, method, path, nil); err != nil {
		return 0, nil, err
	}
	return 0, nil, noHandler(path)
}

// invalidField stands for a field that is present but not a string: it
// matches nothing.
const invalidField = "\x00not a string"

func bodyField(body value.Value, key string) string {
	v, ok := get(body, key)
	switch {
	case !ok:
		return ""
	case v.IsString():
		return v.Str()
	}
	return invalidField
}

// aliasWrite is vault/identity_store_aliases.go handleAliasCreateUpdate,
// reduced.
func (f *FakeVault) aliasWrite(body value.Value) (int, any, error) {
	if v, ok := get(body, "name"); ok && !v.IsString() {
		return 0, nil, vaultErr(400, "invalid alias name")
	}
	name := bodyField(body, "name")
	accessor := bodyField(body, "mount_accessor")
	canonical := bodyField(body, "canonical_id")
	if id, ok := get(body, "id"); ok && id.Truthy() {
		cur, alias := f.aliasByID(id.PyStr())
		if alias == nil {
			return 0, nil, vaultErr(400, "invalid alias ID provided")
		}
		if name == "" {
			name = alias.Name
		}
		if accessor == "" {
			accessor = alias.MountAccessor
		}
		return f.aliasUpdate(cur, alias, canonical, name, accessor)
	}
	if accessor == "" || name == "" {
		return 0, nil, vaultErr(400, "'id' or 'mount_accessor' and 'name' must be provided")
	}
	if _, ok := f.mountOfAccessor(accessor); !ok {
		return 0, nil, vaultErr(400, fmt.Sprintf("invalid mount accessor %q", accessor))
	}
	if cur, alias := f.aliasByFactors(accessor, name); alias != nil {
		return f.aliasUpdate(cur, alias, canonical, name, accessor)
	}
	target := f.entityByID(canonical)
	if target == nil {
		return 0, nil, vaultErr(400, "invalid canonical ID")
	}
	for _, a := range target.Aliases {
		if a.MountAccessor == accessor {
			return 0, nil, vaultErr(400, "Alias already exists for requested entity and mount accessor")
		}
	}
	alias := &FakeAlias{CustomMetadata: map[string]string{}, ID: f.newUUID(), Metadata: map[string]any{}, MountAccessor: accessor, Name: name}
	target.Aliases = append(target.Aliases, alias)
	return 200, &envelope{Data: map[string]any{"canonical_id": target.ID, "id": alias.ID}}, nil
}

func (f *FakeVault) aliasUpdate(cur *FakeEntity, alias *FakeAlias, canonical, name, accessor string) (int, any, error) {
	if name == alias.Name && accessor == alias.MountAccessor && (canonical == "" || canonical == cur.ID) {
		return 204, nil, nil
	}
	if name != alias.Name || accessor != alias.MountAccessor {
		if _, ok := f.mountOfAccessor(accessor); !ok {
			return 0, nil, vaultErr(400, fmt.Sprintf("invalid mount accessor %q", accessor))
		}
		if _, other := f.aliasByFactors(accessor, name); other != nil && other.ID != alias.ID {
			return 0, nil, vaultErr(400, "alias with combination of mount accessor and name already exists")
		}
		alias.Name, alias.MountAccessor = name, accessor
	}
	target := cur
	if canonical != "" && canonical != cur.ID {
		target = f.entityByID(canonical)
		if target == nil {
			return 0, nil, vaultErr(400, "given 'canonical_id' is not associated with an entity")
		}
		for _, a := range target.Aliases {
			if a.MountAccessor == accessor {
				return 0, nil, vaultErr(400, "Alias cannot be updated as the given entity already has an alias for this mount ")
			}
		}
		for i, a := range cur.Aliases {
			if a == alias {
				cur.Aliases = append(cur.Aliases[:i], cur.Aliases[i+1:]...)
				break
			}
		}
		target.Aliases = append(target.Aliases, alias)
	}
	return 200, &envelope{Data: map[string]any{"canonical_id": target.ID, "id": alias.ID}}, nil
}

// ---- out-of-band changes (the operator, an admin) ----

// Apply makes a change behind the master's back, as the trace's
// vault_change steps do: set_role_params (minion, params),
// delete_role (minion), set_entity_metadata (entity, metadata).
func (f *FakeVault) Apply(change string, minion string, params map[string]any, entity string, metadata map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	mount := "salt-minions"
	switch change {
	case "set_role_params":
		if r := f.s.Roles[mount][minion]; r != nil {
			for k, v := range params {
				r.Params[k] = v
			}
			normParams(r.Params)
		}
	case "delete_role":
		delete(f.s.Roles[mount], minion)
	case "set_entity_metadata":
		e := f.entityByName(entity)
		if e == nil {
			return fmt.Errorf("no entity %q", entity)
		}
		e.Metadata = map[string]string{}
		for k, v := range metadata {
			e.Metadata[k] = v
		}
	default:
		return fmt.Errorf("unknown change %q", change)
	}
	return nil
}
