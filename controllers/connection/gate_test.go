package connection

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A connection whose token is refused is checked again soon, then less
// often, never beyond maxRetry or its check interval; a pass starts over.
// One whose Vault does not answer, is sealed or fails (an election) is
// checked every minRetry, never beyond its check interval.
func TestRetryAfterBacksOff(t *testing.T) {
	c := &Connections{}
	fail := &vault.Error{Op: "login auth/token/lookup-self", StatusCode: 403, Messages: []string{"permission denied"}}
	var got []time.Duration
	for range 7 {
		c.record("v", "k", time.Now(), fail)
		got = append(got, c.retryAfter("v", time.Minute))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, maxRetry, maxRetry, maxRetry, maxRetry}
	if !slices.Equal(got, want) {
		t.Errorf("retries %v, want %v", got, want)
	}
	if d := c.retryAfter("v", 3*time.Second); d != 3*time.Second {
		t.Errorf("with a 3s check interval: %v", d)
	}
	c.record("v", "k", time.Now(), nil)
	c.record("v", "k", time.Now(), fail)
	if d := c.retryAfter("v", time.Minute); d != 2*time.Second {
		t.Errorf("after a pass: %v", d)
	}

	for _, unavailable := range []error{
		&vault.Error{Op: "read sys/health", StatusCode: 503, Messages: []string{"Vault is sealed"}},
		&vault.Error{Op: "login auth/token/lookup-self", StatusCode: 500, Messages: []string{"local node not active but active cluster node not found"}},
		&vault.Error{Op: "login auth/token/lookup-self", Err: errors.New("dial tcp 127.0.0.1:8200: connect: connection refused")},
	} {
		c := &Connections{}
		got = nil
		for range fastRetries + 3 {
			c.record("v", "k", time.Now(), unavailable)
			got = append(got, c.retryAfter("v", time.Minute))
		}
		want := slices.Repeat([]time.Duration{minRetry}, fastRetries)
		want = append(want, maxRetry, maxRetry, maxRetry)
		if !slices.Equal(got, want) {
			t.Errorf("%v: retries %v, want every %s %d times, then every %s", unavailable, got, minRetry, fastRetries, maxRetry)
		}
		if fastRetries*minRetry < 30*time.Second {
			t.Errorf("fast checks for %s only: a raft election with its retries takes up to 14 s in the HA suite", fastRetries*minRetry)
		}
		if d := c.retryAfter("v", time.Second); d != time.Second {
			t.Errorf("%v, with a 1s check interval: %v", unavailable, d)
		}
	}
}
