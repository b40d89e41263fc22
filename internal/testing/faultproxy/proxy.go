// Package faultproxy is an HTTP reverse proxy that injects faults between a
// client and its server: error statuses, rate limiting, answers cut short,
// stalls and dropped connections, switched at run time. The tests put it
// between the operator and a real Vault to see that the operator recovers
// on its own once the server is healthy again, without a hot loop.
//
// Every request is counted with the fault in effect when it arrived, so a
// test can compare the request rate during a fault with the healthy rate.
//
// It is test support: no product code imports it.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mode is one kind of fault.
type Mode int

const (
	// Healthy forwards every request as it is.
	Healthy Mode = iota
	// ServerError answers 500 without forwarding.
	ServerError
	// TooManyRequests answers 429 with Retry-After without forwarding.
	TooManyRequests
	// TruncateBody forwards, then cuts the body of a 200 answer to half
	// (with a Content-Length that matches the cut, so the client reads a
	// well-formed HTTP answer whose JSON ends early). The server did the
	// request; the client cannot tell.
	TruncateBody
	// Stall holds each request for Fault.Stall, then forwards it even if
	// the client gave up meanwhile, as a server that is slow rather than
	// dead carries out requests late. A request keeps the hold it arrived
	// with when the fault changes, so requests reach the server in the
	// order they arrived.
	Stall
	// DropConnections closes the connection of a fraction of requests
	// (Fault.DropFraction) without an answer: half of them before
	// forwarding, half after the server answered (the request was done,
	// its answer lost).
	DropConnections
)

func (m Mode) String() string {
	switch m {
	case Healthy:
		return "healthy"
	case ServerError:
		return "500"
	case TooManyRequests:
		return "429"
	case TruncateBody:
		return "truncated"
	case Stall:
		return "stall"
	case DropConnections:
		return "drop"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Fault is what the proxy does to the requests that arrive while it is set.
type Fault struct {
	Mode Mode
	// RetryAfter is the Retry-After of TooManyRequests, in whole seconds
	// (at least one).
	RetryAfter time.Duration
	// Stall is how long Stall holds each request.
	Stall time.Duration
	// DropFraction is the fraction of requests DropConnections drops
	// (0 to 1).
	DropFraction float64
	// Paths, when set, limits the fault to requests whose path ends with
	// one of them; the others pass as they are.
	Paths []string
	// Times, when above zero, ends the fault after that many requests it
	// applied to: the proxy turns healthy, as a blip does.
	Times int
}

// appliesTo: the fault is for a request of path.
func (f Fault) appliesTo(path string) bool {
	if len(f.Paths) == 0 {
		return true
	}
	for _, p := range f.Paths {
		if strings.HasSuffix(path, p) {
			return true
		}
	}
	return false
}

// Outcome is what happened to one request.
type Outcome int

const (
	Pending       Outcome = iota // not answered yet (held, or at the server)
	Forwarded                    // the server's answer passed through
	Refused                      // answered by the proxy (500, 429), not forwarded
	Truncated                    // forwarded, the answer's body cut
	DroppedBefore                // connection closed, not forwarded
	DroppedAfter                 // forwarded, connection closed instead of the answer
	Abandoned                    // held when the proxy closed, not forwarded
	Failed                       // the server could not be reached
)

// Request is one request the proxy received.
type Request struct {
	At      time.Time
	Mode    Mode
	Method  string
	Path    string
	Outcome Outcome
	// ClientGone: the client had hung up (given up waiting, or cancelled)
	// by the time the server answered, and the server carried the request
	// out all the same.
	ClientGone bool
}

// Proxy is a running fault-injecting reverse proxy on a loopback port.
type Proxy struct {
	rp       *httputil.ReverseProxy
	srv      *http.Server
	ln       net.Listener
	closed   chan struct{}
	handlers sync.WaitGroup
	// ctx carries the requests to the server; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	fault    Fault
	left     int // requests the fault still applies to, when Fault.Times is set
	rng      *rand.Rand
	requests []Request
}

// New starts a proxy in front of target (an http URL) on a free loopback
// port. seed makes the choice of dropped requests repeatable.
func New(target string, seed uint64) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fault proxy target %q is not an http URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the fault proxy: %w", err)
	}
	p := &Proxy{ln: ln, closed: make(chan struct{}), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = time.Minute
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			// Plain bodies from the server, so that a cut is a cut in the
			// JSON text, not in a gzip stream.
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport:      transport,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's address, to give the client instead of the server's.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Set switches the fault for the requests that arrive from now on.
func (p *Proxy) Set(f Fault) {
	p.mu.Lock()
	p.fault, p.left = f, f.Times
	p.mu.Unlock()
}

// Close stops the proxy: held requests are abandoned, connections closed.
func (p *Proxy) Close() error {
	select {
	case <-p.closed:
		return nil
	default:
	}
	close(p.closed)
	p.cancel()
	err := p.srv.Close()
	p.handlers.Wait()
	return err
}

// verdict is what the proxy decided for one request when it arrived.
type verdict struct {
	index      int             // in Proxy.requests
	in         context.Context // the client's request: done once it hung up
	fault      Fault
	dropBefore bool
	dropAfter  bool
}

type verdictKey struct{}

// arrive records a request and decides its fate under the current fault.
func (p *Proxy) arrive(r *http.Request) verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := verdict{index: len(p.requests), in: r.Context(), fault: p.fault}
	switch {
	case !v.fault.appliesTo(r.URL.Path):
		v.fault = Fault{}
	case v.fault.Times > 0:
		if p.left--; p.left <= 0 {
			p.fault = Fault{}
		}
	}
	if v.fault.Mode == DropConnections && p.rng.Float64() < v.fault.DropFraction {
		if p.rng.IntN(2) == 0 {
			v.dropBefore = true
		} else {
			v.dropAfter = true
		}
	}
	p.requests = append(p.requests, Request{At: time.Now(), Mode: v.fault.Mode, Method: r.Method, Path: r.URL.Path})
	return v
}

func (p *Proxy) settle(v verdict, o Outcome) {
	p.mu.Lock()
	p.requests[v.index].Outcome = o
	p.mu.Unlock()
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.handlers.Add(1)
	defer p.handlers.Done()
	// Read the whole request first: a stalled request is forwarded after
	// its client may have gone, with the body it sent.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the request", http.StatusBadRequest)
		return
	}
	v := p.arrive(r)
	switch {
	case v.fault.Mode == ServerError:
		p.settle(v, Refused)
		writeVaultError(w, http.StatusInternalServerError, "fault injected: internal error")
		return
	case v.fault.Mode == TooManyRequests:
		p.settle(v, Refused)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(v.fault.RetryAfter/time.Second))))
		writeVaultError(w, http.StatusTooManyRequests, "fault injected: request rate limit exceeded")
		return
	case v.dropBefore:
		p.settle(v, DroppedBefore)
		hangUp(w)
		return
	case v.fault.Mode == Stall:
		t := time.NewTimer(v.fault.Stall)
		select {
		case <-t.C:
		case <-p.closed:
			t.Stop()
			p.settle(v, Abandoned)
			return
		}
	}
	// The proxy's own context, not the client's: a server carries out what
	// it received whether the client still waits. (With a context that can
	// be cancelled, ReverseProxy does not watch the client's connection.)
	out := r.Clone(context.WithValue(p.ctx, verdictKey{}, v))
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	p.rp.ServeHTTP(w, out)
}

