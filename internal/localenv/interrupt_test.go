package localenv

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// The first signal stops gracefully and every later one kills; a first
// signal that graceful declines kills at once.
func TestOnInterrupt(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait bool     // what graceful answers
		want []string // the calls each signal makes: g graceful, k kill
	}{
		{"one signal", true, []string{"g"}},
		{"a second signal kills", true, []string{"g", "k"}},
		{"a third kills again", true, []string{"g", "k", "k"}},
		{"nothing to wait for", false, []string{"gk"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make(chan byte, 8)
			stop := OnInterrupt(func(os.Signal) bool { calls <- 'g'; return tc.wait },
				func(os.Signal) { calls <- 'k' })
			defer stop()
			for i, want := range tc.want {
				// One signal at a time: two pending ones may merge.
				if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if got := readCalls(t, calls, len(want)); got != want {
					t.Fatalf("signal %d: calls %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

func readCalls(t *testing.T, calls <-chan byte, n int) string {
	t.Helper()
	var out []byte
	for len(out) < n {
		select {
		case c := <-calls:
			out = append(out, c)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d calls after 10 s, want %d", len(out), n)
		}
	}
	return string(out)
}
