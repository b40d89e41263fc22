package vault

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestUnreadableAnswersAreTransient: an answer that arrives but cannot be
// decoded (cut short by a proxy, or not JSON) is retried with backoff,
// never taken for refused input, whatever the call and its status.
func TestUnreadableAnswersAreTransient(t *testing.T) {
	noBackoff(t)
	const entity = `{"data":{"id":"e-1","name":"salt_minion_web01","metadata":{"roles":"web"}}}`
	bodies := []struct {
		name string
		body string
	}{
		{"cut mid-object", entity[:len(entity)/2]},
		{"cut after the first byte", entity[:1]},
		{"cut before the last brace", entity[:len(entity)-1]},
		{"empty", ""},
		{"not JSON", "<html>gateway</html>"},
	}
	calls := []struct {
		name string
		call func(ctx context.Context, c Client) error
	}{
		{"read role", func(ctx context.Context, c Client) error {
			_, err := c.ReadRole(ctx, "salt-minions", "web01")
			return err
		}},
		{"read entity", func(ctx context.Context, c Client) error {
			_, err := c.ReadEntityByName(ctx, "salt_minion_web01")
			return err
		}},
		{"create entity", func(ctx context.Context, c Client) error {
			_, err := c.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{"roles": "web"})
			return err
		}},
		{"create alias", func(ctx context.Context, c Client) error {
			_, err := c.CreateEntityAlias(ctx, "role-id", "auth_approle_1", "e-1")
			return err
		}},
		{"list policies", func(ctx context.Context, c Client) error { _, err := c.ListPolicies(ctx); return err }},
	}
	for _, b := range bodies {
		t.Run(b.name, func(t *testing.T) {
			var answered atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path == "/v1/auth/token/lookup-self" {
					_, _ = w.Write([]byte(`{"data":{"ttl":3600,"creation_ttl":3600,"renewable":false}}`))
					return
				}
				answered.Add(1)
				_, _ = w.Write([]byte(b.body))
			}))
			t.Cleanup(srv.Close)
			c := mustNew(t, Config{Address: srv.URL, Auth: Auth{Token: "s.static"}}, nil)
			for _, tc := range calls {
				err := tc.call(context.Background(), c)
				if !errors.Is(err, ErrIncompleteResponse) {
					t.Fatalf("%s: err = %v, want ErrIncompleteResponse", tc.name, err)
				}
				if !Transient(err) || Classify(err) != ClassTransient || errors.Is(err, ErrInvalid) {
					t.Errorf("%s: %v: transient %v, class %s, want transient", tc.name, err, Transient(err), Classify(err))
				}
				var ve *Error
				if !errors.As(err, &ve) || ve.StatusCode != http.StatusOK || !strings.Contains(err.Error(), "decoding the response") {
					t.Errorf("%s: error %q keeps neither the status nor the cause", tc.name, err)
				}
			}
			// Reads are retried at once like any transient error, writes
			// are not (a cut answer does not say whether Vault did it).
			if want := int64(3*3 + 2*1); answered.Load() != want {
				t.Errorf("%d requests answered, want %d (3 reads × 3 tries, 2 writes once)", answered.Load(), want)
			}
		})
	}
}

// TestReadRetriedAfterCutAnswer: a read whose first answer was cut short
// succeeds on the retry, without the caller seeing the first.
func TestReadRetriedAfterCutAnswer(t *testing.T) {
	noBackoff(t)
	const policy = `{"data":{"name":"p","policy":"path \"x\" { capabilities = [\"read\"] }"}}`
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/auth/token/lookup-self" {
			_, _ = w.Write([]byte(`{"data":{"ttl":3600,"creation_ttl":3600}}`))
			return
		}
		if n.Add(1) == 1 {
			_, _ = w.Write([]byte(policy[:20]))
			return
		}
		_, _ = w.Write([]byte(policy))
	}))
	t.Cleanup(srv.Close)
	c := mustNew(t, Config{Address: srv.URL, Auth: Auth{Token: "s.static"}}, nil)
	hcl, found, err := c.ReadPolicy(context.Background(), "p")
	if err != nil || !found || !strings.Contains(hcl, `path "x"`) {
		t.Fatalf("ReadPolicy = %q, %v, %v after one cut answer", hcl, found, err)
	}
	if n.Load() != 2 {
		t.Errorf("%d requests, want 2", n.Load())
	}
}
