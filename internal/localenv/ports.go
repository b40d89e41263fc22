package localenv

import (
	"errors"
	"net"
	"strings"
)

// portAttempts bounds how often a server is started again on another port.
const portAttempts = 5

// errAddrInUse marks a start that failed because its port was taken.
var errAddrInUse = errors.New("address already in use")

// FreePort returns a port on 127.0.0.1 that nothing listens on now. It is
// free only until someone binds it, and any client connection can get it
// as its ephemeral port: start what binds it inside RetryWhilePortTaken.
func FreePort() (int, error) { return freePortOn("127.0.0.1") }

func freePortOn(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RetryWhilePortTaken calls start, which picks its ports with FreePort,
// again while it fails because a port was taken between the pick and the
// bind (errAddrInUse, or the kernel's message in its error), a few times
// at most; it returns start's last error.
func RetryWhilePortTaken(start func() error) error {
	var err error
	for range portAttempts {
		if err = start(); err == nil || !portTaken(err) {
			return err
		}
	}
	return err
}

func portTaken(err error) bool {
	return errors.Is(err, errAddrInUse) || strings.Contains(err.Error(), "address already in use")
}
