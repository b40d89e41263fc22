package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/minionvault/minion-vault-operator/pkg/vault/internal/rules"
)

// DefaultTimeout bounds one request when Config.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// Retries. The api library's own retries are off (MaxRetries 0): it would
// retry every method, and a retried POST identity/entity-alias whose first
// attempt did reach Vault is not harmless. Instead the client retries
// requests that change nothing (GETs and the identity lookup) up to
// maxReadRetries times on transient errors (transport errors, 5xx, 429, 412)
// with a short jittered backoff, and leaves writes to the controller's
// rate-limited requeue. The one exception for every request is the single
// retry after a fresh login, below.
const maxReadRetries = 2

// noRetriesKey marks a context whose requests are sent once.
type noRetriesKey struct{}

// WithoutRetries is ctx with the read retries off: for a caller that
// retries on its own schedule, as the connection check does (every 2 s
// while Vault is unavailable), so that a Vault gone or hanging holds the
// caller for one attempt, not three with pauses between them. The single
// retry after a fresh login stays.
func WithoutRetries(ctx context.Context) context.Context {
	return context.WithValue(ctx, noRetriesKey{}, true)
}

func retriesAllowed(ctx context.Context) bool {
	off, _ := ctx.Value(noRetriesKey{}).(bool)
	return !off
}

// readBackoff is the pause before read retry n (1, 2, ...); a variable so
// that tests need not wait.
var readBackoff = func(n int) time.Duration {
	d := time.Duration(n) * 250 * time.Millisecond
	return d/2 + rand.N(d/2+1) // jitter in [d/2, d]
}

// client is the implementation of Client over hashicorp/vault/api. It also
// implements io.Closer.
type client struct {
	cfg       Config
	obs       Observer
	http      *http.Client
	transport *http.Transport
	anon      *api.Client // no token: logins
	timeout   time.Duration
	now       func() time.Time
	secrets   secretSet

	mu     sync.Mutex // guards sess and closed; held while logging in or renewing
	sess   *session
	closed bool

	accessorsMu sync.Mutex
	accessors   map[string]string // auth mount -> accessor; nil: read sys/auth
}

var _ io.Closer = (*client)(nil)

