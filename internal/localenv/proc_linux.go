package localenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// groupLeaderChildren lists the children of ppid that lead their own process
// group, from /proc.
func groupLeaderChildren(ppid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		pid, parent, pgrp, ok := parseStat(string(b))
		if ok && parent == ppid && pgrp == pid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parseStat reads pid, ppid and pgrp from a /proc/<pid>/stat line:
// "pid (comm) state ppid pgrp ...", where comm may hold spaces and parentheses.
func parseStat(s string) (pid, ppid, pgrp int, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 1 || end < open {
		return 0, 0, 0, false
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 3 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	pid, err1 = strconv.Atoi(strings.TrimSpace(s[:open]))
	ppid, err2 = strconv.Atoi(fields[1])
	pgrp, err3 = strconv.Atoi(fields[2])
	return pid, ppid, pgrp, err1 == nil && err2 == nil && err3 == nil
}

// cmdlineMentions reports whether process pid's command line contains s.
func cmdlineMentions(pid int, s string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && strings.Contains(string(b), s)
}
