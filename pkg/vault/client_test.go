package vault

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestNewRejectsBadConfig(t *testing.T) {
	tok := Auth{Token: "s.static-token"}
	cases := map[string]Config{
		"no address":       {Auth: tok},
		"not a URL":        {Address: "vault:8200", Auth: tok},
		"ftp":              {Address: "ftp://vault:8200", Auth: tok},
		"no login":         {Address: "http://127.0.0.1:1"},
		"two logins":       {Address: "http://127.0.0.1:1", Auth: Auth{Token: "s.x-long-enough", AppRole: &AppRoleAuth{RoleID: "r"}}},
		"approle no id":    {Address: "http://127.0.0.1:1", Auth: Auth{AppRole: &AppRoleAuth{}}},
		"kubernetes no fn": {Address: "http://127.0.0.1:1", Auth: Auth{Kubernetes: &KubernetesAuth{Role: "op"}}},
		"bad CA":           {Address: "https://127.0.0.1:1", CACert: []byte("not a PEM"), Auth: tok},
		"negative QPS":     {Address: "http://127.0.0.1:1", QPS: -1, Auth: tok},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(context.Background(), cfg, nil)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			var ve *Error
			if !errors.As(err, &ve) {
				t.Fatalf("err %T is not a *Error", err)
			}
			if Transient(err) {
				t.Errorf("a config error is not transient: %v", err)
			}
		})
	}
}

func TestAppRoleLoginHeadersAndObserver(t *testing.T) {
	m := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "sys/seal-status" {
			return 200, map[string]any{"version": "1.21.4", "sealed": false}
		}
		return 0, nil
	})
	cfg := m.approleConfig()
	cfg.Namespace = "admin/salt"
	cfg.Auth.AppRole.Mount = "/operator/"
	obs := &recorder{}
	c := mustNew(t, cfg, obs)

	v, err := c.ServerInfo(context.Background())
	if err != nil || v.Version != "1.21.4" {
		t.Fatalf("ServerInfo = %+v, %v", v, err)
	}
	reqs := m.requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %+v, want a login and a read", reqs)
	}
	login := reqs[0]
	if login.Method != http.MethodPut && login.Method != http.MethodPost {
		t.Errorf("login method %s", login.Method)
	}
	if login.Path != "auth/operator/login" || login.Token != "" {
		t.Errorf("login = %+v", login)
	}
	if want := map[string]any{"role_id": "role-id-1", "secret_id": "secret-id-very-secret"}; !reflect.DeepEqual(login.Body, want) {
		t.Errorf("login body = %v, want %v", login.Body, want)
	}
	for _, r := range reqs {
		if r.Namespace != "admin/salt" {
			t.Errorf("%s: namespace header %q", r.Path, r.Namespace)
		}
	}
	if reqs[1].Token != "s.token-1" {
		t.Errorf("read sent token %q", reqs[1].Token)
	}
	want := []observed{{OpLogin, "auth/operator/login", 200}, {OpRead, "sys/seal-status", 200}}
	if got := obs.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("observed %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(obs.loginList(), []string{"approle"}) {
		t.Errorf("logins %v", obs.loginList())
	}
}

func TestKubernetesLogin(t *testing.T) {
	m := newMockVault(t, nil)
	var jwts atomic.Int32
	cfg := Config{Address: m.srv.URL, Auth: Auth{Kubernetes: &KubernetesAuth{
		Role: "minionvault",
		JWT: func(context.Context) (string, error) {
			jwts.Add(1)
			return "eyJhbGciOi.jwt-body.sig", nil
		},
	}}}
	c := mustNew(t, cfg, nil)
	if _, err := c.ReadRole(context.Background(), "salt-minions", "web01"); err != nil {
		t.Fatal(err)
	}
	r := m.requests()[0]
	if r.Path != "auth/kubernetes/login" {
		t.Errorf("login path %s", r.Path)
	}
	if want := map[string]any{"role": "minionvault", "jwt": "eyJhbGciOi.jwt-body.sig"}; !reflect.DeepEqual(r.Body, want) {
		t.Errorf("login body %v", r.Body)
	}
	if jwts.Load() != 1 {
		t.Errorf("JWT fetched %d times", jwts.Load())
	}

	// A failing JWT source fails New, without a request.
	cfg.Auth.Kubernetes.JWT = func(context.Context) (string, error) { return "", errors.New("TokenRequest forbidden") }
	before := len(m.requests())
	_, err := New(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "TokenRequest forbidden") || !strings.Contains(err.Error(), "login auth/kubernetes/login") {
		t.Fatalf("err = %v", err)
	}
	if len(m.requests()) != before {
		t.Error("a request was sent without a JWT")
	}
}

