package vault_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// countingNew returns a vault.Cache.New that hands out Fakes and counts logins;
// fail makes the next logins fail.
type countingNew struct {
	logins  atomic.Int32
	fail    atomic.Int32
	delay   time.Duration
	mu      sync.Mutex
	clients []*vaulttest.Fake
}

func (n *countingNew) New(ctx context.Context, cfg vault.Config, obs vault.Observer) (vault.Client, error) {
	n.logins.Add(1)
	if n.delay > 0 {
		select {
		case <-time.After(n.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if n.fail.Add(-1) >= 0 {
		return nil, &vault.Error{Op: "login auth/approle/login", StatusCode: 400, Messages: []string{"invalid role or secret ID"}}
	}
	f := vaulttest.NewFake()
	n.mu.Lock()
	n.clients = append(n.clients, f)
	n.mu.Unlock()
	return f, nil
}

func TestCacheOneLoginPerKey(t *testing.T) {
	n := &countingNew{delay: 50 * time.Millisecond}
	c := &vault.Cache{New: n.New}
	defer c.Close()
	var wg sync.WaitGroup
	got := make([]vault.Client, 20)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := c.Get(context.Background(), "prod/1/100", vault.Config{}, nil)
			if err != nil {
				t.Error(err)
			}
			got[i] = cl
		}()
	}
	wg.Wait()
	if n.logins.Load() != 1 {
		t.Errorf("%d logins, want 1", n.logins.Load())
	}
	for _, cl := range got {
		if cl != got[0] {
			t.Fatal("different clients for one key")
		}
	}
	again, _ := c.Get(context.Background(), "prod/1/100", vault.Config{}, nil)
	if again != got[0] || n.logins.Load() != 1 {
		t.Error("a second Get logged in again")
	}
	// Another connection: its own client.
	other, _ := c.Get(context.Background(), "staging/1/7", vault.Config{}, nil)
	if other == got[0] || n.logins.Load() != 2 || c.Len() != 2 {
		t.Error("connections share a client")
	}
}

func TestCacheReplacesOnKeyChange(t *testing.T) {
	n := &countingNew{}
	c := &vault.Cache{New: n.New}
	ctx := context.Background()
	first, _ := c.Get(ctx, vault.CacheKey("prod", "1", "100"), vault.Config{}, nil)
	second, _ := c.Get(ctx, vault.CacheKey("prod", "2", "100"), vault.Config{}, nil)
	if first == second {
		t.Fatal("the key changed but the client did not")
	}
	if !first.(*vaulttest.Fake).Closed() || second.(*vaulttest.Fake).Closed() {
		t.Error("the old client was not closed, or the new one was")
	}
	if c.Len() != 1 {
		t.Errorf("Len %d, want 1", c.Len())
	}
	c.Forget("prod")
	if !second.(*vaulttest.Fake).Closed() || c.Len() != 0 {
		t.Error("Forget did not close the client")
	}
	third, _ := c.Get(ctx, vault.CacheKey("prod", "2", "100"), vault.Config{}, nil)
	if third == second || n.logins.Load() != 3 {
		t.Error("Get after Forget did not log in")
	}
	_ = c.Close()
	if !third.(*vaulttest.Fake).Closed() {
		t.Error("Close did not close the client")
	}
	if _, err := c.Get(ctx, "prod/3", vault.Config{}, nil); err == nil {
		t.Error("Get after Close worked")
	}
}

func TestCacheDoesNotKeepFailures(t *testing.T) {
	n := &countingNew{}
	n.fail.Store(1)
	c := &vault.Cache{New: n.New}
	defer c.Close()
	ctx := context.Background()
	_, err := c.Get(ctx, "prod/1", vault.Config{}, nil)
	var ve *vault.Error
	if !errors.As(err, &ve) || ve.StatusCode != 400 {
		t.Fatalf("err = %v", err)
	}
	if c.Len() != 0 {
		t.Error("the failure is cached")
	}
	cl, err := c.Get(ctx, "prod/1", vault.Config{}, nil)
	if err != nil || cl == nil || n.logins.Load() != 2 {
		t.Fatalf("retry: %v %v (%d logins)", cl, err, n.logins.Load())
	}
}

func TestCacheConcurrentFailureSharedOnce(t *testing.T) {
	n := &countingNew{delay: 50 * time.Millisecond}
	n.fail.Store(1)
	c := &vault.Cache{New: n.New}
	defer c.Close()
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Get(context.Background(), "prod/1", vault.Config{}, nil); err != nil {
				failures.Add(1)
			}
		}()
	}
	wg.Wait()
	// All that waited for the failed login got its error; any that came
	// after it tried again (and succeeded).
	if n.logins.Load() < 1 || failures.Load() < 1 || int(failures.Load())+int(n.logins.Load())-1 > 10 {
		t.Errorf("%d logins, %d failures", n.logins.Load(), failures.Load())
	}
	if _, err := c.Get(context.Background(), "prod/1", vault.Config{}, nil); err != nil {
		t.Errorf("after the failure: %v", err)
	}
}

