package connection

import (
	"context"
	"fmt"
	"time"

	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A connection that cannot be used (its token refused, Vault sealed or
// unreachable) is known once, at the connection: its bindings and
// templates then wait on it without a Vault request of their own, instead
// of each finding out by failing, with backoff, one by one (with a revoked
// token, a storm of refused requests in Vault and its audit log). The
// gate closes when the connection's check fails, or when a binding's
// failure makes Verify check it; it opens when a check passes, or when the
// connection's client changes (a new generation or Secret version: a new
// login is worth trying). The gate opening wakes them (OnOpened), and so
// does the connection turning Ready.

// connGate is what the last check of a connection found.
type connGate struct {
	key   string // the client's cache key ("" without a cache)
	err   error  // nil: the check passed
	began time.Time
	fails int // checks failed in a row
}

// probe is a check under way: began is when it was sent, done is closed
// when its verdict is recorded.
type probe struct {
	began time.Time
	done  chan struct{}
}

// gated is the wait of a connection whose client at key failed its check.
func (c *Connections) gated(name, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.gates[name]
	if !ok || g.err == nil || g.key != key {
		return nil
	}
	// The reason is the connection's (VaultUnavailable, AccessDenied): what
	// a binding would have found itself, without asking.
	return outcome.ErrWaiting{What: outcome.WaitingForHealth, Reason: outcome.For(g.err).Reason,
		Msg: fmt.Sprintf("VaultConnection %q cannot be used (%v): waiting for its check to pass", name, g.err)}
}

// retryAfter is when the connection controller checks a failing
// connection again. A Vault that does not answer, is sealed or answers 5xx
// (an HA cluster electing a new active node, a node restarted sealed) is
// checked every minRetry for its first fastRetries checks: such a check
// costs a refused connection or two requests Vault answers without work,
// and its bindings resume within minRetry of Vault healing (with the
// checks spread out to maxRetry, the HA tests measured 3 to 5 s between
// Vault answering again and the first binding's request). A Vault down for
// longer than an election is then checked every maxRetry: a few such
// connections checked every 2 s kept the controller's workers busy, and a
// new connection waited behind them for its first check. A refused token
// is checked soon at first, then every maxRetry at most: a dead token
// costs a few logins per interval, not one per binding. Never later than
// the check interval.
func (c *Connections) retryAfter(name string, interval time.Duration) time.Duration {
	c.mu.Lock()
	g := c.gates[name]
	c.mu.Unlock()
	d := minRetry << min(max(g.fails-1, 0), 3)
	if g.err != nil && outcome.Classify(g.err) == vault.ClassTransient {
		d = minRetry
		if g.fails > fastRetries {
			d = maxRetry
		}
	}
	return min(d, maxRetry, interval)
}

// minRetry and maxRetry bound retryAfter; fastRetries checks every
// minRetry (30 s) outlast a raft election with its retries (the HA suite:
// 8 to 14 s from the active node's loss to a new one answering).
const (
	minRetry    = 2 * time.Second
	maxRetry    = 10 * time.Second
	fastRetries = 15
)

// record remembers a check's verdict on the connection's client at key:
// a failure of Vault or of the credentials closes the gate, anything else
// (a wait for a Secret, a pass) opens it.
func (c *Connections) record(name, key string, began time.Time, err error) {
	c.mu.Lock()
	if c.gates == nil {
		c.gates = map[string]connGate{}
	}
	if err != nil && (outcome.IsWaiting(err) || outcome.Classify(err) == vault.ClassInvalid) {
		err = nil
	}
	prev := c.gates[name]
	fails := 0
	if err != nil {
		fails = prev.fails + 1
	}
	c.gates[name] = connGate{key: key, err: err, began: began, fails: fails}
	var wake []func(string)
	if prev.err != nil && err == nil {
		wake = c.opened
	}
	c.mu.Unlock()
	for _, f := range wake {
		f(name)
	}
}

// Probe gets the connection's client past its gate, runs check on it and
// records the verdict: the connection controller's check.
func (c *Connections) Probe(ctx context.Context, name string, check func(vault.Client) error) error {
	began := time.Now()
	vc, _, key, err := c.client(ctx, name, false)
	if err == nil {
		err = check(vc)
	}
	c.record(name, key, began, err)
	return err
}

// Verify is for a binding or template whose Vault requests, sent from
// since on, failed with err: when the failure could be the connection's
// (refused, unavailable), it returns the connection's wait if a check of
// the token sent after since fails, and err, the caller's own, if it
// passes. A check sent before since proves nothing about the caller's
// requests (the token may have been revoked in between: a pass that
// stood for a second let a revoked token's first second of failures
// retry with backoff, 145 refused requests from 1,000 bindings), so such
// callers wait for the next check. Checks are single-flight: one covers
// every caller that failed before it was sent, which bounds them by the
// failed reconciles, never more.
func (c *Connections) Verify(ctx context.Context, name string, since time.Time, err error) error {
	if err == nil || outcome.IsWaiting(err) {
		return err
	}
	if cl := outcome.Classify(err); cl != vault.ClassDenied && cl != vault.ClassTransient {
		return err
	}
	for {
		c.mu.Lock()
		g, checked := c.gates[name]
		p, busy := c.probing[name]
		switch {
		case checked && g.err != nil:
			c.mu.Unlock()
			return c.gatedOr(name, err)
		case checked && !g.began.Before(since):
			c.mu.Unlock()
			return err
		case busy:
			c.mu.Unlock()
			select {
			case <-p.done:
				continue
			case <-ctx.Done():
				return err
			}
		}
		p = probe{began: time.Now(), done: make(chan struct{})}
		if c.probing == nil {
			c.probing = map[string]probe{}
		}
		c.probing[name] = p
		c.mu.Unlock()
		perr := c.Probe(ctx, name, func(vc vault.Client) error { return vc.CheckToken(ctx) })
		c.mu.Lock()
		delete(c.probing, name)
		close(p.done)
		wake := c.wake
		c.mu.Unlock()
		if perr != nil && wake != nil {
			// The connection controller still thinks the connection
			// healthy: it must check it now and keep checking until it
			// passes, for the waiting ones to be woken (BecameReady).
			wake(name)
		}
		return c.gatedOr(name, err)
	}
}

// gatedOr is the connection's wait if its last check failed, else err.
func (c *Connections) gatedOr(name string, err error) error {
	if gerr := c.gated(name, c.keyOf(name)); gerr != nil {
		return gerr
	}
	return err
}

// OnClosed sets what Verify calls when its check closes a connection's
// gate: the connection controller enqueues the connection.
func (c *Connections) OnClosed(wake func(name string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wake = wake
}

// OnOpened adds what record calls when a check passes after one failed:
// the binding and template controllers enqueue what uses the connection.
// The connection turning Ready (watch.BecameReady) is not enough: a
// binding's failure closes the gate through Verify while the connection
// still says Ready, and when the connection controller's next check
// passes, its condition does not change, so no watch event wakes the
// bindings that waited on the gate (they would wait outcome.WaitAfter).
func (c *Connections) OnOpened(wake func(name string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opened = append(c.opened, wake)
}

// keyOf is the key of the connection's last check.
func (c *Connections) keyOf(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gates[name].key
}
