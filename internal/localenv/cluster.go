package localenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// Cluster is a Vault HA cluster on integrated storage (raft) on loopback,
// as users run Vault in production behind a load balancer: Nodes servers
// of the same vault binary, each with its own folder, raft data, log and
// ports (non-dev servers: storage "raft", api_addr and cluster_addr,
// disable_mlock, listeners without TLS). StartCluster initialises the
// first node (one key share, threshold 1), unseals it, joins the others to
// it (sys/storage/raft/join, then unseal) and waits until autopilot has
// made every node a voter, so that the cluster survives the loss of one
// node from the start.
//
// Tests then disturb it: Kill SIGKILLs a node (a crash: no step-down, no
// lease released), Restart starts a node's process again on its folder
// (it comes back sealed, as a restarted Vault does; Unseal it, or leave it
// sealed a while), StepDown asks the active node to step down (`vault
// operator step-down`). Active and WaitActive say which node is active.
//
// Proxy is the cluster's active-following address: a loopback TCP proxy
// that sends every new connection to whichever node is active now, as a
// Kubernetes Service selecting vault-active=true does (Vault's service
// registration labels the active pod). Env.Vault.Addr is that address.
type Cluster struct {
	// Nodes are the servers, in the order they were started; Nodes[i].Index is i.
	Nodes []*ClusterNode
	// RootToken is the root token from the initialisation, UnsealKey the
	// one unseal key (one share, threshold 1).
	RootToken, UnsealKey string
	// ClusterID is Vault's cluster ID (sys/seal-status of an unsealed node).
	ClusterID string
	// Proxy follows the active node.
	Proxy *ActiveProxy

	bin     string
	opts    ClusterOptions
	timeout time.Duration
	wd      *watchdog
	hc      *http.Client
}

// ClusterOptions shape a Cluster.
type ClusterOptions struct {
	// Nodes is the number of servers (Options.VaultNodes).
	Nodes int
	// PerformanceMultiplier is raft's performance_multiplier: 0 leaves
	// Vault's default (5: leader elections take several seconds), 1 is the
	// fastest timing, which Vault recommends for production on good hardware.
	PerformanceMultiplier int
	// StabilizationTime is autopilot's server_stabilization_time, how long
	// a joined node must be healthy before it becomes a voter. Default 2 s
	// (Vault's is 10 s): the cluster is ready sooner.
	StabilizationTime time.Duration
	// ProxyPoll is how often the active-following proxy asks every node's
	// sys/health. Default 200 ms.
	ProxyPoll time.Duration
}

// ClusterNode is one server of a Cluster.
type ClusterNode struct {
	Index int
	// ID is the raft node ID (vault-0, vault-1, ...).
	ID string
	// Addr is its API address (http://127.0.0.1:port), ClusterAddr its
	// cluster (request forwarding and raft) address.
	Addr, ClusterAddr string
	// Dir is its folder: config.hcl, raft data (data/) and whatever it
	// writes relative to its working directory (a file audit device with
	// a relative file_path).
	Dir string
	// Log is its server log (appended to across restarts).
	Log string

	host         string
	port, cport  int
	mu           sync.Mutex
	cmd          *exec.Cmd
	exited       chan struct{}
	starts       int
	lastKilledAt time.Time
}

// NodeState is what a node's sys/health says of it.
type NodeState string

const (
	NodeActive  NodeState = "active"
	NodeStandby NodeState = "standby"
	NodeSealed  NodeState = "sealed"
	// NodeUninitialised: not initialised (501), a node not joined yet.
	NodeUninitialised NodeState = "uninitialised"
	// NodeDown: nothing answers (the process is dead, or not listening yet).
	NodeDown NodeState = "down"
	// NodeUnknown: another answer (a performance standby, a DR secondary).
	NodeUnknown NodeState = "unknown"
)

// healthState reads sys/health's status code as Vault documents it.
func healthState(code int) NodeState {
	switch code {
	case http.StatusOK:
		return NodeActive
	case http.StatusTooManyRequests:
		return NodeStandby
	case http.StatusServiceUnavailable:
		return NodeSealed
	case http.StatusNotImplemented:
		return NodeUninitialised
	case 0:
		return NodeDown
	}
	return NodeUnknown
}