func TestErrorClassification(t *testing.T) {
	noBackoff(t)
	type answer struct {
		code int
		body any
	}
	answers := map[string]answer{
		"bad":       {400, map[string]any{"errors": []string{"invalid CIDR blocks"}}},
		"denied":    {403, map[string]any{"errors": []string{"permission denied"}}},
		"nohandler": {404, map[string]any{"errors": []string{`no handler for route "auth/nope/role/x". route entry not found.`}}},
		"absent":    {404, map[string]any{"errors": []string{}}},
		"stale":     {412, map[string]any{"errors": []string{"required index state not present"}}},
		"quota":     {429, map[string]any{"errors": []string{"request path \"x\": rate limit quota exceeded"}}},
		"broken":    {500, map[string]any{"errors": []string{"1 error occurred:\n\t* internal error\n\n"}}},
		"sealed":    {503, map[string]any{"errors": []string{"Vault is sealed"}}},
		"garbage":   {502, "<html>bad gateway</html>"},
	}
	m := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "auth/token/lookup-self" {
			return 200, map[string]any{"data": map[string]any{}} // the token is fine: a policy problem
		}
		if a, ok := answers[strings.TrimPrefix(r.Path, "sys/policies/acl/")]; ok && strings.HasPrefix(r.Path, "sys/policies/acl/") {
			return a.code, a.body
		}
		return 0, nil
	})
	c := mustNew(t, m.approleConfig(), nil)
	ctx := context.Background()
	cases := []struct {
		name      string
		code      int
		transient bool
		msg       string
	}{
		{"bad", 400, false, "invalid CIDR blocks"},
		{"denied", 403, false, "permission denied"},
		{"nohandler", 404, false, "no handler for route"},
		{"stale", 412, true, "required index state"},
		{"quota", 429, true, "rate limit quota exceeded"},
		{"broken", 500, true, "internal error"},
		{"sealed", 503, true, "Vault is sealed"},
		{"garbage", 502, true, "bad gateway"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []string{"read", "write", "delete"} {
				var err error
				switch op {
				case "read":
					_, _, err = c.ReadPolicy(ctx, tc.name)
				case "write":
					err = c.WritePolicy(ctx, tc.name, `path "x" { capabilities = ["read"] }`)
				case "delete":
					err = c.DeletePolicy(ctx, tc.name)
				}
				var ve *Error
				if !errors.As(err, &ve) {
					t.Fatalf("%s: err = %v (%T), want *Error", op, err, err)
				}
				if ve.StatusCode != tc.code || Transient(err) != tc.transient {
					t.Errorf("%s: code %d transient %v, want %d %v", op, ve.StatusCode, Transient(err), tc.code, tc.transient)
				}
				if !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(ve.Op, op+" sys/policies/acl/"+tc.name) {
					t.Errorf("%s: error %q (op %q)", op, err, ve.Op)
				}
			}
		})
	}
	// 404 without messages on a read: absent, no error.
	hcl, found, err := c.ReadPolicy(ctx, "absent")
	if err != nil || found || hcl != "" {
		t.Errorf("absent policy: %q %v %v", hcl, found, err)
	}
	if err := c.DeletePolicy(ctx, "absent"); err != nil {
		t.Errorf("deleting an absent policy: %v", err)
	}

	// Transport error: status 0, transient, the cause kept.
	m.srv.Close()
	_, _, err = c.ReadPolicy(ctx, "x")
	var ve *Error
	if !errors.As(err, &ve) || ve.StatusCode != 0 || !Transient(err) || ve.Err == nil {
		t.Errorf("transport error = %#v", err)
	}
}

func TestReadsRetryWritesDoNot(t *testing.T) {
	noBackoff(t)
	var fails atomic.Int32
	m := newMockVault(t, func(r mockReq) (int, any) {
		if strings.HasPrefix(r.Path, "sys/policies/acl/") && fails.Add(-1) >= 0 {
			return 500, map[string]any{"errors": []string{"try again"}}
		}
		if strings.HasPrefix(r.Path, "sys/policies/acl/") {
			if r.Method == http.MethodGet {
				return 200, map[string]any{"data": map[string]any{"name": "p", "policy": "hcl"}}
			}
			return 204, nil
		}
		return 0, nil
	})
	c := mustNew(t, m.approleConfig(), nil)
	ctx := context.Background()

	fails.Store(2)
	if hcl, ok, err := c.ReadPolicy(ctx, "p"); err != nil || !ok || hcl != "hcl" {
		t.Fatalf("read after two 500s: %q %v %v", hcl, ok, err)
	}
	if n := m.count(http.MethodGet, "sys/policies/acl/p"); n != 3 {
		t.Errorf("read sent %d times, want 3", n)
	}

	fails.Store(5)
	if _, _, err := c.ReadPolicy(ctx, "q"); err == nil {
		t.Fatal("read with five 500s succeeded")
	}
	if n := m.count(http.MethodGet, "sys/policies/acl/q"); n != 1+maxReadRetries {
		t.Errorf("read sent %d times, want %d", n, 1+maxReadRetries)
	}

	fails.Store(1)
	if err := c.WritePolicy(ctx, "w", "hcl"); err == nil {
		t.Fatal("write with a 500 succeeded")
	}
	if n := m.count("", "sys/policies/acl/w"); n != 1 {
		t.Errorf("write sent %d times, want 1 (no retry)", n)
	}

	// A caller that retries on its own schedule (the connection check)
	// sends each read once.
	fails.Store(5)
	if _, _, err := c.ReadPolicy(WithoutRetries(ctx), "r"); err == nil {
		t.Fatal("read with five 500s succeeded")
	}
	if n := m.count(http.MethodGet, "sys/policies/acl/r"); n != 1 {
		t.Errorf("read without retries sent %d times, want 1", n)
	}
}

func TestObserverCountsEveryRequest(t *testing.T) {
	m := newMockVault(t, func(r mockReq) (int, any) {
		switch {
		case strings.HasSuffix(r.Path, "/login"):
			return 0, nil
		case r.Path == "identity/lookup/entity":
			return 204, nil
		case r.Method == http.MethodGet:
			return 404, map[string]any{"errors": []string{}}
		default:
			return 204, nil
		}
	})
	obs := &recorder{}
	c := mustNew(t, m.approleConfig(), obs)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.WriteRole(ctx, "salt-minions", "web01", map[string]any{"token_ttl": 60}))
	must(c.WritePolicy(ctx, "salt_role_web", "hcl"))
	must(c.UpdateEntityAlias(ctx, "alias-id", "n", "acc", "ent"))
	must(c.DeleteRole(ctx, "salt-minions", "web01"))
	_, err := c.ReadRole(ctx, "salt-minions", "web01")
	must(err)
	id, err := c.CreateEntityAlias(ctx, "role-id", "auth_approle_1", "ent")
	must(err)
	if id != "" {
		t.Errorf("alias ID %q, want none for 204", id)
	}
	if obs.count(OpWrite) != 4 || obs.count(OpDelete) != 1 || obs.count(OpRead) != 1 || obs.count(OpLogin) != 1 {
		t.Errorf("observed %+v", obs.all())
	}
	for _, o := range obs.all() {
		if strings.HasPrefix(o.Path, "/") || strings.HasPrefix(o.Path, "v1/") {
			t.Errorf("path %q", o.Path)
		}
	}
	if got := obs.all()[len(obs.all())-1]; got != (observed{OpWrite, "identity/entity-alias", 204}) {
		t.Errorf("alias observed as %+v", got)
	}
}

