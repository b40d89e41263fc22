//go:build integration

package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// profiledServers are the servers whose CPU profiles the ratio's phases
// (the floors and the operator's phases that have one) take, in report
// order.
var profiledServers = []string{"apiserver", "vault"}

// etcdUpdates is how many updates of MinionBindings the API server has
// sent to etcd (its etcd_request_duration_seconds count): more than the
// patches when an update met a stale cached object and was tried again.
func (w *world) etcdUpdates(ctx context.Context) (float64, error) {
	raw, err := w.apiserver.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("the API server's metrics: %w", err)
	}
	m, err := parseMetrics(bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	return m.sum("etcd_request_duration_seconds_count", `operation="update"`, `resource="minionbindings"`), nil
}

// serverProfile is one server's CPU profile over a phase.
type serverProfile struct {
	Server, Path, Top string
}

// serverProfilers returns, per server label, how to take a CPU profile of
// it: the kube-apiserver's /debug/pprof as the admin, Vault's sys/pprof
// with the root token. They show where the servers' CPU goes for the
// operator and for the floor, which the per-process CPU only totals.
func (w *world) serverProfilers() map[string]func(seconds int) ([]byte, error) {
	apiserver := func(seconds int) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds+30)*time.Second)
		defer cancel()
		return w.apiserver.Get().AbsPath("/debug/pprof/profile").Param("seconds", fmt.Sprint(seconds)).DoRaw(ctx)
	}
	vault := func(seconds int) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds+30)*time.Second)
		defer cancel()
		req := w.root.NewRequest(http.MethodGet, "/v1/sys/pprof/profile")
		req.Params.Set("seconds", fmt.Sprint(seconds))
		resp, err := w.root.RawRequestWithContext(ctx, req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	return map[string]func(int) ([]byte, error){"apiserver": apiserver, "vault": vault}
}
