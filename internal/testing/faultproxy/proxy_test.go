package faultproxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upstream is a server that answers every request with a JSON body naming
// what it received, and counts the requests it got.
type upstream struct {
	srv  *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	seen []string // "METHOD path body token"
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, r.Method+" "+r.URL.Path+" "+string(body)+" "+r.Header.Get("X-Vault-Token"))
		u.mu.Unlock()
		u.hits.Add(1)
		if strings.Contains(r.URL.Path, "late") {
			// Slow enough for the proxy to notice a client that left.
			time.Sleep(200 * time.Millisecond)
		}
		if r.URL.Path == "/v1/absent" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errors":[]}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"path": r.URL.Path, "padding": strings.Repeat("x", 64)}})
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target, 42)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// call sends one request on a new connection (no keep-alive, so that the
// client's transport never silently re-sends a request whose connection
// was dropped).
func call(ctx context.Context, url, method, body string) (int, string, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("X-Vault-Token", "s.token")
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, err
}

func TestHealthyForwardsUnchanged(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u.srv.URL)
	code, body, _, err := call(context.Background(), p.URL()+"/v1/sys/policies/acl/web", http.MethodPut, `{"policy":"x"}`)
	if err != nil || code != http.StatusOK || !strings.Contains(body, `"path":"/v1/sys/policies/acl/web"`) {
		t.Fatalf("answer %d %q %v", code, body, err)
	}
	if want := `PUT /v1/sys/policies/acl/web {"policy":"x"} s.token`; len(u.seen) != 1 || u.seen[0] != want {
		t.Errorf("upstream saw %q, want %q", u.seen, want)
	}
	code, _, _, err = call(context.Background(), p.URL()+"/v1/absent", http.MethodGet, "")
	if err != nil || code != http.StatusNotFound {
		t.Errorf("absent: %d %v, want 404", code, err)
	}
	if o := Outcomes(p.Requests()); o[Forwarded] != 2 || len(o) != 1 {
		t.Errorf("outcomes %v, want 2 forwarded", o)
	}
}

func TestRefusingModesDoNotForward(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u.srv.URL)
	for _, tc := range []struct {
		fault      Fault
		code       int
		retryAfter string
	}{
		{Fault{Mode: ServerError}, http.StatusInternalServerError, ""},
		{Fault{Mode: TooManyRequests, RetryAfter: 3 * time.Second}, http.StatusTooManyRequests, "3"},
		{Fault{Mode: TooManyRequests}, http.StatusTooManyRequests, "1"},
	} {
		p.Set(tc.fault)
		code, body, h, err := call(context.Background(), p.URL()+"/v1/auth/salt-minions/role/web01", http.MethodPost, `{}`)
		if err != nil || code != tc.code || h.Get("Retry-After") != tc.retryAfter {
			t.Errorf("%s: %d Retry-After %q %v, want %d %q", tc.fault.Mode, code, h.Get("Retry-After"), err, tc.code, tc.retryAfter)
		}
		var e struct{ Errors []string }
		if json.Unmarshal([]byte(body), &e) != nil || len(e.Errors) != 1 {
			t.Errorf("%s: body %q is not Vault's error shape", tc.fault.Mode, body)
		}
	}
	if u.hits.Load() != 0 {
		t.Errorf("the server got %d requests, want none", u.hits.Load())
	}
	if o := Outcomes(p.Requests()); o[Refused] != 3 {
		t.Errorf("outcomes %v, want 3 refused", o)
	}
}

func TestTruncateBodyCutsOnly200Answers(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u.srv.URL)
	p.Set(Fault{Mode: TruncateBody})
	code, body, h, err := call(context.Background(), p.URL()+"/v1/identity/entity/name/x", http.MethodPost, `{"metadata":{}}`)
	if err != nil || code != http.StatusOK {
		t.Fatalf("answer %d %v: the cut must still be a well-formed HTTP answer", code, err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(body), &v); err == nil || h.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("body %q (Content-Length %s) decodes (%v): not cut", body, h.Get("Content-Length"), err)
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&v); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("decoding the cut body: %v, want unexpected EOF", err)
	}
	code, body, _, err = call(context.Background(), p.URL()+"/v1/absent", http.MethodGet, "")
	if err != nil || code != http.StatusNotFound || body != `{"errors":[]}` {
		t.Errorf("a 404 is left alone: %d %q %v", code, body, err)
	}
	if u.hits.Load() != 2 {
		t.Errorf("the server got %d requests, want 2: a cut answer was still done", u.hits.Load())
	}
	if o := Outcomes(p.Requests()); o[Truncated] != 1 || o[Forwarded] != 1 {
		t.Errorf("outcomes %v, want one truncated and one forwarded", o)
	}
}

