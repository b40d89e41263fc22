package vault

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
)

// CacheKey builds a Cache key: the VaultConnection's identity (its UID or
// name, without "/"), then whatever must give a new client when it changes
// (its generation, the resourceVersions of its Secrets).
func CacheKey(connection string, versions ...string) string {
	return strings.Join(append([]string{connection}, versions...), "/")
}

// connectionOf is the part of a key before the first "/": the connection a
// client belongs to (neither a UID nor a VaultConnection name has a "/").
func connectionOf(key string) string {
	conn, _, _ := strings.Cut(key, "/")
	return conn
}

// Cache keeps one logged-in Client per VaultConnection. The zero value is
// ready to use.
//
// A key is "<connection>/<version>..." (see CacheKey): the part before the
// first "/" says which connection, the rest which version of it; a key
// without "/" is a connection of its own. Get returns the
// cached client when the key is unchanged, and otherwise creates one,
// replacing (and closing) the client of an older key of the same
// connection. Concurrent Gets of one key share one login. A failed login is
// not cached: every caller waiting for it gets the error, and the next Get
// tries again. A Get whose key is replaced (or forgotten) while it logs in
// gets a transient error and should be retried by its caller (a requeue).
type Cache struct {
	// New creates clients; nil means the package's New. Tests set it.
	New func(ctx context.Context, cfg Config, obs Observer) (Client, error)

	mu      sync.Mutex
	entries map[string]*cacheEntry // by connection
	closed  bool
}

type cacheEntry struct {
	key    string
	ready  chan struct{} // closed when client/err are set
	client Client
	err    error
}

var (
	errCacheClosed = errors.New("vault client cache closed")
	errSuperseded  = errors.New("the connection changed while logging in; try again")
)

// Get returns the client for key, creating it with cfg and obs (logging in)
// when there is none yet for this key.
func (c *Cache) Get(ctx context.Context, key string, cfg Config, obs Observer) (Client, error) {
	conn := connectionOf(key)
	superseded := func() error {
		return &Error{Op: "get client " + conn, Err: errSuperseded}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &Error{Op: "get client " + conn, Err: errCacheClosed}
	}
	if c.entries == nil {
		c.entries = map[string]*cacheEntry{}
	}
	e := c.entries[conn]
	if e != nil && e.key == key {
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, &Error{Op: "get client " + conn, Err: ctx.Err()}
		}
		if e.err != nil {
			// A failed login: its creator removed it; this caller waited
			// for it, so it gets the error rather than a second login.
			return nil, e.err
		}
		c.mu.Lock()
		current := c.entries[conn] == e
		c.mu.Unlock()
		if !current {
			return nil, superseded()
		}
		return e.client, nil
	}
	var old Client
	if e != nil {
		// An older (or newer: the cache cannot tell) version of this
		// connection: replaced.
		delete(c.entries, conn)
		old = readyClient(e)
	}
	e = &cacheEntry{key: key, ready: make(chan struct{})}
	c.entries[conn] = e
	c.mu.Unlock()
	closeClient(old)

	client, err := c.newClient(ctx, cfg, obs)

	c.mu.Lock()
	e.client, e.err = client, err
	close(e.ready)
	current := c.entries[conn] == e
	if err != nil && current {
		delete(c.entries, conn) // not cached: the next Get tries again
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !current {
		// Replaced by another key, forgotten or closed while logging in.
		// Not retried here: two keys of one connection would take turns
		// replacing each other. The caller retries with its current key.
		closeClient(client)
		return nil, superseded()
	}
	return client, nil
}

// Lookup returns the logged-in client of key, if there is one, without
// logging in: a caller that would have to read credentials to build a
// Config for Get asks first, and reads them only when this says no.
func (c *Cache) Lookup(key string) (Client, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[connectionOf(key)]
	if e == nil || e.key != key {
		return nil, false
	}
	select {
	case <-e.ready: // client and err are set under mu before ready closes
		return e.client, e.err == nil && e.client != nil
	default: // still logging in: the caller's Get will wait for it
		return nil, false
	}
}

func (c *Cache) newClient(ctx context.Context, cfg Config, obs Observer) (Client, error) {
	if c.New != nil {
		return c.New(ctx, cfg, obs)
	}
	return New(ctx, cfg, obs)
}

// Forget closes and drops the client of key's connection (key may be a bare
// connection name), e.g. when the VaultConnection is deleted.
func (c *Cache) Forget(key string) {
	conn := connectionOf(key)
	c.mu.Lock()
	var old Client
	if e := c.entries[conn]; e != nil {
		delete(c.entries, conn)
		old = readyClient(e)
	}
	c.mu.Unlock()
	closeClient(old)
}

// Len is the number of cached clients, logins in progress included.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Close closes every client; later Gets fail.
func (c *Cache) Close() error {
	c.mu.Lock()
	var old []Client
	for _, e := range c.entries {
		old = append(old, readyClient(e))
	}
	c.entries = nil
	c.closed = true
	c.mu.Unlock()
	for _, cl := range old {
		closeClient(cl)
	}
	return nil
}

// readyClient is the client of an entry that is being dropped, for the
// caller to close; nil while its login is in progress: that Get then sees
// the entry is no longer current and closes the client itself. Called with
// c.mu held (the Get sets the client and checks under the same lock, so
// exactly one of them closes it).
func readyClient(e *cacheEntry) Client {
	select {
	case <-e.ready:
		return e.client
	default:
		return nil
	}
}

func closeClient(cl Client) {
	if cl == nil {
		return
	}
	if closer, ok := cl.(io.Closer); ok {
		_ = closer.Close()
	}
}
