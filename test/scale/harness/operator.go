//go:build integration

package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

// operatorProc runs `minionvault operator` as its own process, with its
// own kubeconfig (its own Kubernetes user), and keeps what the instances
// that already exited used: CPU, peak RSS and metrics, so that a phase
// that restarts it still adds up.
type operatorProc struct {
	// label names its logs (<label>-<instance>.log): "operator", or
	// "standby" for the failover's second instance.
	label                string
	bin, kubeconfig, dir string
	concurrency          int
	env                  *localenv.Env
	// cgroupProcs, when set, is the cgroup.procs file of the memory cgroup
	// the operator runs in; else GOMEMLIMIT is softLimit, the run's
	// operatorSoftLimit.
	cgroupProcs string
	softLimit   int64
	// extraArgs are flags added at the next start (the sweep phase's
	// interval).
	extraArgs []string

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	instance int
	metrics  string // URL of /metrics
	pprof    string // base URL of /debug/pprof
	logPath  string

	pastCPU     float64 // seconds used by instances that exited
	pastPeakKiB int64
	pastMetrics samples // the last scrape of each instance that exited
}

// start starts a new instance and waits until /healthz answers; on other
// ports when one was taken before the operator bound it.
func (o *operatorProc) start(ctx context.Context) error {
	return localenv.RetryWhilePortTaken(func() error { return o.startOnce(ctx) })
}

func (o *operatorProc) startOnce(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd != nil {
		return errors.New("operator already running")
	}
	var ports [3]int
	for i := range ports {
		p, err := localenv.FreePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	o.instance++
	o.logPath = filepath.Join(o.dir, fmt.Sprintf("%s-%d.log", o.label, o.instance))
	logFile, err := os.Create(o.logPath)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	addr := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	args := []string{o.bin, "operator",
		"--metrics-bind-address=" + addr(ports[0]),
		"--health-probe-bind-address=" + addr(ports[1]),
		"--pprof-bind-address=" + addr(ports[2]),
		"--concurrency=" + strconv.Itoa(o.concurrency),
		// As two replicas would run: the failover phase starts a second
		// instance. The timing flags are left at their defaults
		// (leaseDuration, leaseRetry), which a previous release has too.
		"--leader-elect",
		"--leader-election-namespace=" + operatorNamespace,
		"--leader-election-id=" + leaseName,
	}
	args = append(args, o.extraArgs...)
	// POD_NAMESPACE: where the operator reads Secrets (--secret-namespace's
	// default, as in its Deployment); a previous release ignores it.
	env := append(cleanEnv(), "KUBECONFIG="+o.kubeconfig, "POD_NAMESPACE="+operatorNamespace)
	if o.cgroupProcs != "" {
		// Into the cgroup before the operator starts (same PID after exec),
		// so that it finds the limit as in a container.
		args = append([]string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, o.cgroupProcs}, args...)
	} else {
		env = append(env, fmt.Sprintf("GOMEMLIMIT=%d", o.softLimit))
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = o.dir
	// Its own process group, which the environment adopts: the watchdog
	// kills it should the harness die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", o.bin, err)
	}
	o.env.Adopt(cmd.Process.Pid)
	o.cmd = cmd
	o.exited = make(chan struct{})
	exited := o.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	o.metrics = "http://" + addr(ports[0]) + "/metrics"
	o.pprof = "http://" + addr(ports[2]) + "/debug/pprof"
	health := "http://" + addr(ports[1]) + "/healthz"

	// The manager starts its health, metrics and pprof servers in goroutines
	// of their own: /healthz answering says nothing of /metrics, which every
	// phase scrapes from its first poll (a restart once polled it in the
	// moment between the two and failed on "connection refused").
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := get(health, 5*time.Second); err == nil {
			if _, err := get(o.metrics, 5*time.Second); err == nil {
				return nil
			}
		}
		select {
		case <-exited:
			o.cmd = nil
			return fmt.Errorf("operator exited at start: %v%s", cmd.ProcessState, tail(o.logPath))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("operator not healthy after 60 s%s", tail(o.logPath))
		}
	}
}

// cleanEnv is the harness's environment without what would point the
// operator elsewhere.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "VAULT_") || strings.HasPrefix(kv, "GOMEMLIMIT=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// stop scrapes the instance's metrics one last time, then SIGTERM, and
// SIGKILL after 30 s; it adds the instance's CPU and peak RSS (from its
// rusage) to the past.
func (o *operatorProc) stop(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		return nil
	}
	last, scrapeErr := scrape(ctx, o.metrics)
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
		<-o.exited
	}
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL) // anything left in its group
	o.exitedLocked(last)
	if scrapeErr != nil {
		return fmt.Errorf("last scrape before stopping: %w", scrapeErr)
	}
	return nil
}

// kill scrapes the instance's metrics one last time, then SIGKILLs its
// process group, as a node failure would: it releases no lease and
// flushes nothing. It adds the instance's CPU and peak RSS to the past,
// and returns when the signal was sent.
func (o *operatorProc) kill(ctx context.Context) (time.Time, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		return time.Time{}, errors.New("operator not running")
	}
	last, scrapeErr := scrape(ctx, o.metrics)
	killed := time.Now()
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
	<-o.exited
	o.exitedLocked(last)
	if scrapeErr != nil {
		return killed, fmt.Errorf("last scrape before killing: %w", scrapeErr)
	}
	return killed, nil
}