// New connects to Vault as cfg says and logs in once (for a static token:
// looks it up to learn its TTL). obs may be nil. The returned Client also
// implements io.Closer; Close it when done with it.
//
// Every request goes through one http.RoundTripper that applies the
// client-side rate limit (cfg.QPS, cfg.Burst) and reports the request to
// obs. The token lives in memory only: it is renewed when 2/3 of its lease
// has passed (checked before each request, so no goroutine), replaced by a
// new login when it cannot be renewed, and, when Vault answers 403 and a
// lookup-self confirms the token itself is refused, replaced by one new
// login after which the request is sent once more.
func New(ctx context.Context, cfg Config, obs Observer) (Client, error) {
	c, err := newClient(cfg, obs)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	err = c.loginLocked(ctx)
	c.mu.Unlock()
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// ReadServerInfo asks the Vault at cfg's address what it says of itself
// to anyone (sys/seal-status, no token): which Vault a connection points
// at, even when its credentials do not log in.
func ReadServerInfo(ctx context.Context, cfg Config, obs Observer) (ServerInfo, error) {
	c, err := newClient(cfg, obs)
	if err != nil {
		return ServerInfo{}, err
	}
	defer c.Close()
	// No login: the request goes without a token, as sys/seal-status
	// needs none (a client that never logged in has no session).
	return c.serverInfo(ctx, true)
}

func newClient(cfg Config, obs Observer) (*client, error) {
	if obs == nil {
		obs = nopObserver{}
	}
	if err := validateConfig(cfg); err != nil {
		return nil, &Error{Op: "configure", Err: err}
	}
	rt, base, err := newTransport(cfg, obs)
	if err != nil {
		return nil, &Error{Op: "configure", Err: err}
	}
	c := &client{
		cfg:       cfg,
		obs:       obs,
		transport: base,
		http: &http.Client{
			Transport:     rt,
			CheckRedirect: followRedirect,
		},
		timeout: cfg.Timeout,
		now:     time.Now,
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	c.secrets.add(cfg.Auth.Token)
	if cfg.Auth.AppRole != nil {
		c.secrets.add(cfg.Auth.AppRole.SecretID)
	}
	if c.anon, err = c.newAPI(""); err != nil {
		return nil, &Error{Op: "configure", Err: err}
	}
	return c, nil
}

func validateConfig(cfg Config) error {
	u, err := url.Parse(cfg.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: address %q is not an http or https URL", ErrInvalid, cfg.Address)
	}
	n := 0
	if cfg.Auth.Kubernetes != nil {
		n++
		if cfg.Auth.Kubernetes.Role == "" || cfg.Auth.Kubernetes.JWT == nil {
			return fmt.Errorf("%w: kubernetes auth needs a role and a JWT source", ErrInvalid)
		}
	}
	if cfg.Auth.AppRole != nil {
		n++
		if cfg.Auth.AppRole.RoleID == "" {
			return fmt.Errorf("%w: approle auth needs a role ID", ErrInvalid)
		}
	}
	if cfg.Auth.Token != "" {
		n++
	}
	if n != 1 {
		return fmt.Errorf("%w: exactly one login method must be configured, not %d", ErrInvalid, n)
	}
	if cfg.QPS < 0 || cfg.Burst < 0 {
		return fmt.Errorf("%w: negative rate limit", ErrInvalid)
	}
	return nil
}

// followRedirect is the HTTP client's redirect policy. A standby of a Vault
// HA cluster that cannot forward a request to the active node (the active
// node just changed, its cluster port not answering yet) answers 307 with
// the active node's address. net/http follows that once with the same
// method and body (retryablehttp's requests have GetBody). The api
// library's own following is off (DisableRedirects): it sends a raw
// write's body again as "null" (ResetJSONBody marshals the request's
// Obj, which WriteRaw leaves nil), and Vault takes that for a write of
// nothing and answers success: role and entity writes made during a
// step-down were acknowledged and lost (the HA tests found it). Never more
// than one redirect, never from https to http, and never one that would
// change the method (net/http turns a PUT answered 301 or 302 into a GET):
// those answers are returned as they are, and send makes them an error.
func followRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	switch {
	case len(via) > 1:
		return http.ErrUseLastResponse
	case req.Method != first.Method:
		return http.ErrUseLastResponse
	case first.URL.Scheme == "https" && req.URL.Scheme != "https":
		return http.ErrUseLastResponse
	}
	return nil
}

// newAPI returns an api client on the shared HTTP client that sends token.
func (c *client) newAPI(token string) (*api.Client, error) {
	a, err := api.NewClient(&api.Config{
		Address:    c.cfg.Address,
		HttpClient: c.http,
		MaxRetries: 0, // see maxReadRetries
		// net/http follows redirects (followRedirect), not the api library.
		DisableRedirects: true,
		// Timeout 0: call() bounds every attempt with its own context.
	})
	if err != nil {
		return nil, err
	}
	a.SetToken(token) // also overrides VAULT_TOKEN from the environment
	if c.cfg.Namespace != "" {
		a.SetNamespace(c.cfg.Namespace)
	} else {
		a.ClearNamespace() // ignore VAULT_NAMESPACE
	}
	return a, nil
}

// Close ends the client: later requests fail with ErrClosed (a transient
// *Error: the caller asks its Cache again) and idle connections are closed.
// The token is not revoked, it runs out with its TTL: revoking would need one
// more capability and would fail requests still in flight.
func (c *client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.transport.CloseIdleConnections()
	return nil
}

// request is one API call.
type request struct {
	op     string // Observer op and the first word of Error.Op
	method string
	path   string
	body   any
	// idempotent requests change nothing and are retried on transient errors.
	idempotent bool
	// absentOK: a 404 without error messages is an answer ("absent"), not
	// an error. A 404 with messages ("no handler for route", a missing
	// mount) stays an error.
	absentOK bool
	// anonymous requests go without a token (c.anon): no session is
	// needed, none is renewed or logged in for.
	anonymous bool
}

type response struct {
	status int
	body   map[string]any // nil for 204 and absent
}

func (r *response) absent() bool { return r.status == http.StatusNotFound }

// data is the "data" object of the response.
func (r *response) data() map[string]any {
	m, _ := r.body["data"].(map[string]any)
	return m
}

// call sends req with the current token: renewing or replacing it first when
// due, logging in once more and retrying once when the token is refused,
// and retrying idempotent requests on transient errors.
func (c *client) call(ctx context.Context, req request) (*response, error) {
	relogged := false
	retries := 0
	for {
		var s *session
		a := c.anon
		if req.anonymous {
			if err := c.open(req); err != nil {
				return nil, err
			}
		} else {
			var err error
			if s, err = c.session(ctx, req); err != nil {
				return nil, err
			}
			a = s.api
		}
		resp, err := c.send(ctx, a, req)
		if err == nil {
			return resp, nil
		}
		if !relogged && s != nil && isAuthFailure(err) {
			relogged = true
			retry, lerr := c.recoverAuth(ctx, s)
			if lerr != nil {
				return nil, lerr
			}
			if retry {
				continue
			}
			return nil, err
		}
		if Conflict(err) && strings.Contains(strings.ToLower(err.Error()), "invalid mount accessor") {
			c.forgetAccessors()
		}
		if req.idempotent && retries < maxReadRetries && Transient(err) && ctx.Err() == nil && retriesAllowed(ctx) {
			retries++
			t := time.NewTimer(readBackoff(retries))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, err
			case <-t.C:
			}
			continue
		}
		return nil, err
	}
}