func TestStallHoldsThenForwardsEvenWhenTheClientGaveUp(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u.srv.URL)
	const hold = 400 * time.Millisecond
	p.Set(Fault{Mode: Stall, Stall: hold})
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), hold/4)
	defer cancel()
	if _, _, _, err := call(ctx, p.URL()+"/v1/sys/policies/acl/late", http.MethodPut, `{"policy":"late"}`); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a client that waits %s: %v, want its deadline", hold/4, err)
	}
	// The mode changes while the first request is held: it keeps its hold,
	// the next one is forwarded at once.
	p.Set(Fault{Mode: Healthy})
	if code, _, _, err := call(context.Background(), p.URL()+"/v1/now", http.MethodGet, ""); err != nil || code != http.StatusOK {
		t.Fatalf("healthy after the stall: %d %v", code, err)
	}
	if got := u.hits.Load(); got != 1 || time.Since(begin) >= hold {
		t.Fatalf("%d requests at the server after %s, want only the healthy one before the hold ends", got, time.Since(begin))
	}
	deadline := time.Now().Add(5 * time.Second)
	for u.hits.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if u.hits.Load() != 2 || time.Since(begin) < hold {
		t.Fatalf("the stalled request reached the server %d times after %s, want once after %s", u.hits.Load()-1, time.Since(begin), hold)
	}
	u.mu.Lock()
	late := u.seen[1]
	u.mu.Unlock()
	if late != `PUT /v1/sys/policies/acl/late {"policy":"late"} s.token` {
		t.Errorf("the late request arrived as %q", late)
	}
	// The server's answer is not cut off because the client left.
	for time.Now().Before(deadline) && p.Requests()[0].Outcome == Pending {
		time.Sleep(10 * time.Millisecond)
	}
	if o := p.Requests()[0].Outcome; o != Forwarded {
		t.Errorf("the stalled request: %s, want forwarded to the end", o)
	}
	// Recorded as carried out after its client gave up; the healthy one,
	// answered while its client waited, is not.
	if reqs := p.Requests(); !reqs[0].ClientGone || reqs[1].ClientGone {
		t.Errorf("client gone: stalled %v, healthy %v; want true, false", reqs[0].ClientGone, reqs[1].ClientGone)
	}
}

func TestDropConnections(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u.srv.URL)
	p.Set(Fault{Mode: DropConnections, DropFraction: 1})
	for range 40 {
		if code, _, _, err := call(context.Background(), p.URL()+"/v1/x", http.MethodPost, `{}`); err == nil {
			t.Fatalf("a dropped connection answered %d", code)
		}
	}
	o := Outcomes(p.Requests())
	if o[DroppedBefore]+o[DroppedAfter] != 40 || o[DroppedBefore] < 10 || o[DroppedAfter] < 10 {
		t.Fatalf("outcomes %v: want 40 drops, both before and after forwarding", o)
	}
	if u.hits.Load() != int64(o[DroppedAfter]) {
		t.Errorf("the server got %d requests, want the %d dropped after forwarding", u.hits.Load(), o[DroppedAfter])
	}

	// A fraction: about that many, the same ones for the same seed.
	drops := func() int {
		q := newProxy(t, u.srv.URL)
		q.Set(Fault{Mode: DropConnections, DropFraction: 0.2})
		n := 0
		for range 300 {
			if _, _, _, err := call(context.Background(), q.URL()+"/v1/x", http.MethodGet, ""); err != nil {
				n++
			}
		}
		return n
	}
	first, second := drops(), drops()
	if first < 36 || first > 84 || first != second {
		t.Errorf("dropped %d and %d of 300 at 20%% with one seed, want about 60 both times", first, second)
	}
}

func TestCountsPerModeAndSecond(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u.srv.URL)
	send := func(n int) {
		for range n {
			_, _, _, _ = call(context.Background(), p.URL()+"/v1/x", http.MethodGet, "")
		}
	}
	begin := time.Now()
	send(3)
	p.Set(Fault{Mode: ServerError})
	mid := time.Now()
	send(5)
	p.Set(Fault{Mode: Healthy})
	send(2)
	end := time.Now()
	per := map[Mode]int{}
	for _, c := range p.Counts() {
		per[c.Mode] += c.Requests
		if c.Second.After(end) || c.Second.Before(begin.Truncate(time.Second)) {
			t.Errorf("count at %s outside the test", c.Second)
		}
	}
	if per[Healthy] != 5 || per[ServerError] != 5 || len(per) != 2 {
		t.Errorf("per mode %v, want 5 healthy, 5 errors", per)
	}
	if n := len(p.Between(begin, mid)); n != 3 {
		t.Errorf("%d requests before the switch, want 3", n)
	}
	if r := p.Rate(begin, end); r <= 0 {
		t.Errorf("rate %v", r)
	}
}

func TestNewRejectsABadTarget(t *testing.T) {
	for _, target := range []string{"", "127.0.0.1:8200", "ftp://x"} {
		if p, err := New(target, 1); err == nil {
			_ = p.Close()
			t.Errorf("New(%q) accepted", target)
		}
	}
}

// A fault for some paths leaves the others alone; a fault of a number of
// times applies to that many of its requests, then the proxy is healthy.
func TestFaultOfSomePathsAndTimes(t *testing.T) {
	u := newUpstream(t)
	p := newProxy(t, u.srv.URL)
	ctx := context.Background()
	p.Set(Fault{Mode: ServerError, Paths: []string{"/role/web01", "/auth/token/lookup-self"}, Times: 2})
	var got []string
	for _, path := range []string{"/v1/sys/health", "/v1/auth/salt/role/web01", "/v1/auth/salt/role/web02", "/v1/auth/token/lookup-self", "/v1/auth/token/lookup-self", "/v1/auth/salt/role/web01"} {
		code, _, _, err := call(ctx, p.URL()+path, http.MethodGet, "")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, path+" "+strconv.Itoa(code))
	}
	want := []string{"/v1/sys/health 200", "/v1/auth/salt/role/web01 500", "/v1/auth/salt/role/web02 200",
		"/v1/auth/token/lookup-self 500", "/v1/auth/token/lookup-self 200", "/v1/auth/salt/role/web01 200"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("answers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := u.hits.Load(); n != 4 {
		t.Errorf("upstream got %d requests, want the 4 the fault left alone", n)
	}
}