func TestRateLimit(t *testing.T) {
	m := newMockVault(t, nil)
	cfg := m.approleConfig()
	cfg.QPS, cfg.Burst = 20, 1
	c := mustNew(t, cfg, nil) // the login takes the burst
	start := time.Now()
	for i := 0; i < 6; i++ {
		if _, err := c.ReadRole(context.Background(), "salt-minions", "web01"); err != nil {
			t.Fatal(err)
		}
	}
	// 6 requests at 20/s after the login: at least ~300 ms.
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("6 requests at 20 QPS took %v", d)
	}

	// A cancelled context stops the wait.
	cfg.QPS, cfg.Burst = 0.001, 1
	c2 := mustNew(t, cfg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c2.ReadRole(ctx, "salt-minions", "web01")
	if err == nil || !Transient(err) {
		t.Errorf("err = %v", err)
	}
}

func TestReloginOnRevokedToken(t *testing.T) {
	var token2Revoked atomic.Bool
	m := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "auth/salt-minions/role/web01" {
			if r.Token != "s.token-2" || token2Revoked.Load() {
				return 403, map[string]any{"errors": []string{"permission denied"}}
			}
			return 200, map[string]any{"data": map[string]any{"token_ttl": 60}}
		}
		return 0, nil
	})
	obs := &recorder{}
	c := mustNew(t, m.approleConfig(), obs)
	m.revoke("s.token-1")
	role, err := c.ReadRole(context.Background(), "salt-minions", "web01")
	if err != nil || role == nil {
		t.Fatalf("ReadRole = %v, %v", role, err)
	}
	if m.count("", "auth/approle/login") != 2 || m.count(http.MethodGet, "auth/token/lookup-self") != 1 {
		t.Errorf("requests %+v", m.requests())
	}
	if len(obs.loginList()) != 2 {
		t.Errorf("logins %v", obs.loginList())
	}

	// Still refused after the new login: one retry only.
	m.revoke("s.token-2")
	token2Revoked.Store(true)
	_, err = c.ReadRole(context.Background(), "salt-minions", "web01")
	var ve *Error
	if !errors.As(err, &ve) || ve.StatusCode != 403 {
		t.Fatalf("err = %v", err)
	}
	if n := m.count("", "auth/approle/login"); n != 3 {
		t.Errorf("%d logins, want 3", n)
	}
	if n := m.count(http.MethodGet, "auth/salt-minions/role/web01"); n != 4 {
		t.Errorf("role read %d times, want 4", n)
	}
}

func TestPolicyDenialDoesNotLogin(t *testing.T) {
	m := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "sys/policies/acl/secret" {
			return 403, map[string]any{"errors": []string{"1 error occurred:\n\t* permission denied\n\n"}}
		}
		return 0, nil
	})
	c := mustNew(t, m.approleConfig(), nil)
	for i := 0; i < 3; i++ {
		_, _, err := c.ReadPolicy(context.Background(), "secret")
		if err == nil || Transient(err) {
			t.Fatalf("err = %v", err)
		}
	}
	if n := m.count("", "auth/approle/login"); n != 1 {
		t.Errorf("%d logins for a denied path, want 1", n)
	}
	if n := m.count("", "auth/token/lookup-self"); n != 3 {
		t.Errorf("%d lookup-self, want one per denial", n)
	}
}

func TestStaticToken403DoesNotRetry(t *testing.T) {
	m := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "sys/auth" {
			return 403, map[string]any{"errors": []string{"permission denied"}}
		}
		if r.Path == "auth/token/lookup-self" && r.Token == "s.static-token-value" {
			return 200, map[string]any{"data": map[string]any{"ttl": 0, "creation_ttl": 0, "renewable": false}}
		}
		return 0, nil
	})
	c := mustNew(t, Config{Address: m.srv.URL, Auth: Auth{Token: "s.static-token-value"}}, nil)
	_, err := c.MountAccessor(context.Background(), "salt-minions")
	if err == nil {
		t.Fatal("no error")
	}
	if n := m.count("", "sys/auth"); n != 1 {
		t.Errorf("sys/auth sent %d times", n)
	}
}