// startCluster starts, initialises, unseals and joins a cluster in dir.
func startCluster(ctx context.Context, dir, toolsDir, host string, opts ClusterOptions, timeout time.Duration, wd *watchdog, getenv func(string) string) (*Vault, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	if opts.Nodes < 2 {
		return nil, fmt.Errorf("localenv: a Vault cluster needs at least 2 nodes, not %d", opts.Nodes)
	}
	if opts.StabilizationTime == 0 {
		opts.StabilizationTime = 2 * time.Second
	}
	if opts.ProxyPoll == 0 {
		opts.ProxyPoll = 200 * time.Millisecond
	}
	bin, err := vaultBinary(toolsDir, getenv)
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, opts: opts, timeout: timeout, wd: wd, hc: &http.Client{Timeout: 5 * time.Second}}
	ok := false
	defer func() {
		if !ok {
			c.stop()
		}
	}()
	for i := range opts.Nodes {
		n := &ClusterNode{Index: i, ID: fmt.Sprintf("vault-%d", i), Dir: filepath.Join(dir, fmt.Sprintf("vault-%d", i)), host: host}
		if err := os.MkdirAll(filepath.Join(n.Dir, "data"), 0o700); err != nil {
			return nil, err
		}
		n.Log = filepath.Join(n.Dir, "vault.log")
		c.Nodes = append(c.Nodes, n)
		// The ports are the node's for good (its peers know them): picked
		// again only while this first start finds one taken.
		err := RetryWhilePortTaken(func() error {
			var err error
			if n.port, err = freePortOn(host); err != nil {
				return err
			}
			if n.cport, err = freePortOn(host); err != nil {
				return err
			}
			n.Addr = "http://" + net.JoinHostPort(host, strconv.Itoa(n.port))
			n.ClusterAddr = "https://" + net.JoinHostPort(host, strconv.Itoa(n.cport))
			return c.launch(ctx, n)
		})
		if err != nil {
			return nil, err
		}
	}
	if err := c.initialise(ctx); err != nil {
		return nil, err
	}
	for _, n := range c.Nodes[1:] {
		if err := c.join(ctx, n); err != nil {
			return nil, err
		}
	}
	if err := c.waitVoters(ctx, timeout); err != nil {
		return nil, err
	}
	p, err := newActiveProxy(host, c, opts.ProxyPoll)
	if err != nil {
		return nil, err
	}
	c.Proxy = p
	if _, err := p.WaitActive(ctx, timeout); err != nil {
		return nil, err
	}
	v := &Vault{Addr: p.URL, RootToken: c.RootToken, Log: c.Nodes[0].Log, Cluster: c}
	if err := v.connect(ctx); err != nil {
		return nil, fmt.Errorf("%w%s", err, c.tails())
	}
	// What a dev server has besides: KV version 2 at secret/.
	if err := v.Client.Sys().MountWithContext(ctx, "secret", &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		return nil, fmt.Errorf("localenv: mounting kv-v2 at secret/: %w", err)
	}
	ok = true
	return v, nil
}

// config is the node's server configuration.
func (c *Cluster) config(n *ClusterNode) string {
	pm := ""
	if c.opts.PerformanceMultiplier > 0 {
		pm = fmt.Sprintf("\n  performance_multiplier = %d", c.opts.PerformanceMultiplier)
	}
	return fmt.Sprintf(`storage "raft" {
  path    = %q
  node_id = %q%s
}
listener "tcp" {
  address         = %q
  cluster_address = %q
  tls_disable     = true
}
api_addr      = %q
cluster_addr  = %q
disable_mlock = true
ui            = false
log_level     = "info"
`, filepath.Join(n.Dir, "data"), n.ID, pm, net.JoinHostPort(n.host, strconv.Itoa(n.port)), net.JoinHostPort(n.host, strconv.Itoa(n.cport)),
		n.Addr, n.ClusterAddr)
}

