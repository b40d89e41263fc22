package vault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/minionvault/minion-vault-operator/pkg/vault/internal/rules"
)

// Login methods, as reported to Observer.Login.
const (
	MethodKubernetes = "kubernetes"
	MethodAppRole    = "approle"
	MethodToken      = "token"
)

// Default auth mounts of the operator's own login.
const (
	DefaultKubernetesMount = "kubernetes"
	DefaultAppRoleMount    = "approle"
)

// expirySkew: a token this close to its expiry counts as expired (at most
// a tenth of its lease, so that short leases are renewed before that).
const expirySkew = time.Second

// retryRefreshAfter bounds the pause before a failed renewal is tried again
// (the old token is used meanwhile).
const retryRefreshAfter = 5 * time.Second

var errTokenExpired = errors.New("the Vault token has expired and a static token cannot log in again")

// session is one token and what is known about its lease. A session is
// never modified once published in client.sess; renewing publishes a copy.
type session struct {
	api       *api.Client // sends token
	token     string
	expires   time.Time // zero: never (e.g. a root token)
	skew      time.Duration
	refreshAt time.Time // zero: nothing to do before expires
	increment int64     // seconds asked for when renewing
	renewable bool
}

func (s *session) expiredAt(now time.Time) bool {
	return !s.expires.IsZero() && !now.Before(s.expires.Add(-s.skew))
}

func (c *client) method() string {
	switch {
	case c.cfg.Auth.Kubernetes != nil:
		return MethodKubernetes
	case c.cfg.Auth.AppRole != nil:
		return MethodAppRole
	default:
		return MethodToken
	}
}

// canLogin: a static token cannot be replaced, only renewed.
func (c *client) canLogin() bool { return c.cfg.Auth.Token == "" }

// open returns ErrClosed once the client is closed (for requests that
// need no session).
func (c *client) open(req request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return &Error{Op: req.op + " " + req.path, Err: ErrClosed}
	}
	return nil
}

// session returns the session to send req with, after renewing the token or
// logging in again when that is due.
func (c *client) session(ctx context.Context, req request) (*session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, &Error{Op: req.op + " " + req.path, Err: ErrClosed}
	}
	now := c.now()
	if c.sess.expiredAt(now) {
		if !c.canLogin() {
			return nil, &Error{Op: req.op + " " + req.path, Err: errTokenExpired}
		}
		if err := c.loginLocked(ctx); err != nil {
			return nil, err
		}
		return c.sess, nil
	}
	if !c.sess.refreshAt.IsZero() && !now.Before(c.sess.refreshAt) {
		c.refreshLocked(ctx, now)
	}
	return c.sess, nil
}

// refreshLocked renews the token, or logs in again when it cannot be
// renewed. On failure the current token stays in use until it expires and
// the refresh is tried again a little later.
func (c *client) refreshLocked(ctx context.Context, now time.Time) {
	s := c.sess
	if s.renewable {
		if ns, err := c.renewLocked(ctx, s, now); err == nil {
			c.sess = ns
			return
		}
	}
	if c.canLogin() && c.loginLocked(ctx) == nil {
		return
	}
	ns := *s
	ns.refreshAt = time.Time{}
	if s.renewable || c.canLogin() {
		wait := retryRefreshAfter
		if !s.expires.IsZero() {
			wait = min(wait, s.expires.Sub(now)/2)
		}
		ns.refreshAt = now.Add(max(wait, 100*time.Millisecond))
	}
	c.sess = &ns
}

// renewLocked calls auth/token/renew-self, asking for the token's usual
// lease again. When Vault grants less (the token reaches its max TTL), the
// token is not renewed again: a login method logs in anew once no more than
// a third of the usual lease is left (at once, if that is already so), a
// static token is used until it expires.
func (c *client) renewLocked(ctx context.Context, s *session, now time.Time) (*session, error) {
	var body map[string]any
	if s.increment > 0 {
		body = map[string]any{"increment": s.increment}
	}
	resp, err := c.send(ctx, s.api, request{op: OpLogin, method: http.MethodPost, path: "auth/token/renew-self", body: body})
	if err != nil {
		return nil, err
	}
	auth, _ := resp.body["auth"].(map[string]any)
	if auth == nil {
		return nil, errors.New("renew-self: no auth in the response")
	}
	lease := rules.Number(auth["lease_duration"])
	renewable, _ := auth["renewable"].(bool)
	ns := *s
	ns.renewable = renewable && (s.increment == 0 || lease >= s.increment)
	// Measured against the usual lease, a capped one is due for a refresh
	// (a new login) sooner, and counts as expired a little earlier.
	ns.setLease(now, lease, max(lease, s.increment))
	if !ns.renewable && !c.canLogin() {
		ns.refreshAt = time.Time{}
	}
	return &ns, nil
}

// setLease records that the token has remaining seconds to live out of a
// lease of total seconds; the refresh is due when 2/3 of total has passed.
func (s *session) setLease(now time.Time, remaining, total int64) {
	s.expires, s.refreshAt = time.Time{}, time.Time{}
	if remaining <= 0 {
		return // does not expire
	}
	if total < remaining {
		total = remaining
	}
	s.expires = now.Add(time.Duration(remaining) * time.Second)
	s.refreshAt = s.expires.Add(-time.Duration(total) * time.Second / 3)
	s.skew = min(expirySkew, time.Duration(total)*time.Second/10)
}