func TestNoSecretsInErrorsOrObserver(t *testing.T) {
	const secretID = "secret-id-0123456789"
	const jwt = "eyJhbGciOiJSUzI1NiJ9.payload-0123456789.signature"
	const static = "hvs.static-token-0123456789"
	echo := func(r mockReq) (int, any) {
		// A pathological server that echoes whatever it got.
		b, _ := json.Marshal(r.Body)
		return 400, map[string]any{"errors": []string{"bad request " + string(b) + " token " + r.Token}}
	}
	m := newMockVault(t, nil)
	m.set(func(m *mockVault) { m.loginErr = echo })
	obs := &recorder{}
	cfgs := []Config{
		{Address: m.srv.URL, Auth: Auth{AppRole: &AppRoleAuth{RoleID: "role", SecretID: secretID}}},
		{Address: m.srv.URL, Auth: Auth{Kubernetes: &KubernetesAuth{Role: "r", JWT: func(context.Context) (string, error) { return jwt, nil }}}},
	}
	var errs []error
	for _, cfg := range cfgs {
		_, err := New(context.Background(), cfg, obs)
		if err == nil {
			t.Fatal("login succeeded")
		}
		errs = append(errs, err)
	}
	// A static token: every request is echoed.
	m.set(func(m *mockVault) {
		m.loginErr = nil
		m.handle = func(r mockReq) (int, any) {
			if r.Path == "auth/token/lookup-self" {
				return 200, map[string]any{"data": map[string]any{"ttl": 0, "renewable": false}}
			}
			return echo(r)
		}
	})
	c := mustNew(t, Config{Address: m.srv.URL, Auth: Auth{Token: static}}, obs)
	_, err := c.ReadRole(context.Background(), "salt-minions", "web01")
	errs = append(errs, err)
	err = c.WritePolicy(context.Background(), "p", static)
	errs = append(errs, err)
	// And a login whose token the server echoes later.
	m.set(func(m *mockVault) {
		m.handle = func(r mockReq) (int, any) {
			if strings.HasSuffix(r.Path, "/login") {
				return 0, nil
			}
			return echo(r)
		}
	})
	c2 := mustNew(t, m.approleConfig(), obs)
	_, err = c2.ReadRole(context.Background(), "salt-minions", "web01")
	errs = append(errs, err)

	var texts []string
	for _, err := range errs {
		if err == nil {
			t.Fatal("missing error")
		}
		texts = append(texts, err.Error())
	}
	texts = append(texts, obs.loginList()...)
	for _, o := range obs.all() {
		texts = append(texts, o.Op+" "+o.Path)
	}
	for _, text := range texts {
		for _, secret := range []string{secretID, jwt, static, "s.token-1", "s.token-2"} {
			if strings.Contains(text, secret) {
				t.Errorf("%q leaks %q", text, secret)
			}
		}
	}
	if !strings.Contains(strings.Join(texts, "\n"), "[redacted]") {
		t.Errorf("the echoed secrets were not redacted but dropped? %q", texts)
	}
}

// leasedClient is an AppRole client of a mock Vault that gives 30 s
// leases, on a clock that moves only by advance.
func leasedClient(t *testing.T) (*mockVault, *client, func(time.Duration)) {
	t.Helper()
	m := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "sys/seal-status" {
			return 200, map[string]any{"version": "1.21.4"}
		}
		return 0, nil
	})
	m.set(func(m *mockVault) { m.lease = 30 })
	c := mustNew(t, m.approleConfig(), nil)
	now := time.Now()
	c.mu.Lock()
	c.now = func() time.Time { return now }
	c.mu.Unlock()
	return m, c, func(d time.Duration) {
		c.mu.Lock()
		now = now.Add(d)
		c.mu.Unlock()
	}
}

func TestRenewal(t *testing.T) {
	m, c, advance := leasedClient(t)
	ctx := context.Background()
	version := func() {
		t.Helper()
		if _, err := c.ServerInfo(ctx); err != nil {
			t.Fatal(err)
		}
	}

	version()
	advance(15 * time.Second) // half the lease: nothing
	version()
	if n := m.count("", "auth/token/renew-self"); n != 0 {
		t.Fatalf("renewed at half the lease")
	}
	advance(6 * time.Second) // 21 s > 2/3 of 30 s
	version()
	renews := 0
	for _, r := range m.requests() {
		if r.Path == "auth/token/renew-self" {
			renews++
			if r.Token != "s.token-1" || r.Body["increment"] != float64(30) {
				t.Errorf("renewal %+v", r)
			}
		}
	}
	if renews != 1 {
		t.Fatalf("%d renewals, want 1", renews)
	}
	version()
	if n := m.count("", "auth/token/renew-self"); n != 1 {
		t.Errorf("renewed again right away: %d", n)
	}

	// The max TTL caps the next renewal: 10 s instead of 30. Then it logs
	// in again at 2/3 of those 10 s instead of renewing.
	m.set(func(m *mockVault) {
		m.handle = func(r mockReq) (int, any) {
			if r.Path == "auth/token/renew-self" {
				return 200, map[string]any{"auth": map[string]any{"client_token": r.Token, "lease_duration": 10, "renewable": true}}
			}
			if r.Path == "sys/seal-status" {
				return 200, map[string]any{"version": "1.21.4"}
			}
			return 0, nil
		}
	})
	advance(21 * time.Second)
	version()
	if n := m.count("", "auth/token/renew-self"); n != 2 {
		t.Fatalf("%d renewals, want 2", n)
	}
	advance(7 * time.Second)
	version()
	if n, r := m.count("", "auth/approle/login"), m.count("", "auth/token/renew-self"); n != 2 || r != 2 {
		t.Errorf("logins %d renewals %d, want a new login instead of a third renewal", n, r)
	}

	// Expired (no request for longer than the lease): log in before sending.
	advance(time.Hour)
	version()
	if n := m.count("", "auth/approle/login"); n != 3 {
		t.Errorf("logins %d, want 3", n)
	}
	last := m.requests()[len(m.requests())-1]
	if last.Token != "s.token-3" {
		t.Errorf("request after expiry sent with %q", last.Token)
	}
}