// send makes one HTTP request (the api library does not retry).
func (c *client) send(ctx context.Context, a *api.Client, req request) (*response, error) {
	ctx, cancel := context.WithTimeout(withOp(ctx, req.op), c.timeout)
	defer cancel()
	var (
		resp *api.Response
		err  error
	)
	switch req.method {
	case http.MethodGet:
		resp, err = a.Logical().ReadRawWithContext(ctx, req.path)
	case "LIST":
		resp, err = a.Logical().ReadRawWithDataWithContext(ctx, req.path, map[string][]string{"list": {"true"}})
	case http.MethodDelete:
		resp, err = a.Logical().DeleteRawWithContext(ctx, req.path)
	default:
		var body []byte
		if req.body != nil {
			if body, err = json.Marshal(req.body); err != nil {
				return nil, c.newError(req, 0, nil, fmt.Errorf("%w: encoding the request: %v", ErrInvalid, err))
			}
		}
		resp, err = a.Logical().WriteRawWithContext(ctx, req.path, body)
	}
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		var re *api.ResponseError
		if errors.As(err, &re) {
			msgs := nonEmpty(re.Errors)
			if re.StatusCode == http.StatusNotFound && req.absentOK && len(msgs) == 0 {
				return &response{status: http.StatusNotFound}, nil
			}
			return nil, c.newError(req, re.StatusCode, msgs, nil)
		}
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		return nil, c.newError(req, code, nil, err)
	}
	out := &response{status: resp.StatusCode}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// A redirect followRedirect did not follow: whether Vault did
		// anything is unknown (nothing, as a rule), and the request is
		// tried again later (Transient).
		return nil, c.newError(req, resp.StatusCode, nil, fmt.Errorf("Vault redirected the request to %s, which was not followed", resp.Header.Get("Location")))
	}
	if resp.StatusCode == http.StatusNoContent {
		return out, nil
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&out.body); err != nil {
		// Vault answers "nothing" with 204, so an empty 200 was cut short
		// too. Whether Vault carried the request out is unknown either
		// way: the caller reads again before it writes again.
		return nil, c.newError(req, resp.StatusCode, nil, fmt.Errorf("decoding the response: %w: %w", ErrIncompleteResponse, err))
	}
	return out, nil
}

