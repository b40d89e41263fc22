package vault

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mockReq is one request the mock Vault received.
type mockReq struct {
	Method, Path, Token, Namespace string
	Body                           map[string]any
}

// mockVault is an httptest Vault: handle answers every request (status and
// a JSON body, nil for none). Logins on any auth/*/login path succeed with
// token "s.token-N" (N counts logins) unless handle answers them.
type mockVault struct {
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []mockReq
	logins   int
	valid    map[string]bool // tokens that lookup-self accepts
	lease    int             // lease_duration of login tokens
	handle   func(r mockReq) (int, any)
	loginErr func(r mockReq) (int, any) // answers logins when set and non-zero
}

func newMockVault(t *testing.T, handle func(r mockReq) (int, any)) *mockVault {
	t.Helper()
	m := &mockVault{valid: map[string]bool{}, lease: 3600, handle: handle}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *mockVault) serve(w http.ResponseWriter, r *http.Request) {
	req := mockReq{
		Method:    r.Method,
		Path:      strings.TrimPrefix(r.URL.Path, "/v1/"),
		Token:     r.Header.Get("X-Vault-Token"),
		Namespace: r.Header.Get("X-Vault-Namespace"),
	}
	if r.Body != nil {
		_ = json.NewDecoder(r.Body).Decode(&req.Body)
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	handle, loginErr := m.handle, m.loginErr
	m.mu.Unlock()

	code, body := 0, any(nil)
	switch {
	case strings.HasSuffix(req.Path, "/login") && loginErr != nil:
		code, body = loginErr(req)
	}
	if code == 0 && handle != nil {
		code, body = handle(req)
	}
	if code == 0 {
		code, body = m.defaults(req)
	}
	if body == nil {
		w.WriteHeader(code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// defaults: logins, lookup-self and renew-self of valid tokens; 404 else.
func (m *mockVault) defaults(req mockReq) (int, any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case strings.HasSuffix(req.Path, "/login"):
		m.logins++
		tok := "s.token-" + strconv.Itoa(m.logins)
		m.valid[tok] = true
		return 200, map[string]any{"auth": map[string]any{"client_token": tok, "lease_duration": m.lease, "renewable": true}}
	case req.Path == "auth/token/lookup-self":
		if !m.valid[req.Token] {
			return 403, map[string]any{"errors": []string{"permission denied"}}
		}
		return 200, map[string]any{"data": map[string]any{"ttl": m.lease, "creation_ttl": m.lease, "renewable": true}}
	case req.Path == "auth/token/renew-self":
		if !m.valid[req.Token] {
			return 403, map[string]any{"errors": []string{"permission denied"}}
		}
		inc, _ := req.Body["increment"].(float64)
		return 200, map[string]any{"auth": map[string]any{"client_token": req.Token, "lease_duration": int(inc), "renewable": true}}
	}
	return 404, map[string]any{"errors": []string{}}
}

func (m *mockVault) requests() []mockReq {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mockReq(nil), m.reqs...)
}

// count counts requests with this method and path ("" matches any).
func (m *mockVault) count(method, path string) int {
	n := 0
	for _, r := range m.requests() {
		if (method == "" || r.Method == method) && (path == "" || r.Path == path) {
			n++
		}
	}
	return n
}

// set changes the mock's behaviour under its lock.
func (m *mockVault) set(f func(m *mockVault)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

func (m *mockVault) revoke(token string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.valid, token)
}

func (m *mockVault) approleConfig() Config {
	return Config{
		Address: m.srv.URL,
		Auth:    Auth{AppRole: &AppRoleAuth{RoleID: "role-id-1", SecretID: "secret-id-very-secret"}},
	}
}

// recorder is an Observer for tests.
type recorder struct {
	mu       sync.Mutex
	requests []observed
	logins   []string
}

type observed struct {
	Op, Path string
	Code     int
}

func (r *recorder) Request(op, path string, code int, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, observed{op, path, code})
}

func (r *recorder) Login(method string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := method
	if err != nil {
		s += ": " + err.Error()
	}
	r.logins = append(r.logins, s)
}

func (r *recorder) loginList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.logins...)
}

func (r *recorder) count(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, o := range r.requests {
		if o.Op == op {
			n++
		}
	}
	return n
}

func (r *recorder) all() []observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observed(nil), r.requests...)
}

func mustNew(t *testing.T, cfg Config, obs Observer) *client {
	t.Helper()
	c, err := New(context.Background(), cfg, obs)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.(*client).Close() })
	return c.(*client)
}

// noBackoff makes read retries immediate for the test.
func noBackoff(t *testing.T) {
	old := readBackoff
	readBackoff = func(int) time.Duration { return time.Millisecond }
	t.Cleanup(func() { readBackoff = old })
}