func TestStaticTokenRenewalAndExpiry(t *testing.T) {
	var ttl atomic.Int32
	ttl.Store(30)
	m := newMockVault(t, func(r mockReq) (int, any) {
		switch r.Path {
		case "auth/token/lookup-self":
			return 200, map[string]any{"data": map[string]any{"ttl": ttl.Load(), "creation_ttl": 60, "renewable": true}}
		case "auth/token/renew-self":
			return 200, map[string]any{"auth": map[string]any{"client_token": r.Token, "lease_duration": 60, "renewable": true}}
		case "sys/seal-status":
			return 200, map[string]any{"version": "1.21.4"}
		}
		return 0, nil
	})
	// 30 s left of 60: more than 2/3 has passed after 10 s more.
	c := mustNew(t, Config{Address: m.srv.URL, Auth: Auth{Token: "s.static-token-value"}}, nil)
	now := time.Now()
	c.mu.Lock()
	c.now = func() time.Time { return now }
	c.mu.Unlock()
	if _, err := c.ServerInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m.count("", "auth/token/renew-self") != 0 {
		t.Fatal("renewed too early")
	}
	c.mu.Lock()
	now = now.Add(11 * time.Second)
	c.mu.Unlock()
	if _, err := c.ServerInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m.count("", "auth/token/renew-self") != 1 {
		t.Fatal("not renewed")
	}

	// A static token that cannot be renewed runs out: requests then fail
	// without being sent.
	m.set(func(m *mockVault) {
		m.handle = func(r mockReq) (int, any) {
			if r.Path == "auth/token/lookup-self" {
				return 200, map[string]any{"data": map[string]any{"ttl": 5, "creation_ttl": 60, "renewable": false}}
			}
			return 0, nil
		}
	})
	c2 := mustNew(t, Config{Address: m.srv.URL, Auth: Auth{Token: "s.static-token-value"}}, nil)
	c2.mu.Lock()
	c2.now = func() time.Time { return time.Now().Add(10 * time.Second) }
	c2.mu.Unlock()
	before := len(m.requests())
	_, err := c2.ReadRole(context.Background(), "salt-minions", "web01")
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("err = %v", err)
	}
	if len(m.requests()) != before {
		t.Error("a request was sent with an expired token")
	}
}

func TestConcurrentRequestsLogInOnce(t *testing.T) {
	m := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "sys/seal-status" {
			if r.Token != "s.token-2" {
				return 403, map[string]any{"errors": []string{"permission denied"}}
			}
			return 200, map[string]any{"version": "1.21.4"}
		}
		return 0, nil
	})
	c := mustNew(t, m.approleConfig(), nil)
	m.revoke("s.token-1")
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.ServerInfo(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := m.count("", "auth/approle/login"); n != 2 {
		t.Errorf("%d logins, want 2 (New and one re-login)", n)
	}
}

func TestEntityAndAliasResponses(t *testing.T) {
	entity := map[string]any{
		"id": "e-1", "name": "salt_minion_web01",
		"metadata": map[string]any{"minion-id": "web01", "roles": "db,web"},
		"aliases": []any{
			map[string]any{"id": "a-other", "name": "X", "mount_accessor": "auth_approle_1", "canonical_id": "e-1"},
			map[string]any{"id": "a-1", "name": "role-id-web01", "mount_accessor": "auth_approle_1", "canonical_id": "e-1"},
		},
	}
	var created atomic.Bool
	m := newMockVault(t, func(r mockReq) (int, any) {
		switch {
		case r.Path == "identity/entity/name/salt_minion_web01" && r.Method == http.MethodGet:
			return 200, map[string]any{"data": entity}
		case r.Path == "identity/entity/name/salt_minion_web01":
			if created.CompareAndSwap(false, true) {
				return 200, map[string]any{"data": map[string]any{"id": "e-1", "name": "salt_minion_web01", "aliases": nil}}
			}
			return 204, nil
		case r.Path == "identity/lookup/entity":
			return 200, map[string]any{"data": entity}
		case r.Path == "identity/entity-alias":
			if r.Body["name"] == "role-id-web01" {
				return 204, nil // unchanged
			}
			return 200, map[string]any{"data": map[string]any{"id": "a-new", "canonical_id": "e-1"}}
		case r.Path == "sys/auth":
			return 200, map[string]any{"data": map[string]any{
				"salt-minions/": map[string]any{"type": "approle", "accessor": "auth_approle_1"},
				"token/":        map[string]any{"type": "token", "accessor": "auth_token_1"},
			}}
		case r.Path == "auth/salt-minions/role/web01/role-id":
			return 200, map[string]any{"data": map[string]any{"role_id": "role-id-web01"}}
		}
		return 0, nil
	})
	c := mustNew(t, m.approleConfig(), nil)
	ctx := context.Background()

	md := map[string]string{"minion-id": "web01"}
	id, err := c.WriteEntityByName(ctx, "salt_minion_web01", md)
	if err != nil || id != "e-1" {
		t.Fatalf("create: %q %v", id, err)
	}
	id, err = c.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{"minion-id": "web01"})
	if err != nil || id != "" {
		t.Fatalf("update (204): %q %v", id, err)
	}
	var body map[string]any
	for _, r := range m.requests() {
		if r.Path == "identity/entity/name/salt_minion_web01" && r.Method != http.MethodGet {
			body = r.Body
		}
	}
	if !reflect.DeepEqual(body, map[string]any{"metadata": map[string]any{"minion-id": "web01"}}) {
		t.Errorf("entity write body %v", body)
	}
	if _, err := c.WriteEntityByName(ctx, "salt_minion_web01", nil); err != nil {
		t.Fatal(err)
	}
	last := m.requests()[len(m.requests())-1]
	if !reflect.DeepEqual(last.Body, map[string]any{"metadata": map[string]any{}}) {
		t.Errorf("nil metadata sent as %v, want {} (clears it)", last.Body)
	}
	e, err := c.ReadEntityByName(ctx, "salt_minion_web01")
	if err != nil || e.ID != "e-1" || len(e.Aliases) != 2 || e.Aliases[1] != (Alias{ID: "a-1", Name: "role-id-web01", MountAccessor: "auth_approle_1", CanonicalID: "e-1"}) {
		t.Fatalf("read: %+v %v", e, err)
	}

	id, err = c.CreateEntityAlias(ctx, "other", "auth_approle_1", "e-1")
	if err != nil || id != "a-new" {
		t.Fatalf("create alias: %q %v", id, err)
	}
	id, err = c.CreateEntityAlias(ctx, "role-id-web01", "auth_approle_1", "e-1")
	if err != nil || id != "" {
		t.Fatalf("create existing alias (204): %q %v", id, err)
	}

	acc, err := c.MountAccessor(ctx, "salt-minions/")
	if err != nil || acc != "auth_approle_1" {
		t.Errorf("accessor %q %v", acc, err)
	}
	acc, err = c.MountAccessor(ctx, "nope")
	if err != nil || acc != "" {
		t.Errorf("absent mount: %q %v", acc, err)
	}
	rid, err := c.ReadRoleID(ctx, "salt-minions", "web01")
	if err != nil || rid != "role-id-web01" {
		t.Errorf("role id %q %v", rid, err)
	}
	rid, err = c.ReadRoleID(ctx, "salt-minions", "absent")
	if err != nil || rid != "" {
		t.Errorf("absent role id %q %v", rid, err)
	}
}