// launch starts n's process and waits until its API answers (sealed or
// not); a port found taken is errAddrInUse.
func (c *Cluster) launch(ctx context.Context, n *ClusterNode) error {
	cfg := filepath.Join(n.Dir, "config.hcl")
	if err := os.WriteFile(cfg, []byte(c.config(n)), 0o600); err != nil {
		return err
	}
	logFile, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	mark, _ := logFile.Seek(0, io.SeekEnd)
	fmt.Fprintf(logFile, "=== localenv: start %d of %s at %s\n", n.starts+1, n.ID, time.Now().Format(time.RFC3339Nano))
	home := filepath.Join(n.Dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	// In the node's folder, where a relative audit file_path lands.
	cmd, exited, err := startServer(c.bin, n.Dir, home, logFile, c.wd, "server", "-config="+cfg)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.starts++
	n.mu.Unlock()

	err = c.poll(ctx, c.timeout, func() (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("vault exited: %v", cmd.ProcessState)
		default:
		}
		return c.Health(ctx, n.Index) != NodeDown, nil
	})
	if err != nil {
		_ = n.kill()
		log, _ := os.ReadFile(n.Log)
		if int64(len(log)) > mark && bytes.Contains(log[mark:], []byte("address already in use")) {
			return fmt.Errorf("localenv: vault %s: %w", n.ID, errAddrInUse)
		}
		return fmt.Errorf("localenv: vault %s on %s: %w%s", n.ID, n.Addr, err, tails(n.Log))
	}
	return nil
}

// initialise initialises the first node and unseals it.
func (c *Cluster) initialise(ctx context.Context) error {
	n := c.Nodes[0]
	var out struct {
		Keys      []string `json:"keys"`
		RootToken string   `json:"root_token"`
	}
	if err := c.call(ctx, n, http.MethodPut, "sys/init", "", map[string]any{"secret_shares": 1, "secret_threshold": 1}, &out); err != nil {
		return fmt.Errorf("localenv: initialising %s: %w", n.ID, err)
	}
	if len(out.Keys) != 1 || out.RootToken == "" {
		return fmt.Errorf("localenv: initialising %s: %d keys, root token %t", n.ID, len(out.Keys), out.RootToken != "")
	}
	c.UnsealKey, c.RootToken = out.Keys[0], out.RootToken
	if err := c.Unseal(ctx, 0); err != nil {
		return err
	}
	if err := c.poll(ctx, c.timeout, func() (bool, error) { return c.Health(ctx, 0) == NodeActive, nil }); err != nil {
		return fmt.Errorf("localenv: %s not active after its initialisation: %w%s", n.ID, err, tails(n.Log))
	}
	// Joined nodes become voters after this much health (Vault: 10 s).
	stab := map[string]any{"server_stabilization_time": c.opts.StabilizationTime.String()}
	if err := c.call(ctx, n, http.MethodPost, "sys/storage/raft/autopilot/configuration", c.RootToken, stab, nil); err != nil {
		return fmt.Errorf("localenv: autopilot configuration: %w", err)
	}
	var st struct {
		ClusterID string `json:"cluster_id"`
	}
	if err := c.call(ctx, n, http.MethodGet, "sys/seal-status", "", nil, &st); err != nil {
		return err
	}
	c.ClusterID = st.ClusterID
	return nil
}

// join joins n to the cluster through the first node and unseals it.
func (c *Cluster) join(ctx context.Context, n *ClusterNode) error {
	var out struct {
		Joined bool `json:"joined"`
	}
	if err := c.call(ctx, n, http.MethodPut, "sys/storage/raft/join", "", map[string]any{"leader_api_addr": c.Nodes[0].Addr}, &out); err != nil {
		return fmt.Errorf("localenv: joining %s: %w", n.ID, err)
	}
	if !out.Joined {
		return fmt.Errorf("localenv: joining %s: not joined%s", n.ID, tails(n.Log))
	}
	// The join completes with the unseal (the node answers the leader's
	// challenge with the keyring it decrypts).
	if err := c.Unseal(ctx, n.Index); err != nil {
		return err
	}
	return c.poll(ctx, c.timeout, func() (bool, error) { return c.Health(ctx, n.Index) == NodeStandby, nil })
}

