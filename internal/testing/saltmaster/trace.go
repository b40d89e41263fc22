package saltmaster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Request is one request on the wire and Vault's answer, with the fields
// hack/saltext/issue_trace.py records.
type Request struct {
	Method    string  `json:"method"`
	Path      string  `json:"path"` // with /v1/ and the query, if any
	WrapTTL   string  `json:"wrap_ttl,omitempty"`
	Namespace string  `json:"namespace,omitempty"`
	Token     string  `json:"token,omitempty"` // only with Trace.RecordTokens
	Body      *string `json:"body,omitempty"`  // the exact bytes; nil: no body
	Status    int     `json:"status"`
	// Response keeps the parts of Vault's JSON answer that carry
	// information: auth, data, errors and wrap_info, when not null.
	Response json.RawMessage `json:"response,omitempty"`
}

func (r Request) String() string {
	s := r.Method + " " + r.Path
	if r.WrapTTL != "" {
		s += " (wrap " + r.WrapTTL + ")"
	}
	if r.Body != nil {
		s += " " + *r.Body
	}
	return fmt.Sprintf("%s -> %d", s, r.Status)
}

// Trace is an http.RoundTripper that records every request it passes on
// to Next (nil: http.DefaultTransport). Tokens are left out unless
// RecordTokens is set: a trace of a real Vault must not hold them.
type Trace struct {
	Next         http.RoundTripper
	RecordTokens bool

	mu       sync.Mutex
	requests []Request
}

// RoundTrip records req and its answer.
func (t *Trace) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := Request{Method: req.Method, Path: req.URL.EscapedPath()}
	if req.URL.RawQuery != "" {
		rec.Path += "?" + req.URL.RawQuery
	}
	rec.WrapTTL = req.Header.Get("X-Vault-Wrap-TTL")
	rec.Namespace = req.Header.Get("X-Vault-Namespace")
	if t.RecordTokens {
		rec.Token = req.Header.Get("X-Vault-Token")
	}
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
		_ = req.Body.Close()
		s := string(body)
		rec.Body = &s
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	res, err := next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the response body: %w", err)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	rec.Status = res.StatusCode
	rec.Response = compactResponse(body)
	t.mu.Lock()
	t.requests = append(t.requests, rec)
	t.mu.Unlock()
	return res, nil
}

// compactResponse keeps auth, data, errors and wrap_info of a JSON answer.
func compactResponse(body []byte) json.RawMessage {
	v, err := value.DecodeJSON(body)
	if err != nil || !v.IsMap() {
		return nil
	}
	out := value.NewMap(nil)
	for _, k := range []string{"auth", "data", "errors", "wrap_info"} {
		if x, ok := get(v, k); ok && !x.IsNull() {
			out = set(out, k, x)
		}
	}
	b, _ := out.MarshalJSON()
	return b
}

// Requests returns what was recorded so far.
func (t *Trace) Requests() []Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Request(nil), t.requests...)
}

// Take returns what was recorded and starts afresh.
func (t *Trace) Take() []Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.requests
	t.requests = nil
	return out
}
