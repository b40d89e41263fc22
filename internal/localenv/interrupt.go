package localenv

import (
	"os"
	"os/signal"
	"syscall"
)

// OnInterrupt handles SIGINT and SIGTERM for a process that runs local
// servers (minionvault dev, a testenv TestMain) until the returned stop is
// called. The first signal calls graceful, which starts an orderly stop
// and returns true; any later signal calls kill, as does a first one that
// graceful declines (false: nothing to wait for). kill should end the
// process: a second Ctrl-C is the way out of a stop that hangs, so it must
// not wait for the first.
func OnInterrupt(graceful func(os.Signal) bool, kill func(os.Signal)) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		first := true
		for sig := range sigs {
			if first {
				first = false
				if graceful(sig) {
					continue
				}
			}
			kill(sig)
		}
	}()
	return func() { signal.Stop(sigs) }
}