// waitVoters waits until raft's configuration has every node as a voter
// and autopilot calls the cluster healthy: from then on it tolerates the
// loss of a node.
func (c *Cluster) waitVoters(ctx context.Context, timeout time.Duration) error {
	var last string
	err := c.poll(ctx, timeout, func() (bool, error) {
		var st struct {
			Data struct {
				Healthy          bool `json:"healthy"`
				FailureTolerance int  `json:"failure_tolerance"`
				Servers          map[string]struct {
					Status string `json:"status"`
				} `json:"servers"`
			} `json:"data"`
		}
		a, err := c.Active(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if err := c.call(ctx, c.Nodes[a], http.MethodGet, "sys/storage/raft/autopilot/state", c.RootToken, nil, &st); err != nil {
			last = err.Error()
			return false, nil
		}
		voters := 0
		for _, s := range st.Data.Servers {
			if s.Status == "voter" || s.Status == "leader" {
				voters++
			}
		}
		last = fmt.Sprintf("%d of %d voters, healthy %t, failure tolerance %d", voters, len(c.Nodes), st.Data.Healthy, st.Data.FailureTolerance)
		return voters == len(c.Nodes) && st.Data.Healthy && st.Data.FailureTolerance >= (len(c.Nodes)-1)/2, nil
	})
	if err != nil {
		return fmt.Errorf("localenv: raft cluster not healthy (%s): %w%s", last, err, c.tails())
	}
	return nil
}

// WaitHealthy waits until every node is unsealed, one is active and
// autopilot has every node as a healthy voter: the cluster tolerates the
// loss of a node again (after a restart, before the next disturbance).
func (c *Cluster) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	return c.waitVoters(ctx, timeout)
}

// Health is what node i's sys/health says (NodeDown when nothing answers).
func (c *Cluster) Health(ctx context.Context, i int) NodeState {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return healthOf(ctx, c.hc, c.Nodes[i].Addr)
}

func healthOf(ctx context.Context, hc *http.Client, addr string) NodeState {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/sys/health", nil)
	if err != nil {
		return NodeDown
	}
	resp, err := hc.Do(req)
	if err != nil {
		return NodeDown
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return healthState(resp.StatusCode)
}

// States is every node's state, by index.
func (c *Cluster) States(ctx context.Context) []NodeState {
	out := make([]NodeState, len(c.Nodes))
	var wg sync.WaitGroup
	for i := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = c.Health(ctx, i)
		}()
	}
	wg.Wait()
	return out
}