func TestNamesThatWouldChangeThePath(t *testing.T) {
	m := newMockVault(t, nil)
	c := mustNew(t, m.approleConfig(), nil)
	ctx := context.Background()
	before := len(m.requests())
	checks := []error{
		func() error { _, err := c.ReadRole(ctx, "salt-minions", "../../sys/policies/acl/x"); return err }(),
		c.WriteRole(ctx, "salt-minions", "a/b", nil),
		c.DeleteRole(ctx, "salt-minions/../token", "x"),
		c.WriteRole(ctx, "salt-minions", "", nil),
		func() error { _, err := c.ReadRoleID(ctx, "salt-minions", ".."); return err }(),
		func() error { _, err := c.WriteEntityByName(ctx, "x/../../y", nil); return err }(),
		c.DeleteEntityByName(ctx, "web?01"),
		c.WritePolicy(ctx, "a//b", "hcl"),
		c.WritePolicy(ctx, "salt/../../x", "hcl"),
		c.DeletePolicy(ctx, "/x"),
		c.UpdateEntityAlias(ctx, "../x", "n", "a", "c"),
		c.DeleteEntityAlias(ctx, ""),
		func() error { _, err := c.CreateEntityAlias(ctx, "", "a", "c"); return err }(),
		func() error { _, err := c.MountAccessor(ctx, "a/../b"); return err }(),
	}
	for i, err := range checks {
		if !errors.Is(err, ErrInvalid) || Transient(err) {
			t.Errorf("%d: err = %v, want ErrInvalid", i, err)
		}
	}
	if len(m.requests()) != before {
		t.Errorf("requests were sent: %+v", m.requests()[before:])
	}
	// Slashes are fine in policy names.
	if err := c.WritePolicy(ctx, "saltstack/minions", "hcl"); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("saltstack/minions: %v", err) // the mock answers 404 with no route
	}
	if last := m.requests()[len(m.requests())-1]; last.Path != "sys/policies/acl/saltstack/minions" {
		t.Errorf("path %q", last.Path)
	}
}

func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/auth/token/lookup-self":
			_, _ = w.Write([]byte(`{"data":{"ttl":0,"renewable":false}}`))
		case "/v1/sys/seal-status":
			_, _ = w.Write([]byte(`{"version":"1.21.4"}`))
		default:
			w.WriteHeader(404)
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes are the point
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	ctx := context.Background()
	tok := Auth{Token: "s.static-token-value"}

	c, err := New(ctx, Config{Address: srv.URL, CACert: caPEM, Auth: tok}, nil)
	if err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	if v, err := c.ServerInfo(ctx); err != nil || v.Version != "1.21.4" {
		t.Errorf("ServerInfo %+v %v", v, err)
	}
	// httptest's certificate is for example.com (and 127.0.0.1).
	if _, err := New(ctx, Config{Address: srv.URL, CACert: caPEM, ServerName: "example.com", Auth: tok}, nil); err != nil {
		t.Errorf("ServerName example.com: %v", err)
	}
	_, err = New(ctx, Config{Address: srv.URL, CACert: caPEM, ServerName: "vault.other.test", Auth: tok}, nil)
	if err == nil || !Transient(err) {
		t.Errorf("wrong ServerName: %v", err)
	}
	_, err = New(ctx, Config{Address: srv.URL, Auth: tok}, nil)
	var uerr x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &uerr) {
		t.Errorf("system roots: %v", err)
	}
	if _, err := New(ctx, Config{Address: srv.URL, InsecureSkipVerify: true, Auth: tok}, nil); err != nil {
		t.Errorf("InsecureSkipVerify: %v", err)
	}
}

func TestClosedClient(t *testing.T) {
	m := newMockVault(t, nil)
	c := mustNew(t, m.approleConfig(), nil)
	_ = c.Close()
	_, err := c.ReadRole(context.Background(), "salt-minions", "web01")
	if !errors.Is(err, ErrClosed) || !Transient(err) {
		t.Errorf("err = %v", err)
	}
}

func TestTimeoutBoundsEachRequest(t *testing.T) {
	noBackoff(t)
	release := make(chan struct{})
	m := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "sys/seal-status" {
			<-release
		}
		return 0, nil
	})
	defer close(release)
	cfg := m.approleConfig()
	cfg.Timeout = 100 * time.Millisecond
	c := mustNew(t, cfg, nil)
	start := time.Now()
	_, err := c.ServerInfo(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) || !Transient(err) {
		t.Errorf("err = %v", err)
	}
	// One attempt and two read retries, 100 ms each.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if n := m.count("", "sys/seal-status"); n != 1+maxReadRetries {
		t.Errorf("%d attempts", n)
	}
}