// errDropAfter tells errorHandler to hang up instead of answering.
var errDropAfter = errors.New("fault injected: answer dropped")

func (p *Proxy) modifyResponse(resp *http.Response) error {
	v, _ := resp.Request.Context().Value(verdictKey{}).(verdict)
	if v.in != nil && v.in.Err() != nil {
		p.mu.Lock()
		p.requests[v.index].ClientGone = true
		p.mu.Unlock()
	}
	switch {
	case v.dropAfter:
		_ = resp.Body.Close()
		return errDropAfter
	case v.fault.Mode == TruncateBody && resp.StatusCode == http.StatusOK:
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		cut := body[:len(body)/2]
		resp.Body = io.NopCloser(bytes.NewReader(cut))
		resp.ContentLength = int64(len(cut))
		resp.Header.Set("Content-Length", strconv.Itoa(len(cut)))
		p.settle(v, Truncated)
	default:
		p.settle(v, Forwarded)
	}
	return nil
}

func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	v, _ := r.Context().Value(verdictKey{}).(verdict)
	if errors.Is(err, errDropAfter) {
		p.settle(v, DroppedAfter)
		hangUp(w)
		return
	}
	p.settle(v, Failed)
	writeVaultError(w, http.StatusBadGateway, "fault proxy: "+err.Error())
}

// hangUp closes the client's connection at once (a reset, not a clean
// close), without an answer.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// Only HTTP/2 cannot be hijacked, and the proxy serves plain
		// HTTP/1.1.
		writeVaultError(w, http.StatusBadGateway, "fault proxy: cannot drop this connection")
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// writeVaultError answers as Vault does: {"errors": [msg]}.
func writeVaultError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, "{\"errors\":[%q]}\n", msg)
}
