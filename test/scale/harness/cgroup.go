//go:build integration

package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// operatorMemory is the memory limit the operator runs under at n
// bindings, as its Pod would with `resources.limits.memory`: the RSS goal
// at that size, 256 MiB up to 10,000 bindings (goalN) and 512 MiB above
// (issue 34's, at 50,000). The RSS goal (BudgetChecks) is the same.
func operatorMemory(n int) int64 {
	if n <= goalN {
		return 256 << 20
	}
	return 512 << 20
}

// operatorSoftLimit is what the operator sets its soft memory limit to
// under operatorMemory (its --memory-limit-percent default): the
// GOMEMLIMIT it runs with when no cgroup can be made.
func operatorSoftLimit(n int) int64 {
	return operatorMemory(n) / 100 * 80
}

// memCgroup is a memory cgroup for the operator beside the harness's own:
// the operator finds its limit there as in a container (and sets its soft
// memory limit from it), and the kernel enforces it.
type memCgroup struct {
	dir, procs string
}

// newMemCgroup makes a child of the harness's memory cgroup with the
// limit (cgroup v1 memory.limit_in_bytes or v2 memory.max), named after
// label: each operator instance that runs beside another (the failover's
// standby) has a limit of its own, as a Pod would.
func newMemCgroup(limit int64, label string) (*memCgroup, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("minionvault-scale-%d-%s", os.Getpid(), label)
	var dir, limitFile string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", parts[2], name), "memory.limit_in_bytes"
		case parts[0] == "0" && parts[1] == "" && dir == "":
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				dir, limitFile = filepath.Join("/sys/fs/cgroup", parts[2], name), "memory.max"
			}
		}
	}
	if dir == "" {
		return nil, errors.New("no memory cgroup in /proc/self/cgroup")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making a memory cgroup: %w", err)
	}
	c := &memCgroup{dir: dir, procs: filepath.Join(dir, "cgroup.procs")}
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		_ = c.remove()
		return nil, fmt.Errorf("setting the cgroup's memory limit: %w", err)
	}
	return c, nil
}

// remove removes the cgroup, once the processes in it have exited.
func (c *memCgroup) remove() error {
	return os.Remove(c.dir)
}
