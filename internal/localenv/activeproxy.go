package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// ActiveProxy is an active-following address: a loopback TCP proxy that
// sends every new connection to the node of a Vault cluster that is active
// now, as a Kubernetes Service selecting vault-active=true does (Vault's
// Kubernetes service registration labels the active pod; kube-proxy then
// sends new connections there).
//
// It asks every node's sys/health every poll: the node answering 200 is
// the active one. A node that answers otherwise (standby, sealed) or
// refuses the connection (dead) stops being the target; one whose answer
// is late keeps it (a busy active node keeps its label too). While no node
// is active a new connection is reset at once, as a Service without
// endpoints rejects it. Established connections are left alone, as
// kube-proxy leaves them: they end when their node dies, and after a
// step-down they reach the old active node, now a standby that forwards.
type ActiveProxy struct {
	// URL is the proxy's address, http://127.0.0.1:port.
	URL string

	nodes []string // the nodes' API URLs
	ln    net.Listener
	poll  time.Duration
	hc    *http.Client

	mu       sync.Mutex
	active   int // -1: none
	switches []ProxySwitch
	conns    map[net.Conn]struct{}
	changed  chan struct{} // closed and replaced on every switch
	// Accepted counts the connections proxied, Reset those reset for want
	// of an active node (or because it refused the connection).
	accepted, reset int

	done chan struct{}
	wg   sync.WaitGroup
}

// ProxySwitch is a change of the proxy's target: To is the node's index,
// -1 for none.
type ProxySwitch struct {
	At       time.Time
	From, To int
}

// NewActiveProxy listens on host (127.0.0.1 when "") and follows the
// active one of nodes (their API URLs, http://host:port), asking each
// every poll. Close it when done.
func NewActiveProxy(host string, nodes []string, poll time.Duration) (*ActiveProxy, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	for _, n := range nodes {
		if u, err := url.Parse(n); err != nil || u.Host == "" {
			return nil, fmt.Errorf("localenv: proxy: node address %q is not a URL", n)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &ActiveProxy{
		URL: "http://" + ln.Addr().String(), nodes: nodes, ln: ln, poll: poll,
		// Short: a poll must not wait on a node that hangs.
		hc:     &http.Client{Timeout: max(poll, 500*time.Millisecond)},
		active: -1, conns: map[net.Conn]struct{}{}, changed: make(chan struct{}), done: make(chan struct{}),
	}
	p.check()
	p.wg.Add(2)
	go p.follow()
	go p.serve()
	return p, nil
}

func newActiveProxy(host string, c *Cluster, poll time.Duration) (*ActiveProxy, error) {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return NewActiveProxy(host, addrs, poll)
}

// Active is the index of the node new connections go to, -1 for none.
func (p *ActiveProxy) Active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active
}

// Switches are the changes of target so far, in order.
func (p *ActiveProxy) Switches() []ProxySwitch {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProxySwitch(nil), p.switches...)
}

// Counts are the connections proxied and those reset so far.
func (p *ActiveProxy) Counts() (accepted, reset int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.reset
}

// WaitActive waits until the proxy has a target, and returns it.
func (p *ActiveProxy) WaitActive(ctx context.Context, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		p.mu.Lock()
		a, ch := p.active, p.changed
		p.mu.Unlock()
		if a >= 0 {
			return a, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return -1, fmt.Errorf("localenv: proxy: no active node after %s: %w", timeout, ctx.Err())
		}
	}
}

// Close stops listening, ends every proxied connection and the polling.
func (p *ActiveProxy) Close() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *ActiveProxy) follow() {
	defer p.wg.Done()
	t := time.NewTicker(p.poll)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.check()
		}
	}
}

// nodeAnswer is one node's sys/health answer to a poll.
type nodeAnswer int

const (
	answerLate    nodeAnswer = iota // no answer in time: no news
	answerActive                    // 200
	answerOther                     // standby, sealed, uninitialised, ...
	answerRefused                   // nothing listens: the node is down
)

// check asks every node and moves the target when the answers say so.
func (p *ActiveProxy) check() {
	answers := make([]nodeAnswer, len(p.nodes))
	var wg sync.WaitGroup
	for i, n := range p.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = p.ask(n)
		}()
	}
	wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	next := p.active
	if next >= 0 && answers[next] != answerLate && answers[next] != answerActive {
		next = -1
	}
	if next < 0 || answers[next] != answerActive {
		for i, a := range answers {
			if a == answerActive {
				next = i
				break
			}
		}
	}
	if next != p.active {
		p.switches = append(p.switches, ProxySwitch{At: time.Now(), From: p.active, To: next})
		p.active = next
		close(p.changed)
		p.changed = make(chan struct{})
	}
}

func (p *ActiveProxy) ask(node string) nodeAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), p.hc.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, node+"/v1/sys/health", nil)
	if err != nil {
		return answerOther
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" && ctx.Err() == nil {
			return answerRefused
		}
		return answerLate
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return answerActive
	}
	return answerOther
}

func (p *ActiveProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

// handle proxies one connection to the active node, or resets it.
func (p *ActiveProxy) handle(in net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	a := p.active
	p.mu.Unlock()
	var out net.Conn
	if a >= 0 {
		u, _ := url.Parse(p.nodes[a])
		var err error
		out, err = net.DialTimeout("tcp", u.Host, 2*time.Second)
		if err != nil {
			out = nil
		}
	}
	if out == nil {
		if tc, ok := in.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as a rejected connection
		}
		_ = in.Close()
		p.mu.Lock()
		p.reset++
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		_ = in.Close()
		_ = out.Close()
		return
	default:
	}
	p.accepted++
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		// One side ended: end both, as a dead node ends the connection.
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Add(2)
	go pipe(out, in)
	go pipe(in, out)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}
