package localenv

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// fakeNode answers sys/health with its current code and /who with its name.
type fakeNode struct {
	name string
	code atomic.Int32
	hang atomic.Bool // sys/health answers too late
	srv  *httptest.Server
}

func newFakeNode(t *testing.T, name string, code int) *fakeNode {
	n := &fakeNode{name: name}
	n.code.Store(int32(code))
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sys/health" {
			if n.hang.Load() {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			}
			w.WriteHeader(int(n.code.Load()))
			return
		}
		_, _ = io.WriteString(w, n.name)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// who asks the proxy on a new connection which node answers.
func who(t *testing.T, url string) (string, error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Get(url + "/who")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func waitProxy(t *testing.T, p *ActiveProxy, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Active() != want {
		if time.Now().After(deadline) {
			t.Fatalf("proxy target %d, want %d (switches %+v)", p.Active(), want, p.Switches())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestActiveProxyFollowsTheActiveNode: new connections go to the node that
// answers sys/health with 200; none while no node does (reset at once);
// a connection made before a switch keeps its node; a node whose answer
// is refused (dead) is dropped at once.
func TestActiveProxyFollowsTheActiveNode(t *testing.T) {
	a := newFakeNode(t, "a", http.StatusOK)
	b := newFakeNode(t, "b", http.StatusTooManyRequests)
	c := newFakeNode(t, "c", http.StatusServiceUnavailable)
	p, err := NewActiveProxy("", []string{a.srv.URL, b.srv.URL, c.srv.URL}, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got, err := p.WaitActive(context.Background(), 5*time.Second); err != nil || got != 0 {
		t.Fatalf("WaitActive = %d, %v; want 0", got, err)
	}
	if got, err := who(t, p.URL); err != nil || got != "a" {
		t.Fatalf("who = %q, %v; want a", got, err)
	}

	// A keep-alive connection to a, made before the switch.
	kept := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func() string {
		resp, err := kept.Get(p.URL + "/who")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get(); got != "a" {
		t.Fatalf("kept connection: %q", got)
	}

	// A step-down: a is a standby, b active.
	a.code.Store(http.StatusTooManyRequests)
	b.code.Store(http.StatusOK)
	waitProxy(t, p, 1)
	if got, err := who(t, p.URL); err != nil || got != "b" {
		t.Fatalf("after the switch who = %q, %v; want b", got, err)
	}
	if got := get(); got != "a" {
		t.Errorf("the connection made before the switch went to %q, want a (kube-proxy leaves it)", got)
	}

	// An election: no node active; new connections are reset.
	b.code.Store(http.StatusTooManyRequests)
	waitProxy(t, p, -1)
	if got, err := who(t, p.URL); err == nil {
		t.Fatalf("no active node, yet who = %q", got)
	}
	if _, reset := p.Counts(); reset == 0 {
		t.Error("no connection counted as reset")
	}
	c.code.Store(http.StatusOK)
	waitProxy(t, p, 2)

	// The active node dies: its connections are refused, the target goes.
	c.srv.Close()
	waitProxy(t, p, -1)
	sw := p.Switches()
	if len(sw) != 5 || sw[0].To != 0 || sw[1].To != 1 || sw[2].To != -1 || sw[3].To != 2 || sw[4].From != 2 || sw[4].To != -1 {
		t.Errorf("switches %+v", sw)
	}
}

// TestActiveProxyKeepsALateActiveNode: a poll that gets no answer in time
// from the active node keeps it (a busy node keeps its label).
func TestActiveProxyKeepsALateActiveNode(t *testing.T) {
	a := newFakeNode(t, "a", http.StatusOK)
	b := newFakeNode(t, "b", http.StatusTooManyRequests)
	p, err := NewActiveProxy("", []string{a.srv.URL, b.srv.URL}, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitProxy(t, p, 0)
	a.hang.Store(true)
	time.Sleep(1500 * time.Millisecond) // several polls, each late
	if got := p.Active(); got != 0 {
		t.Errorf("a late active node was dropped: target %d, switches %+v", got, p.Switches())
	}
	a.hang.Store(false)
}