// The mount accessor is read from sys/auth once and cached: a reconcile
// does not pay a read for a value that changes only when the mount is
// re-created. Vault answering "invalid mount accessor" drops the cache, and
// AuthMounts (the connection's periodic check) refreshes it.
func TestMountAccessorCache(t *testing.T) {
	accessor := "auth_approle_1"
	m := newMockVault(t, func(r mockReq) (int, any) {
		switch r.Path {
		case "sys/auth":
			return 200, map[string]any{"data": map[string]any{"salt-minions/": map[string]any{"type": "approle", "accessor": accessor}}}
		case "identity/entity-alias":
			return 400, map[string]any{"errors": []string{`invalid mount accessor "auth_approle_1"`}}
		}
		return 0, nil
	})
	c := mustNew(t, m.approleConfig(), nil)
	ctx := context.Background()
	for range 3 {
		if acc, err := c.MountAccessor(ctx, "salt-minions"); err != nil || acc != "auth_approle_1" {
			t.Fatalf("accessor %q %v", acc, err)
		}
	}
	if n := m.count("", "sys/auth"); n != 1 {
		t.Errorf("sys/auth read %d times for three lookups, want 1", n)
	}
	// The mount was re-created: Vault refuses the old accessor.
	accessor = "auth_approle_2"
	if _, err := c.CreateEntityAlias(ctx, "n", "auth_approle_1", "e"); Classify(err) != ClassConflict {
		t.Fatalf("err %v (%s), want a conflict", err, Classify(err))
	}
	if acc, err := c.MountAccessor(ctx, "salt-minions"); err != nil || acc != "auth_approle_2" {
		t.Errorf("after the refusal: %q %v, want the new accessor", acc, err)
	}
	// A mount that does not exist is looked up again each time (it may be
	// enabled any moment).
	_, _ = c.MountAccessor(ctx, "nope")
	_, _ = c.MountAccessor(ctx, "nope")
	if n := m.count("", "sys/auth"); n != 4 {
		t.Errorf("sys/auth read %d times, want 4", n)
	}
}

// TokenLease is what the connection's metrics alert on: the expiry moves
// on at each renewal, and a capped lease (the max TTL reached) is measured
// against the usual one.
func TestTokenLease(t *testing.T) {
	m, c, advance := leasedClient(t)
	now := c.now()
	var _ TokenLeaser = c
	exp, lease := c.TokenLease()
	if lease != 30*time.Second {
		t.Errorf("lease %s, want 30s", lease)
	}
	if first := exp.Sub(now); first < 29*time.Second || first > 30*time.Second {
		t.Errorf("expires in %s, want 30s", first)
	}
	m.set(func(m *mockVault) {
		m.handle = func(r mockReq) (int, any) {
			if r.Path == "auth/token/renew-self" {
				return 200, map[string]any{"auth": map[string]any{"client_token": r.Token, "lease_duration": 10, "renewable": true}}
			}
			if r.Path == "sys/seal-status" {
				return 200, map[string]any{"version": "1.21.4"}
			}
			return 0, nil
		}
	})
	advance(21 * time.Second)
	now = c.now()
	if _, err := c.ServerInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp2, lease2 := c.TokenLease()
	if lease2 != 30*time.Second || exp2.Sub(now) != 10*time.Second {
		t.Errorf("after a capped renewal: expires in %s of a %s lease, want 10s of 30s", exp2.Sub(now), lease2)
	}

	// A token that never expires (root) has no lease.
	root := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "auth/token/lookup-self" {
			return 200, map[string]any{"data": map[string]any{"ttl": 0, "creation_ttl": 0, "renewable": false}}
		}
		return 0, nil
	})
	rc := mustNew(t, Config{Address: root.srv.URL, Auth: Auth{Token: "s.root-token-value"}}, nil)
	if exp, lease := rc.TokenLease(); !exp.IsZero() || lease != 0 {
		t.Errorf("a root token: expires %s, lease %s; want none", exp, lease)
	}
}

// The client keeps tokens out of its errors by value, not by shape: a
// token of any server's shape is redacted alike, Vault's hvs./hvb. ones
// and the s./b. ones of OpenBao (its default: server-side consistent
// tokens off, openbao v2.6.2 command/server.go) and of a Vault with
// disable_ssc_tokens, a namespace's suffix included. Nothing in the
// operator reads a token's prefix.
func TestTokensOfEveryShapeAreRedacted(t *testing.T) {
	for _, tt := range []struct{ shape, token string }{
		{"Vault service", "hvs.CAESIJyeFmhLYRWVXPJStT3fDP1ZdFkon"},
		{"OpenBao service", "s.rlNjegSKykWcplOkwsjd8bP9"},
		{"OpenBao service in a namespace", "s.rlNjegSKykWcplOkwsjd8bP9.aBcDe"},
		{"Vault batch", "hvb.AAAAAQJ2wq1xBatchToken0123"},
		{"OpenBao batch", "b.AAAAAQJ2wq1xBatchToken0123"},
		{"custom ID", "rlNjegSKykWcplOkwsjd8bP9"},
	} {
		token := tt.token
		t.Run(tt.shape, func(t *testing.T) {
			m := newMockVault(t, func(r mockReq) (int, any) {
				if r.Path == "auth/token/lookup-self" {
					return 200, map[string]any{"data": map[string]any{"ttl": 0, "renewable": false}}
				}
				// A server that echoes the token it got.
				return 400, map[string]any{"errors": []string{"bad request, token " + r.Token}}
			})
			c := mustNew(t, Config{Address: m.srv.URL, Auth: Auth{Token: token}}, nil)
			_, err := c.ReadRole(context.Background(), "salt-minions", "web01")
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("error %q: the token is not redacted", err)
			}
		})
	}
}