// exitedLocked adds the instance that exited to the past: its CPU and
// peak RSS (from its rusage), and its last metrics.
func (o *operatorProc) exitedLocked(last samples) {
	st := o.cmd.ProcessState
	o.pastCPU += (st.UserTime() + st.SystemTime()).Seconds()
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > o.pastPeakKiB {
		o.pastPeakKiB = ru.Maxrss // KiB on Linux
	}
	o.pastMetrics = o.pastMetrics.add(last)
	o.cmd = nil
}

// takeOver makes o the operator under measurement in old's place: old's
// instances (stopped) count as o's past, so that the CPU and metrics
// of a phase that swaps them still add up.
func (o *operatorProc) takeOver(old *operatorProc) {
	old.mu.Lock()
	cpu, peak, m := old.pastCPU, old.pastPeakKiB, old.pastMetrics
	old.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pastCPU += cpu
	o.pastPeakKiB = max(o.pastPeakKiB, peak)
	o.pastMetrics = o.pastMetrics.add(m)
}

func (o *operatorProc) running() (*exec.Cmd, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cmd, o.cmd != nil
}

// alive returns an error when the running instance has exited on its own.
func (o *operatorProc) alive() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		return nil
	}
	select {
	case <-o.exited:
		return fmt.Errorf("the operator exited: %v%s", o.cmd.ProcessState, tail(o.logPath))
	default:
		return nil
	}
}

// cpu is the CPU time of every instance so far, in seconds.
func (o *operatorProc) cpu() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	total := o.pastCPU
	if o.cmd != nil {
		if s, err := cpuSeconds(o.cmd.Process.Pid); err == nil {
			total += s
		}
	}
	return total
}

// memory is the running instance's RSS and peak since the last resetPeak
// (or its start), in KiB, and whether an instance runs.
func (o *operatorProc) memory() (rss, hwm int64, ok bool) {
	cmd, running := o.running()
	if !running {
		return 0, 0, false
	}
	rss, hwm, err := memory(cmd.Process.Pid)
	return rss, hwm, err == nil
}

func (o *operatorProc) resetPeak() {
	if cmd, ok := o.running(); ok {
		_ = resetPeak(cmd.Process.Pid)
	}
}

// scrape returns the metrics summed over every instance so far.
func (o *operatorProc) scrape(ctx context.Context) (samples, error) {
	o.mu.Lock()
	url, past, running := o.metrics, o.pastMetrics, o.cmd != nil
	o.mu.Unlock()
	if !running {
		return samples{}.add(past), nil
	}
	cur, err := scrape(ctx, url)
	if err != nil {
		return nil, err
	}
	return cur.add(past), nil
}

// scrapeCurrent returns the running instance's own metrics.
func (o *operatorProc) scrapeCurrent(ctx context.Context) (samples, error) {
	o.mu.Lock()
	url := o.metrics
	o.mu.Unlock()
	return scrape(ctx, url)
}

// cpuProfile takes a CPU profile of the running instance over seconds.
func (o *operatorProc) cpuProfile(seconds int) ([]byte, error) {
	o.mu.Lock()
	base := o.pprof
	o.mu.Unlock()
	return get(fmt.Sprintf("%s/profile?seconds=%d", base, seconds), time.Duration(seconds+30)*time.Second)
}

// heapProfile writes the operator's heap profile to path and returns the
// path and the top of its in-use space (what sets the garbage collector's
// goal, and so the RSS), or "" and the error.
func (o *operatorProc) heapProfile(path string) (string, string) {
	o.mu.Lock()
	base := o.pprof
	o.mu.Unlock()
	data, err := get(base+"/heap?gc=1", 30*time.Second)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		return "", "heap profile: " + err.Error()
	}
	top, err := exec.Command(goTool(), "tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount=20", path).Output()
	if err != nil {
		return path, "pprof -top: " + err.Error()
	}
	return path, string(top)
}

// profileLoop takes CPU profiles with fetch back to back, each of seconds,
// into files named prefix-<i>.pprof, until stop is called; stop waits for
// the profile in flight and returns the files.
func profileLoop(prefix string, seconds int, fetch func(seconds int) ([]byte, error)) (stop func() []string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var files []string
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			// Not cancelled by ctx: the profile in flight when the phase
			// ends is kept.
			data, err := fetch(seconds)
			if err != nil {
				// Between instances (a restart), or not yet listening.
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			path := fmt.Sprintf("%s-%d.pprof", prefix, i)
			if err := os.WriteFile(path, data, 0o644); err == nil {
				files = append(files, path)
			}
		}
	}()
	return func() []string {
		cancel()
		<-done
		return files
	}
}

func get(url string, timeout time.Duration) ([]byte, error) {
	c := &http.Client{Timeout: timeout}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// waitLog waits until the instance's log has a line containing text
// (case aside).
func (o *operatorProc) waitLog(ctx context.Context, text string, timeout time.Duration) error {
	text = strings.ToLower(text)
	return poll(ctx, 100*time.Millisecond, timeout, func() (bool, error) {
		data, err := os.ReadFile(o.logPath)
		if err != nil {
			return false, err
		}
		return strings.Contains(strings.ToLower(string(data)), text), o.alive()
	})
}

// tail is the end of a log file, for error messages.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "\n--- last lines of " + filepath.Base(path) + " ---\n" + strings.Join(lines, "\n")
}
