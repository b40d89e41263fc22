package localenv

import (
	"errors"
	"fmt"
	"testing"
)

// A start is tried again only while its port was taken, and a few times at
// most.
func TestRetryWhilePortTaken(t *testing.T) {
	taken := fmt.Errorf("the manager stopped: listen tcp 127.0.0.1:44865: bind: address already in use")
	other := errors.New("no such binary")
	tests := []struct {
		name    string
		results []error // start's results, in order; nil from then on
		calls   int
		want    error
	}{
		{"starts at once", nil, 1, nil},
		{"taken once, by the kernel's message", []error{taken}, 2, nil},
		{"taken, by errAddrInUse", []error{fmt.Errorf("vault: %w", errAddrInUse)}, 2, nil},
		{"another failure is not retried", []error{other}, 1, other},
		{"taken every time", []error{taken, taken, taken, taken, taken, taken}, portAttempts, taken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := RetryWhilePortTaken(func() error {
				calls++
				if calls <= len(tt.results) {
					return tt.results[calls-1]
				}
				return nil
			})
			if calls != tt.calls || !errors.Is(err, tt.want) {
				t.Errorf("%d calls, %v; want %d, %v", calls, err, tt.calls, tt.want)
			}
		})
	}
}
