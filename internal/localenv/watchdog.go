package localenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// The watchdog is a shell in its own process group that reads process group
// IDs from a pipe whose write end only the test binary holds. When the test
// binary dies, however it dies, the pipe closes and the shell kills those
// groups, runs the folder's cleanup.sh if there is one (what else a
// server left on the host: the node's cgroups, bridge and firewall tables),
// and removes the temporary folder. On a normal Stop the test binary
// kills the groups itself and sends "done".
const watchdogScript = `
dir="$1"
pgs=""
while IFS= read -r line; do
  case "$line" in
    done) exit 0 ;;
    *) pgs="$pgs $line" ;;
  esac
done
for pg in $pgs; do kill -s KILL -- "-$pg" 2>/dev/null; done
sleep 1
[ -f "$dir/cleanup.sh" ] && /bin/sh "$dir/cleanup.sh" >/dev/null 2>&1
rm -rf -- "$dir"
`

// claims maps each process group that a watchdog of this process looks
// after (and each watchdog's own) to that watchdog, so that an environment's
// adoptChildren never takes over the servers or the watchdog of another
// environment started by the same process: killing those is their own
// watchdog's job, after which it also removes their folder.
var (
	claimsMu sync.Mutex
	claims   = map[int]*watchdog{}
)

// claim records pgid as w's; false if another watchdog has it.
func claim(pgid int, w *watchdog) bool {
	claimsMu.Lock()
	defer claimsMu.Unlock()
	if owner, ok := claims[pgid]; ok && owner != w {
		return false
	}
	claims[pgid] = w
	return true
}

// unclaim forgets w's claims.
func unclaim(w *watchdog) {
	claimsMu.Lock()
	defer claimsMu.Unlock()
	for pg, owner := range claims {
		if owner == w {
			delete(claims, pg)
		}
	}
}

type watchdog struct {
	mu       sync.Mutex
	cmd      *exec.Cmd
	pipe     *os.File
	pgids    []int
	released bool
}

func startWatchdog(dir string) (*watchdog, error) {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "localenv-watchdog", dir)
	cmd.Stdin = r
	// Its own group, so that the terminal's SIGINT to our group does not
	// reach it before it is needed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	r.Close()
	wd := &watchdog{cmd: cmd, pipe: w}
	claim(cmd.Process.Pid, wd)
	return wd, nil
}

// adopt makes the watchdog responsible for process group pgid.
func (w *watchdog) adopt(pgid int) {
	if w == nil || pgid <= 1 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released {
		return
	}
	for _, p := range w.pgids {
		if p == pgid {
			return
		}
	}
	if !claim(pgid, w) {
		return // another environment's
	}
	w.pgids = append(w.pgids, pgid)
	_, _ = fmt.Fprintln(w.pipe, strconv.Itoa(pgid))
}

// adoptChildren adopts every child of this process that leads its own
// process group (envtest starts etcd and kube-apiserver that way) and
// whose command line mentions mentioning ("" for any), except the
// watchdogs and what other environments' watchdogs look after. With the
// environment's folder as mentioning (envtest's servers name it in their
// flags), an environment starting while another in the same process starts
// servers (the HA suite runs two at once) adopts its own servers only, not
// the other's that its watchdog has not adopted yet (whose Stop would
// then kill them).
func (w *watchdog) adoptChildren(mentioning string) {
	if w == nil {
		return
	}
	for _, pid := range groupLeaderChildren(os.Getpid()) {
		if pid != w.cmd.Process.Pid && (mentioning == "" || cmdlineMentions(pid, mentioning)) {
			w.adopt(pid)
		}
	}
}

// release kills every adopted group now and dismisses the watchdog.
func (w *watchdog) release() {
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.released {
		w.mu.Unlock()
		return
	}
	w.released = true
	pgids := w.pgids
	w.mu.Unlock()
	for _, pg := range pgids {
		_ = syscall.Kill(-pg, syscall.SIGKILL)
	}
	_, _ = fmt.Fprintln(w.pipe, "done")
	_ = w.pipe.Close()
	_ = w.cmd.Wait()
	unclaim(w)
}