// loginLocked logs in (or looks up the static token) and publishes the new
// session. It reports to the Observer.
func (c *client) loginLocked(ctx context.Context) error {
	var (
		s   *session
		err error
	)
	switch {
	case c.cfg.Auth.Kubernetes != nil:
		k := c.cfg.Auth.Kubernetes
		path := "auth/" + mountOr(k.Mount, DefaultKubernetesMount) + "/login"
		var jwt string
		jwt, err = k.JWT(ctx)
		if err != nil {
			c.secrets.remember(jwt)
			err = c.newError(request{op: OpLogin, path: path}, 0, nil, fmt.Errorf("getting a service account token: %w", err))
			break
		}
		if jwt == "" {
			err = c.newError(request{op: OpLogin, path: path}, 0, nil, errors.New("the service account token is empty"))
			break
		}
		c.secrets.remember(jwt)
		s, err = c.loginWith(ctx, path, map[string]any{"role": k.Role, "jwt": jwt})
	case c.cfg.Auth.AppRole != nil:
		a := c.cfg.Auth.AppRole
		body := map[string]any{"role_id": a.RoleID}
		if a.SecretID != "" {
			body["secret_id"] = a.SecretID
		}
		s, err = c.loginWith(ctx, "auth/"+mountOr(a.Mount, DefaultAppRoleMount)+"/login", body)
	default:
		s, err = c.lookupStatic(ctx)
	}
	c.obs.Login(c.method(), err)
	if err != nil {
		return err
	}
	c.sess = s
	return nil
}

func mountOr(mount, def string) string {
	if m := rules.CleanMount(mount); m != "" {
		return m
	}
	return def
}

func (c *client) loginWith(ctx context.Context, path string, body map[string]any) (*session, error) {
	req := request{op: OpLogin, method: http.MethodPost, path: path, body: body}
	resp, err := c.send(ctx, c.anon, req)
	if err != nil {
		return nil, err
	}
	auth, _ := resp.body["auth"].(map[string]any)
	token, _ := auth["client_token"].(string)
	if token == "" {
		return nil, c.newError(req, resp.status, nil, errors.New("the login response has no token"))
	}
	c.secrets.remember(token)
	a, err := c.newAPI(token)
	if err != nil {
		return nil, c.newError(req, 0, nil, err)
	}
	lease := rules.Number(auth["lease_duration"])
	s := &session{api: a, token: token, increment: lease}
	s.renewable, _ = auth["renewable"].(bool)
	s.setLease(c.now(), lease, lease)
	return s, nil
}

// lookupStatic learns the static token's TTL and renewability.
func (c *client) lookupStatic(ctx context.Context) (*session, error) {
	token := c.cfg.Auth.Token
	req := request{op: OpLogin, method: http.MethodGet, path: "auth/token/lookup-self"}
	a, err := c.newAPI(token)
	if err != nil {
		return nil, c.newError(req, 0, nil, fmt.Errorf("%w: %v", ErrInvalid, err))
	}
	resp, err := c.send(ctx, a, req)
	if err != nil {
		return nil, err
	}
	d := resp.data()
	remaining, total := rules.Number(d["ttl"]), rules.Number(d["creation_ttl"])
	if period := rules.Number(d["period"]); period > 0 {
		total = period
	}
	s := &session{api: a, token: token, increment: total}
	s.renewable, _ = d["renewable"].(bool)
	s.setLease(c.now(), remaining, total)
	if !s.renewable {
		s.refreshAt = time.Time{}
	}
	return s, nil
}

// recoverAuth handles a 403 to the request sent with session failed. When
// another request has replaced the token meanwhile, it asks for a retry.
// Otherwise a lookup-self tells a refused token (expired, revoked: log in
// again, then retry) from a refused path (a policy problem: no login, no
// retry, the caller gets the 403).
func (c *client) recoverAuth(ctx context.Context, failed *session) (retry bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, nil
	}
	if c.sess.token != failed.token {
		return true, nil
	}
	if !c.canLogin() {
		return false, nil
	}
	_, lerr := c.send(ctx, failed.api, request{op: OpLogin, method: http.MethodGet, path: "auth/token/lookup-self"})
	if lerr == nil || !isAuthFailure(lerr) {
		return false, nil
	}
	if err := c.loginLocked(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// secretSet holds the secrets this client knows, to keep them out of error
// strings: the configured ones and the most recent tokens and JWTs.
type secretSet struct {
	mu     sync.Mutex
	fixed  []string
	recent []string
}

const recentSecrets = 8

func (s *secretSet) add(secret string) {
	if len(secret) < 6 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fixed = append(s.fixed, secret)
}

func (s *secretSet) remember(secret string) {
	if len(secret) < 6 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recent) == recentSecrets {
		s.recent = append(s.recent[:0], s.recent[1:]...)
	}
	s.recent = append(s.recent, secret)
}

func (s *secretSet) redact(text string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, list := range [][]string{s.fixed, s.recent} {
		for _, secret := range list {
			text = strings.ReplaceAll(text, secret, "[redacted]")
		}
	}
	return text
}
