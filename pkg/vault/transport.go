package vault

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Observer operations.
const (
	OpRead   = "read"
	OpWrite  = "write"
	OpDelete = "delete"
	OpList   = "list"
	OpLogin  = "login"
)

type opKey struct{}

// withOp tells the transport how to report the request to the Observer.
func withOp(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

// observingTransport is the client's http.RoundTripper: every request that
// leaves the client, the api library's own included, waits for the rate
// limiter and is reported to the Observer. Only the method, the URL path
// and the status code are looked at: headers (X-Vault-Token) and bodies
// (secret IDs, JWTs) are not.
type observingTransport struct {
	next    http.RoundTripper
	limiter *rate.Limiter // nil: no limit
	obs     Observer
}

func (t *observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.limiter != nil {
		if err := t.limiter.Wait(req.Context()); err != nil {
			if req.Body != nil {
				_ = req.Body.Close() // a RoundTripper must close the body, even on error
			}
			return nil, fmt.Errorf("waiting for the client-side rate limit: %w", err)
		}
	}
	op, _ := req.Context().Value(opKey{}).(string)
	p := apiPath(req.URL.Path)
	if op == "" {
		op = opFor(req.Method, p, req.URL.Query().Get("list") == "true")
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	code := 0
	if err == nil {
		code = resp.StatusCode
	}
	t.obs.Request(op, p, code, time.Since(start))
	return resp, err
}

// apiPath is the URL path without the /v1/ prefix.
func apiPath(urlPath string) string {
	return strings.TrimPrefix(strings.TrimPrefix(urlPath, "/"), "v1/")
}

// opFor classifies a request the client did not label itself.
func opFor(method, path string, list bool) string {
	switch {
	case isTokenLifecyclePath(path):
		return OpLogin
	case method == "LIST" || (method == http.MethodGet && list):
		return OpList
	case method == http.MethodGet || method == http.MethodHead:
		return OpRead
	case method == http.MethodDelete:
		return OpDelete
	default:
		return OpWrite
	}
}

// isTokenLifecyclePath: logins and the token's own lookup and renewal.
func isTokenLifecyclePath(path string) bool {
	return (strings.HasPrefix(path, "auth/") && strings.HasSuffix(path, "/login")) ||
		path == "auth/token/lookup-self" || path == "auth/token/renew-self"
}

// newTransport builds the TLS transport for cfg, wrapped for the Observer
// and the rate limit.
func newTransport(cfg Config, obs Observer) (*observingTransport, *http.Transport, error) {
	tlsCfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         cfg.ServerName,
		InsecureSkipVerify: cfg.InsecureSkipVerify, //nolint:gosec // the user's explicit choice, documented as test-only
	}
	if len(cfg.CACert) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CACert) {
			return nil, nil, fmt.Errorf("%w: the CA bundle holds no PEM certificate", ErrInvalid)
		}
		tlsCfg.RootCAs = pool
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tlsCfg
	base.TLSHandshakeTimeout = 10 * time.Second
	base.ForceAttemptHTTP2 = true
	base.MaxIdleConnsPerHost = 16

	var limiter *rate.Limiter
	if cfg.QPS > 0 {
		burst := cfg.Burst
		if burst <= 0 {
			burst = 1
		}
		limiter = rate.NewLimiter(rate.Limit(cfg.QPS), burst)
	}
	return &observingTransport{next: base, limiter: limiter, obs: obs}, base, nil
}

type nopObserver struct{}

func (nopObserver) Request(string, string, int, time.Duration) {}
func (nopObserver) Login(string, error)                        {}
