//go:build integration

package harness

import (
	"testing"
)

func TestParseProc(t *testing.T) {
	stat := "4242 (kube apiserver) S 1 4242 4242 0 -1 4194560 5000 0 0 0 1234 567 0 0 20 0 12 0 100 2000000 3000 18446744073709551615"
	if got, err := parseStatCPU(stat); err != nil || got != 18.01 {
		t.Errorf("parseStatCPU = %v, %v; want 18.01", got, err)
	}
	if _, err := parseStatCPU("4242 (x) S 1"); err == nil {
		t.Error("parseStatCPU of a short line: no error")
	}
	status := "Name:\tminionvault\nVmPeak:\t 1500000 kB\nVmHWM:\t   90112 kB\nVmRSS:\t   65536 kB\nThreads:\t12\n"
	rss, hwm, err := parseStatusMemory(status)
	if err != nil || rss != 65536 || hwm != 90112 {
		t.Errorf("parseStatusMemory = %d, %d, %v; want 65536, 90112", rss, hwm, err)
	}
	if _, _, err := parseStatusMemory("Name:\tx\n"); err == nil {
		t.Error("parseStatusMemory without VmRSS: no error")
	}
}