func TestCacheWaiterHonoursContext(t *testing.T) {
	n := &countingNew{delay: 300 * time.Millisecond}
	c := &vault.Cache{New: n.New}
	defer c.Close()
	go func() { _, _ = c.Get(context.Background(), "prod/1", vault.Config{}, nil) }()
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Get(ctx, "prod/1", vault.Config{}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	if time.Since(start) > 200*time.Millisecond {
		t.Error("the waiter did not stop at its deadline")
	}
}

func TestCacheReplacedWhileLoggingIn(t *testing.T) {
	n := &countingNew{delay: 100 * time.Millisecond}
	c := &vault.Cache{New: n.New}
	defer c.Close()
	done := make(chan vault.Client)
	go func() {
		cl, err := c.Get(context.Background(), "prod/1", vault.Config{}, nil)
		if err == nil || !vault.Transient(err) {
			t.Errorf("stale Get: %v", err)
		}
		done <- cl
	}()
	time.Sleep(20 * time.Millisecond)
	newer, err := c.Get(context.Background(), "prod/2", vault.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	older := <-done
	// The stale Get logged in, saw its key was replaced, closed its client
	// and reports a transient error rather than replacing the newer key.
	if older != nil {
		t.Errorf("the stale Get returned a client")
	}
	again, err := c.Get(context.Background(), "prod/2", vault.Config{}, nil)
	if err != nil || again != newer || newer.(*vaulttest.Fake).Closed() {
		t.Errorf("the newer client was replaced: %v", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	open := 0
	for _, f := range n.clients {
		if !f.Closed() {
			open++
		}
	}
	if open != 1 || n.logins.Load() != 2 {
		t.Errorf("%d clients open after %d logins, want 1 after 2", open, n.logins.Load())
	}
	_ = newer
}

// Lookup answers only with a logged-in client of exactly that key, and
// never logs in: a failed or unfinished login, another version of the
// connection, or a forgotten one is a miss.
func TestCacheLookup(t *testing.T) {
	n := &countingNew{}
	n.fail.Store(1)
	c := &vault.Cache{New: n.New}
	defer c.Close()
	ctx := context.Background()
	key := vault.CacheKey("prod", "1", "100")
	if _, ok := c.Lookup(key); ok {
		t.Fatal("a hit in an empty cache")
	}
	if _, err := c.Get(ctx, key, vault.Config{}, nil); err == nil {
		t.Fatal("the first login should fail")
	}
	if _, ok := c.Lookup(key); ok {
		t.Fatal("a failed login is a hit")
	}
	cl, err := c.Get(ctx, key, vault.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Lookup(key); !ok || got != cl {
		t.Fatalf("Lookup = %v, %v; want the logged-in client", got, ok)
	}
	if _, ok := c.Lookup(vault.CacheKey("prod", "1", "101")); ok {
		t.Error("another version of the connection is a hit")
	}
	c.Forget("prod")
	if _, ok := c.Lookup(key); ok {
		t.Error("a forgotten connection is a hit")
	}
	if n.logins.Load() != 2 {
		t.Errorf("%d logins, want 2: Lookup logged in", n.logins.Load())
	}

	// While a login is under way, Lookup says no at once.
	slow := &countingNew{delay: time.Second}
	sc := &vault.Cache{New: slow.New}
	defer sc.Close()
	go func() { _, _ = sc.Get(ctx, key, vault.Config{}, nil) }()
	for slow.logins.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if _, ok := sc.Lookup(key); ok || time.Since(start) > 500*time.Millisecond {
		t.Errorf("Lookup during a login: hit %v after %s", ok, time.Since(start))
	}
}