// newError builds the *Error for req, without any secret this client knows.
func (c *client) newError(req request, code int, msgs []string, err error) *Error {
	e := &Error{Op: req.op + " " + req.path, StatusCode: code, Err: err}
	for _, m := range msgs {
		e.Messages = append(e.Messages, c.secrets.redact(m))
	}
	if err != nil {
		if s := err.Error(); c.secrets.redact(s) != s {
			e.Err = errors.New(c.secrets.redact(s))
		}
	}
	return e
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// isAuthFailure: Vault refused the token (or the path: only a lookup-self
// tells them apart).
func isAuthFailure(err error) bool {
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusForbidden {
		return false
	}
	if len(e.Messages) == 0 {
		return true
	}
	for _, m := range e.Messages {
		m = strings.ToLower(m)
		if strings.Contains(m, "permission denied") || strings.Contains(m, "invalid token") {
			return true
		}
	}
	return false
}

// Paths and names: the checks and paths are in internal/rules, which the
// fake (vaulttest) shares.

func invalid(op, path string, err error) error { return &Error{Op: op + " " + path, Err: err} }

// Client methods.

func (c *client) ServerInfo(ctx context.Context) (ServerInfo, error) {
	return c.serverInfo(ctx, false)
}

// serverInfo reads sys/seal-status, with the session's token or, when
// anonymous, without one.
func (c *client) serverInfo(ctx context.Context, anonymous bool) (ServerInfo, error) {
	req := request{op: OpRead, method: http.MethodGet, path: "sys/seal-status", idempotent: true, anonymous: anonymous}
	resp, err := c.call(ctx, req)
	if err != nil {
		return ServerInfo{}, err
	}
	info := ServerInfo{}
	info.Version, _ = resp.body["version"].(string)
	info.ClusterID, _ = resp.body["cluster_id"].(string)
	if info.Version == "" {
		return ServerInfo{}, c.newError(req, resp.status, nil, errors.New("the response has no version"))
	}
	return info, nil
}

func (c *client) CheckToken(ctx context.Context) error {
	_, err := c.call(ctx, request{op: OpLogin, method: http.MethodGet, path: "auth/token/lookup-self", idempotent: true})
	return err
}

// TokenLease implements TokenLeaser.
func (c *client) TokenLease() (expires time.Time, lease time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil || c.sess.expires.IsZero() {
		return time.Time{}, 0
	}
	lease = time.Duration(c.sess.increment) * time.Second
	if left := c.sess.expires.Sub(c.now()); lease < left {
		lease = left // an unknown usual lease (0) is no less than what is left
	}
	return c.sess.expires, lease
}

// MountAccessor answers from the accessors sys/auth returned last: a
// reconcile would otherwise read sys/auth every time for a value that only
// changes when the mount is disabled. The cache is refreshed by AuthMounts
// (the VaultConnection's periodic check) and dropped when Vault answers
// "invalid mount accessor" (see call); a mount not in it is looked up.
func (c *client) MountAccessor(ctx context.Context, authMount string) (string, error) {
	mount := rules.CleanMount(authMount)
	if err := rules.Segments("auth mount", mount); err != nil {
		return "", invalid(OpRead, "sys/auth", err)
	}
	c.accessorsMu.Lock()
	acc, ok := c.accessors[mount]
	c.accessorsMu.Unlock()
	if ok {
		return acc, nil
	}
	mounts, err := c.AuthMounts(ctx)
	if err != nil {
		return "", err
	}
	return mounts[mount].Accessor, nil
}

func (c *client) AuthMounts(ctx context.Context) (map[string]AuthMount, error) {
	resp, err := c.call(ctx, request{op: OpRead, method: http.MethodGet, path: "sys/auth", idempotent: true})
	if err != nil {
		return nil, err
	}
	data := resp.data()
	if data == nil {
		data = resp.body // before Vault 0.6.1 there was no "data"
	}
	out := map[string]AuthMount{}
	accessors := map[string]string{}
	for path, v := range data {
		m, ok := v.(map[string]any)
		if !ok || !strings.HasSuffix(path, "/") {
			continue
		}
		am := AuthMount{}
		am.Type, _ = m["type"].(string)
		am.Accessor, _ = m["accessor"].(string)
		out[strings.TrimSuffix(path, "/")] = am
		accessors[strings.TrimSuffix(path, "/")] = am.Accessor
	}
	c.accessorsMu.Lock()
	c.accessors = accessors
	c.accessorsMu.Unlock()
	return out, nil
}

// forgetAccessors drops the cached accessors: Vault no longer knows one.
func (c *client) forgetAccessors() {
	c.accessorsMu.Lock()
	c.accessors = nil
	c.accessorsMu.Unlock()
}

func (c *client) ReadRole(ctx context.Context, mount, name string) (map[string]any, error) {
	p, err := rules.RolePath(mount, name)
	if err != nil {
		return nil, invalid(OpRead, "auth/"+mount+"/role/"+name, err)
	}
	resp, err := c.call(ctx, request{op: OpRead, method: http.MethodGet, path: p, idempotent: true, absentOK: true})
	if err != nil || resp.absent() {
		return nil, err
	}
	d := resp.data()
	if d == nil {
		d = map[string]any{}
	}
	return d, nil
}

func (c *client) WriteRole(ctx context.Context, mount, name string, params map[string]any) error {
	p, err := rules.RolePath(mount, name)
	if err != nil {
		return invalid(OpWrite, "auth/"+mount+"/role/"+name, err)
	}
	if params == nil {
		params = map[string]any{}
	}
	_, err = c.call(ctx, request{op: OpWrite, method: http.MethodPost, path: p, body: params})
	return err
}

func (c *client) DeleteRole(ctx context.Context, mount, name string) error {
	p, err := rules.RolePath(mount, name)
	if err != nil {
		return invalid(OpDelete, "auth/"+mount+"/role/"+name, err)
	}
	_, err = c.call(ctx, request{op: OpDelete, method: http.MethodDelete, path: p, absentOK: true})
	return err
}

func (c *client) ReadRoleID(ctx context.Context, mount, name string) (string, error) {
	p, err := rules.RolePath(mount, name)
	if err != nil {
		return "", invalid(OpRead, "auth/"+mount+"/role/"+name+"/role-id", err)
	}
	resp, err := c.call(ctx, request{op: OpRead, method: http.MethodGet, path: p + "/role-id", idempotent: true, absentOK: true})
	if err != nil || resp.absent() {
		return "", err
	}
	id, _ := resp.data()["role_id"].(string)
	return id, nil
}

func (c *client) ReadEntityByName(ctx context.Context, name string) (*Entity, error) {
	p, err := rules.EntityPath(name)
	if err != nil {
		return nil, invalid(OpRead, "identity/entity/name/"+name, err)
	}
	resp, err := c.call(ctx, request{op: OpRead, method: http.MethodGet, path: p, idempotent: true, absentOK: true})
	if err != nil || resp.absent() {
		return nil, err
	}
	return parseEntity(resp.data()), nil
}

func parseEntity(d map[string]any) *Entity {
	e := &Entity{Metadata: map[string]string{}}
	e.ID, _ = d["id"].(string)
	e.Name, _ = d["name"].(string)
	if md, ok := d["metadata"].(map[string]any); ok {
		for k, v := range md {
			e.Metadata[k] = fmt.Sprint(v)
		}
	}
	if as, ok := d["aliases"].([]any); ok {
		for _, a := range as {
			if m, ok := a.(map[string]any); ok {
				e.Aliases = append(e.Aliases, parseAlias(m))
			}
		}
	}
	return e
}

func parseAlias(m map[string]any) Alias {
	var a Alias
	a.ID, _ = m["id"].(string)
	a.Name, _ = m["name"].(string)
	a.MountAccessor, _ = m["mount_accessor"].(string)
	a.CanonicalID, _ = m["canonical_id"].(string)
	return a
}

// WriteEntityByName creates the entity (Vault answers 200 with its ID) or
// replaces its metadata (Vault answers 204).
func (c *client) WriteEntityByName(ctx context.Context, name string, metadata map[string]string) (string, error) {
	p, err := rules.EntityPath(name)
	if err != nil {
		return "", invalid(OpWrite, "identity/entity/name/"+name, err)
	}
	md := map[string]string{}
	for k, v := range metadata {
		md[k] = v
	}
	resp, err := c.call(ctx, request{op: OpWrite, method: http.MethodPost, path: p, body: map[string]any{"metadata": md}})
	if err != nil {
		return "", err
	}
	id, _ := resp.data()["id"].(string)
	return id, nil
}

func (c *client) DeleteEntityByName(ctx context.Context, name string) error {
	p, err := rules.EntityPath(name)
	if err != nil {
		return invalid(OpDelete, "identity/entity/name/"+name, err)
	}
	_, err = c.call(ctx, request{op: OpDelete, method: http.MethodDelete, path: p, absentOK: true})
	return err
}

func (c *client) LookupEntityByAlias(ctx context.Context, name, mountAccessor string) (*Entity, error) {
	const p = "identity/lookup/entity"
	if name == "" || mountAccessor == "" {
		return nil, invalid(OpRead, p, fmt.Errorf("%w: a lookup needs an alias name and a mount accessor", ErrInvalid))
	}
	// A POST that changes nothing: retried like a read.
	resp, err := c.call(ctx, request{
		op: OpRead, method: http.MethodPost, path: p, idempotent: true, absentOK: true,
		body: map[string]any{"alias_name": name, "alias_mount_accessor": mountAccessor},
	})
	if err != nil || resp.absent() {
		return nil, err
	}
	d := resp.data()
	if d == nil {
		return nil, nil // 204: no such alias
	}
	return parseEntity(d), nil
}

func (c *client) CreateEntityAlias(ctx context.Context, name, mountAccessor, canonicalID string) (string, error) {
	const p = "identity/entity-alias"
	if name == "" || mountAccessor == "" || canonicalID == "" {
		return "", invalid(OpWrite, p, fmt.Errorf("%w: an alias needs a name, a mount accessor and an entity ID", ErrInvalid))
	}
	resp, err := c.call(ctx, request{
		op: OpWrite, method: http.MethodPost, path: p,
		body: map[string]any{"name": name, "mount_accessor": mountAccessor, "canonical_id": canonicalID},
	})
	if err != nil {
		return "", err
	}
	// Vault answers a create and a move with the alias's ID; nothing (204)
	// when the alias was already exactly so.
	id, _ := resp.data()["id"].(string)
	return id, nil
}

func (c *client) UpdateEntityAlias(ctx context.Context, id, name, mountAccessor, canonicalID string) error {
	if err := rules.Segment("alias ID", id); err != nil {
		return invalid(OpWrite, "identity/entity-alias/id/"+id, err)
	}
	body := map[string]any{}
	for k, v := range map[string]string{"name": name, "mount_accessor": mountAccessor, "canonical_id": canonicalID} {
		if v != "" {
			body[k] = v
		}
	}
	_, err := c.call(ctx, request{op: OpWrite, method: http.MethodPost, path: "identity/entity-alias/id/" + id, body: body})
	return err
}

func (c *client) DeleteEntityAlias(ctx context.Context, id string) error {
	if err := rules.Segment("alias ID", id); err != nil {
		return invalid(OpDelete, "identity/entity-alias/id/"+id, err)
	}
	_, err := c.call(ctx, request{op: OpDelete, method: http.MethodDelete, path: "identity/entity-alias/id/" + id, absentOK: true})
	return err
}

func (c *client) ReadPolicy(ctx context.Context, name string) (string, bool, error) {
	p, err := rules.PolicyPath(name)
	if err != nil {
		return "", false, invalid(OpRead, "sys/policies/acl/"+name, err)
	}
	resp, err := c.call(ctx, request{op: OpRead, method: http.MethodGet, path: p, idempotent: true, absentOK: true})
	if err != nil || resp.absent() {
		return "", false, err
	}
	hcl, _ := resp.data()["policy"].(string)
	return hcl, true, nil
}

func (c *client) WritePolicy(ctx context.Context, name, hcl string) error {
	p, err := rules.PolicyPath(name)
	if err != nil {
		return invalid(OpWrite, "sys/policies/acl/"+name, err)
	}
	_, err = c.call(ctx, request{op: OpWrite, method: http.MethodPut, path: p, body: map[string]any{"policy": hcl}})
	return err
}

func (c *client) DeletePolicy(ctx context.Context, name string) error {
	p, err := rules.PolicyPath(name)
	if err != nil {
		return invalid(OpDelete, "sys/policies/acl/"+name, err)
	}
	_, err = c.call(ctx, request{op: OpDelete, method: http.MethodDelete, path: p, absentOK: true})
	return err
}

func (c *client) ListPolicies(ctx context.Context) ([]string, error) {
	return c.list(ctx, "sys/policies/acl")
}

func (c *client) ListEntities(ctx context.Context) ([]Entity, error) {
	resp, err := c.call(ctx, request{op: OpList, method: "LIST", path: "identity/entity/id", idempotent: true, absentOK: true})
	if err != nil || resp.absent() {
		return nil, err
	}
	// The listing by ID has key_info, keyed by entity ID: each entry has
	// the name and the aliases (the listing by name drops it: its keys are
	// names, and Vault keeps only the key_info of listed keys).
	info, _ := resp.data()["key_info"].(map[string]any)
	out := make([]Entity, 0, len(info))
	for id, v := range info {
		m, _ := v.(map[string]any)
		e := Entity{ID: id}
		e.Name, _ = m["name"].(string)
		if as, ok := m["aliases"].([]any); ok {
			for _, a := range as {
				if am, ok := a.(map[string]any); ok {
					e.Aliases = append(e.Aliases, parseAlias(am))
				}
			}
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entity) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (c *client) ListRoles(ctx context.Context, mount string) ([]string, error) {
	mount = rules.CleanMount(mount)
	if err := rules.Segments("auth mount", mount); err != nil {
		return nil, invalid(OpList, "auth/"+mount+"/role", err)
	}
	return c.list(ctx, "auth/"+mount+"/role")
}

// list is a LIST of path's keys; Vault answers 404 when there are none.
func (c *client) list(ctx context.Context, path string) ([]string, error) {
	resp, err := c.call(ctx, request{op: OpList, method: "LIST", path: path, idempotent: true, absentOK: true})
	if err != nil || resp.absent() {
		return nil, err
	}
	keys, _ := resp.data()["keys"].([]any)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if s, ok := k.(string); ok {
			out = append(out, s)
		}
	}
	return out, nil
}
