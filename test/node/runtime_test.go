//go:build integration

package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

// asRun is how the container runtime ran the manager container: the OCI
// spec that containerd gave runc (from `ctr containers info`), and the
// container's main process as the kernel sees it (/proc/<pid>).
type asRun struct {
	ContainerID string
	PID         int
	// From the OCI spec.
	UID, GID        int64
	ReadonlyRootfs  bool
	NoNewPrivileges bool
	Seccomp         string // the spec's default seccomp action, "" without a profile
	BoundingCaps    []string
	Args            []string
	// From /proc/<pid>.
	Status      map[string]string // Uid, Gid, NoNewPrivs, Seccomp, CapEff, ...
	RootMount   string            // the mount options of / in the container
	CgroupPaths string            // the memory cgroup line
}

func (a asRun) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "container %s, pid %d\n", a.ContainerID, a.PID)
	fmt.Fprintf(&b, "  OCI spec (ctr containers info): process.user uid=%d gid=%d, root.readonly=%v, process.noNewPrivileges=%v, linux.seccomp.defaultAction=%q, capabilities.bounding=%v, args=%q\n",
		a.UID, a.GID, a.ReadonlyRootfs, a.NoNewPrivileges, a.Seccomp, a.BoundingCaps, a.Args)
	fmt.Fprintf(&b, "  /proc/%d/status:", a.PID)
	for _, k := range []string{"Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "Seccomp_filters", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		fmt.Fprintf(&b, " %s=[%s]", k, a.Status[k])
	}
	fmt.Fprintf(&b, "\n  /proc/%d/mountinfo, the root filesystem: %s\n", a.PID, a.RootMount)
	fmt.Fprintf(&b, "  /proc/%d/cgroup: %s", a.PID, a.CgroupPaths)
	return b.String()
}

// inspectContainer reads what the kubelet and runc made of the container
// with the CRI ID id (a Pod's containerStatuses[].containerID without
// "containerd://").
func inspectContainer(ctx context.Context, node *testenv.Node, id string) (asRun, error) {
	a := asRun{ContainerID: id}
	out, err := node.Ctr(ctx, "containers", "info", id)
	if err != nil {
		return a, fmt.Errorf("ctr containers info %s: %w: %s", id, err, out)
	}
	var info struct {
		Spec struct {
			Process struct {
				User struct {
					UID int64 `json:"uid"`
					GID int64 `json:"gid"`
				} `json:"user"`
				Args            []string `json:"args"`
				NoNewPrivileges bool     `json:"noNewPrivileges"`
				Capabilities    struct {
					Bounding []string `json:"bounding"`
				} `json:"capabilities"`
			} `json:"process"`
			Root struct {
				Readonly bool `json:"readonly"`
			} `json:"root"`
			Linux struct {
				Seccomp *struct {
					DefaultAction string `json:"defaultAction"`
				} `json:"seccomp"`
			} `json:"linux"`
		} `json:"Spec"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return a, fmt.Errorf("ctr containers info %s: %w", id, err)
	}
	sp := info.Spec
	a.UID, a.GID = sp.Process.User.UID, sp.Process.User.GID
	a.Args, a.NoNewPrivileges = sp.Process.Args, sp.Process.NoNewPrivileges
	a.BoundingCaps, a.ReadonlyRootfs = sp.Process.Capabilities.Bounding, sp.Root.Readonly
	if sp.Linux.Seccomp != nil {
		a.Seccomp = sp.Linux.Seccomp.DefaultAction
	}

	// The task's PID: `ctr tasks ls` prints TASK PID STATUS.
	out, err = node.Ctr(ctx, "tasks", "ls")
	if err != nil {
		return a, fmt.Errorf("ctr tasks ls: %w: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id {
			a.PID, _ = strconv.Atoi(f[1])
		}
	}
	if a.PID == 0 {
		return a, fmt.Errorf("no task for container %s in:\n%s", id, out)
	}

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.PID))
	if err != nil {
		return a, err
	}
	a.Status = map[string]string{}
	s := bufio.NewScanner(strings.NewReader(string(status)))
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok {
			a.Status[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", a.PID))
	if err != nil {
		return a, err
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			a.RootMount = f[5] + " (" + strings.Join(f[len(f)-3:], " ") + ")"
		}
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", a.PID))
	if err != nil {
		return a, err
	}
	for _, line := range strings.Split(string(cg), "\n") {
		if strings.Contains(line, ":memory:") {
			a.CgroupPaths = line
		}
	}
	return a, nil
}
