package cli

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// unlimited is where cgroup v1 reports "no limit" (a page-rounded
// MaxInt64); anything above it is no limit.
const unlimited = int64(1) << 60

// containerMemoryLimit is the memory limit of the cgroup the process runs
// in, from the files of cgroup v2 (memory.max) or v1
// (memory.limit_in_bytes), read with readFile. The path comes from
// /proc/self/cgroup, since without a cgroup namespace the container's
// cgroup is not the mount's root; the root is tried last.
func containerMemoryLimit(readFile func(string) ([]byte, error)) (limit int64, source string, ok bool) {
	var candidates []string
	if data, err := readFile("/proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			// hierarchy-ID:controllers:path
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			p := path.Clean("/" + parts[2])
			switch {
			case parts[0] == "0" && parts[1] == "":
				candidates = append(candidates, path.Join("/sys/fs/cgroup", p, "memory.max"))
			case slices.Contains(strings.Split(parts[1], ","), "memory"):
				candidates = append(candidates, path.Join("/sys/fs/cgroup/memory", p, "memory.limit_in_bytes"))
			}
		}
	}
	candidates = append(candidates, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, f := range candidates {
		data, err := readFile(f)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(data))
		if v == "max" {
			return 0, f, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			continue
		}
		if n >= unlimited {
			return 0, f, false
		}
		return n, f, true
	}
	return 0, "", false
}

// softMemoryLimit is percent of the container's memory limit, for
// debug.SetMemoryLimit: near it the Go runtime collects garbage harder
// instead of letting the heap's headroom (twice the live heap by default)
// reach the limit and be OOM-killed. The rest is left for what the runtime
// does not count (thread stacks outside the heap, the binary's mappings:
// 36 MiB of the operator's RSS, so the default percent leaves a fifth of
// a 256 MiB limit, not a tenth).
// It is 0 when GOMEMLIMIT is set (the runtime has applied it itself), the
// percent is 0 or there is no limit.
func softMemoryLimit(percent int, getenv func(string) string, readFile func(string) ([]byte, error)) (soft, limit int64, source string) {
	if percent <= 0 || getenv("GOMEMLIMIT") != "" {
		return 0, 0, ""
	}
	limit, source, ok := containerMemoryLimit(readFile)
	if !ok {
		return 0, 0, source
	}
	return limit / 100 * int64(min(percent, 100)), limit, source
}

// applySoftMemoryLimit sets the runtime's soft memory limit from the
// container's memory limit and returns what it set (0: nothing).
func applySoftMemoryLimit(percent int) (soft, limit int64, source string) {
	soft, limit, source = softMemoryLimit(percent, os.Getenv, os.ReadFile)
	if soft > 0 {
		debug.SetMemoryLimit(soft)
	}
	return soft, limit, source
}
