package connection

import (
	"slices"
	"testing"
	"time"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// A failing connection is checked again soon, then less often, never
// beyond maxRetry or its check interval; a pass starts over.
func TestRetryAfterBacksOff(t *testing.T) {
	c := &Connections{}
	fail := &vault.Error{Op: "read sys/health", StatusCode: 503}
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
}