// Active is the index of the node that reports itself active; an error
// when none does (an election under way, or no quorum).
func (c *Cluster) Active(ctx context.Context) (int, error) {
	states := c.States(ctx)
	for i, s := range states {
		if s == NodeActive {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no active node: %v", states)
}

// Standby is the index of a node that reports itself an unsealed standby.
func (c *Cluster) Standby(ctx context.Context) (int, error) {
	states := c.States(ctx)
	for i, s := range states {
		if s == NodeStandby {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no standby node: %v", states)
}

// WaitActive waits until a node other than those in except reports
// itself active, polling every 20 ms, and returns it and when it was seen.
func (c *Cluster) WaitActive(ctx context.Context, timeout time.Duration, except ...int) (int, time.Time, error) {
	active := -1
	var at time.Time
	err := c.pollEvery(ctx, 20*time.Millisecond, timeout, func() (bool, error) {
		for i, s := range c.States(ctx) {
			if s == NodeActive && !contains(except, i) {
				active, at = i, time.Now()
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return -1, at, fmt.Errorf("no new active node (not %v) after %s: %v: %w", except, timeout, c.States(ctx), err)
	}
	return active, at, nil
}

func contains(l []int, i int) bool {
	for _, x := range l {
		if x == i {
			return true
		}
	}
	return false
}

// Kill SIGKILLs node i's process group and waits until it is gone: a
// crash, with no step-down and nothing flushed. It returns when the signal
// was sent.
func (c *Cluster) Kill(i int) (time.Time, error) {
	return c.Nodes[i].killedAt()
}

// Running reports whether node i's process runs.
func (c *Cluster) Running(i int) bool {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Restart starts node i's process again on its folder, ports and raft
// data, after a Kill (or kills it first). It comes back sealed, as a
// restarted Vault does: with unseal the node is then unsealed and waited
// for as a standby (or active); without, it stays sealed until Unseal.
func (c *Cluster) Restart(ctx context.Context, i int, unseal bool) error {
	n := c.Nodes[i]
	if c.Running(i) {
		if _, err := n.killedAt(); err != nil {
			return err
		}
	}
	// The ports are the node's (its peers and the proxy know them): one
	// just freed may be in TIME_WAIT or taken by a client's ephemeral port.
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = c.launch(ctx, n); err == nil || !errors.Is(err, errAddrInUse) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return err
	}
	if st := c.Health(ctx, i); st != NodeSealed {
		return fmt.Errorf("localenv: %s restarted %s, not sealed", n.ID, st)
	}
	if !unseal {
		return nil
	}
	return c.Unseal(ctx, i)
}

// Unseal unseals node i with the unseal key and waits until it answers
// unsealed (active or standby).
func (c *Cluster) Unseal(ctx context.Context, i int) error {
	n := c.Nodes[i]
	// A joining node answers still sealed: it unseals once the leader
	// has answered its challenge.
	if err := c.call(ctx, n, http.MethodPut, "sys/unseal", "", map[string]any{"key": c.UnsealKey}, nil); err != nil {
		return fmt.Errorf("localenv: unsealing %s: %w", n.ID, err)
	}
	err := c.poll(ctx, c.timeout, func() (bool, error) {
		st := c.Health(ctx, i)
		return st == NodeActive || st == NodeStandby, nil
	})
	if err != nil {
		return fmt.Errorf("localenv: %s unsealed but neither active nor standby (%s): %w%s", n.ID, c.Health(ctx, i), err, tails(n.Log))
	}
	return nil
}

// StepDown asks the active node to step down (sys/step-down, as `vault
// operator step-down`): it gives up being active and another node takes
// over. It returns the node that stepped down and when the request was
// answered.
func (c *Cluster) StepDown(ctx context.Context) (int, time.Time, error) {
	a, err := c.Active(ctx)
	if err != nil {
		return -1, time.Time{}, err
	}
	if err := c.call(ctx, c.Nodes[a], http.MethodPut, "sys/step-down", c.RootToken, nil, nil); err != nil {
		return a, time.Time{}, fmt.Errorf("localenv: step-down of %s: %w", c.Nodes[a].ID, err)
	}
	return a, time.Now(), nil
}

// Client is a root client of node i's own address (not the proxy's).
func (c *Cluster) Client(i int) (*vaultapi.Client, error) {
	cfg := vaultapi.DefaultConfig()
	if cfg.Error != nil {
		return nil, cfg.Error
	}
	cfg.Address = c.Nodes[i].Addr
	cl, err := vaultapi.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	cl.SetToken(c.RootToken)
	cl.ClearNamespace()
	return cl, nil
}

// AuditLogs are the paths node by node of a file audit device enabled with
// the relative file_path name: audit devices are replicated configuration,
// and every node writes its own file in its folder (the active node the
// requests it handles, whether sent to it or forwarded by a standby).
func (c *Cluster) AuditLogs(name string) []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = filepath.Join(n.Dir, name)
	}
	return out
}

// call sends one request to node n's own address; out (may be nil)
// receives the JSON answer.
func (c *Cluster) call(ctx context.Context, n *ClusterNode, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, n.Addr+"/v1/"+path, rd)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("X-Vault-Token", token)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (c *Cluster) poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	return c.pollEvery(ctx, 50*time.Millisecond, timeout, f)
}

func (c *Cluster) pollEvery(ctx context.Context, every, timeout time.Duration, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := f()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// tails is the end of every node's log, for errors.
func (c *Cluster) tails() string {
	var logs []string
	for _, n := range c.Nodes {
		logs = append(logs, n.Log)
	}
	return tails(logs...)
}

// stop ends the proxy and every node: SIGTERM (a graceful shutdown), SIGKILL
// after 10 s.
func (c *Cluster) stop() {
	if c == nil {
		return
	}
	if c.Proxy != nil {
		c.Proxy.Close()
	}
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.stop()
		}()
	}
	wg.Wait()
}

func (n *ClusterNode) killedAt() (time.Time, error) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return time.Time{}, fmt.Errorf("localenv: %s was never started", n.ID)
	}
	at := time.Now()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return at, fmt.Errorf("localenv: killing %s: %w", n.ID, err)
	}
	<-exited
	n.mu.Lock()
	n.lastKilledAt = at
	n.mu.Unlock()
	return at, nil
}

func (n *ClusterNode) kill() error {
	_, err := n.killedAt()
	return err
}

func (n *ClusterNode) stop() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	select {
	case <-exited:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
