//go:build integration

package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for every architecture's user-space ABI.
const userHZ = 100

// cpuSeconds is utime+stime of a live process, from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads fields 14 (utime) and 15 (stime) of a stat line,
// "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
func parseStatCPU(s string) (float64, error) {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, errors.New("stat: no ')'")
	}
	f := strings.Fields(s[end+1:])
	// f[0] is field 3 (state), so field k is f[k-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after comm", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("stat: %w", err)
	}
	return float64(ut+st) / userHZ, nil
}

// memory is a process's resident set now and its peak, in KiB, from
// /proc/<pid>/status (VmRSS, VmHWM).
func memory(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatusMemory(string(b))
}

func parseStatusMemory(s string) (rss, hwm int64, err error) {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &rss
		case "VmHWM":
			dst = &hwm
		default:
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("status %s: %w", k, err)
		}
		*dst = n
	}
	if rss == 0 || hwm == 0 {
		return 0, 0, errors.New("status: no VmRSS or VmHWM")
	}
	return rss, hwm, nil
}

// resetPeak makes VmHWM start again from the current RSS (clear_refs 5), so
// that each phase reports its own peak.
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// serverPIDs finds the processes of an environment by name: kube-apiserver
// and etcd name the folder in their arguments (certificates, data), Vault
// runs in it. names maps an executable's base name to the label it gets.
func serverPIDs(dir string, names map[string]string) (map[string]int, error) {
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	found := map[string]int{}
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue // gone, or a kernel thread
		}
		args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
		label, ok := names[filepath.Base(string(args[0]))]
		if !ok {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join(p, "cwd"))
		if cwd != dir && !bytes.Contains(cmdline, []byte(dir+string(filepath.Separator))) {
			continue // another environment's
		}
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		if other, dup := found[label]; dup {
			return nil, fmt.Errorf("two %s processes of %s: %d and %d", label, dir, other, pid)
		}
		found[label] = pid
	}
	for _, label := range names {
		if _, ok := found[label]; !ok {
			return nil, fmt.Errorf("no %s process of %s", label, dir)
		}
	}
	return found, nil
}
