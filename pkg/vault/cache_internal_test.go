package vault

import (
	"context"
	"errors"
	"testing"
)

// The cache's tests that need the package's internals; the others, with
// the fake, are in cache_test.go (package vault_test).

func TestCacheKey(t *testing.T) {
	if k := CacheKey("vault-prod", "3", "12345", "678"); k != "vault-prod/3/12345/678" {
		t.Errorf("key %q", k)
	}
	if c := connectionOf(CacheKey("vault-prod", "3")); c != "vault-prod" {
		t.Errorf("connection %q", c)
	}
}

func TestCacheWithRealClient(t *testing.T) {
	m := newMockVault(t, nil)
	var c Cache
	defer c.Close()
	cl, err := c.Get(context.Background(), "prod/1", m.approleConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), "prod/1", m.approleConfig(), nil); err != nil {
		t.Fatal(err)
	}
	if n := m.count("", "auth/approle/login"); n != 1 {
		t.Errorf("%d logins", n)
	}
	c.Forget("prod/1")
	if _, err := cl.ServerInfo(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("forgotten client: %v", err)
	}
}