// TestReadServerInfoWithoutLogin: ReadServerInfo asks sys/seal-status of a
// Vault whose login fails (sealed, or its token gone), without a token and
// without logging in; sealed, it answers with no cluster ID; unreachable,
// it is a transient error. It used to panic: its client had no session,
// and the request went through the session (a nil pointer), so a
// connection check that failed to log in to a sealed or unreachable Vault
// panicked, every time, and was retried with the controller's growing
// backoff instead of within seconds.
func TestReadServerInfoWithoutLogin(t *testing.T) {
	noBackoff(t)
	var sealed atomic.Bool
	m := newMockVault(t, func(r mockReq) (int, any) {
		if r.Path == "sys/seal-status" {
			if sealed.Load() {
				return 200, map[string]any{"sealed": true, "version": "1.21.4"}
			}
			return 200, map[string]any{"sealed": false, "version": "1.21.4", "cluster_id": "c-1"}
		}
		return 0, nil
	})
	m.set(func(m *mockVault) {
		m.loginErr = func(mockReq) (int, any) { return 503, map[string]any{"errors": []string{"Vault is sealed"}} }
	})
	obs := &recorder{}
	info, err := ReadServerInfo(context.Background(), m.approleConfig(), obs)
	if err != nil || info.ClusterID != "c-1" || info.Version != "1.21.4" {
		t.Fatalf("ReadServerInfo = %+v, %v", info, err)
	}
	sealed.Store(true)
	if info, err = ReadServerInfo(context.Background(), m.approleConfig(), obs); err != nil || info.ClusterID != "" || info.Version != "1.21.4" {
		t.Fatalf("sealed: ReadServerInfo = %+v, %v", info, err)
	}
	for _, r := range m.requests() {
		if r.Path != "sys/seal-status" || r.Token != "" {
			t.Errorf("request %s %s with token %q: want only seal-status, without a token", r.Method, r.Path, r.Token)
		}
	}
	m.srv.Close()
	if _, err := ReadServerInfo(context.Background(), m.approleConfig(), obs); err == nil || !Transient(err) {
		t.Errorf("unreachable: err = %v, want a transient error", err)
	}
}

// standbyOf is a Vault standby that forwards nothing: it answers every
// request with code (307, as Vault does when it cannot forward) and the
// active node's address for it.
func standbyOf(t *testing.T, active *mockVault, code int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", active.srv.URL+r.URL.RequestURI())
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestAStandbysRedirectKeepsTheBody: a write that a standby redirects to
// the active node (307) arrives there with its body, the login's too. The
// api library's own following sent a raw write's body again as "null",
// which Vault takes for a write of nothing and answers with success: in
// the HA tests, role and entity writes made while the active node stepped
// down were acknowledged, and lost.
func TestAStandbysRedirectKeepsTheBody(t *testing.T) {
	active := newMockVault(t, func(r mockReq) (int, any) {
		switch {
		case r.Method == http.MethodPut && r.Path == "auth/salt-minions/role/web01":
			return 204, nil
		case r.Method == http.MethodPut && r.Path == "identity/entity/name/salt_minion_web01":
			return 200, map[string]any{"data": map[string]any{"id": "e-1", "name": "salt_minion_web01"}}
		}
		return 0, nil
	})
	standby := standbyOf(t, active, http.StatusTemporaryRedirect)
	cfg := active.approleConfig()
	cfg.Address = standby.URL
	c := mustNew(t, cfg, nil)
	ctx := context.Background()
	if err := c.WriteRole(ctx, "salt-minions", "web01", map[string]any{"token_policies": []string{"saltstack/web01", "wave_3"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{"wave": "3"}); err != nil {
		t.Fatal(err)
	}
	var login, role, entity map[string]any
	for _, r := range active.requests() {
		switch r.Path {
		case "auth/approle/login":
			login = r.Body
		case "auth/salt-minions/role/web01":
			role = r.Body
		case "identity/entity/name/salt_minion_web01":
			entity = r.Body
		}
	}
	if login["role_id"] != "role-id-1" || login["secret_id"] == nil {
		t.Errorf("the login arrived with %v", login)
	}
	if fmt.Sprint(role["token_policies"]) != "[saltstack/web01 wave_3]" {
		t.Errorf("the role write arrived with %v, want its token_policies", role)
	}
	if md, _ := entity["metadata"].(map[string]any); md["wave"] != "3" {
		t.Errorf("the entity write arrived with %v, want its metadata", entity)
	}
}

// TestARedirectThatWouldChangeTheMethodIsNotFollowed: net/http would turn
// a PUT answered 302 into a GET; such a redirect is not followed, and the
// write fails as transient (tried again), nothing reaching the target.
func TestARedirectThatWouldChangeTheMethodIsNotFollowed(t *testing.T) {
	active := newMockVault(t, nil)
	active.set(func(m *mockVault) { m.valid["s.static"] = true })
	standby := standbyOf(t, active, http.StatusFound)
	// The token's lookup is a GET, which a 302 leaves a GET: followed.
	c := mustNew(t, Config{Address: standby.URL, Auth: Auth{Token: "s.static"}}, nil)
	before := len(active.requests())
	err := c.WriteRole(context.Background(), "salt-minions", "web01", map[string]any{"token_ttl": 60})
	var ve *Error
	if err == nil || !errors.As(err, &ve) || ve.StatusCode != http.StatusFound || !Transient(err) {
		t.Fatalf("WriteRole through a 302: %v, want a transient error with status 302", err)
	}
	if got := active.requests()[before:]; len(got) != 0 {
		t.Errorf("the target got %+v", got)
	}
}

// TestFollowRedirect: once, with the method, never from https to http.
func TestFollowRedirect(t *testing.T) {
	req := func(method, url string) *http.Request {
		r, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	put := req(http.MethodPut, "https://vault.example.com/v1/x")
	tests := []struct {
		name   string
		next   *http.Request
		via    []*http.Request
		follow bool
	}{
		{"307 to the active node", req(http.MethodPut, "https://10.0.0.2:8200/v1/x"), []*http.Request{put}, true},
		{"a second redirect", req(http.MethodPut, "https://10.0.0.3:8200/v1/x"), []*http.Request{put, put}, false},
		{"to http", req(http.MethodPut, "http://10.0.0.2:8200/v1/x"), []*http.Request{put}, false},
		{"a PUT made a GET", req(http.MethodGet, "https://10.0.0.2:8200/v1/x"), []*http.Request{put}, false},
	}
	for _, tc := range tests {
		if err := followRedirect(tc.next, tc.via); (err == nil) != tc.follow {
			t.Errorf("%s: followRedirect = %v, want follow %v", tc.name, err, tc.follow)
		}
	}
}
