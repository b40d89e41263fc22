package cli

import (
	"io/fs"
	"testing"
)

func files(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if v, ok := m[p]; ok {
			return []byte(v), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestSoftMemoryLimit(t *testing.T) {
	const mi = 1 << 20
	tests := []struct {
		name    string
		percent int
		env     string
		files   map[string]string
		soft    int64
		source  string
	}{
		{"cgroup v2 namespaced", 90, "", map[string]string{
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "268435456\n",
		}, 256 * mi / 100 * 90, "/sys/fs/cgroup/memory.max"},
		{"cgroup v2, the container's path under the host's mount", 90, "", map[string]string{
			"/proc/self/cgroup": "0::/kubepods.slice/pod1/cri-containerd-abc.scope\n",
			"/sys/fs/cgroup/kubepods.slice/pod1/cri-containerd-abc.scope/memory.max": "536870912",
			"/sys/fs/cgroup/memory.max": "max",
		}, 512 * mi / 100 * 90, "/sys/fs/cgroup/kubepods.slice/pod1/cri-containerd-abc.scope/memory.max"},
		{"cgroup v2 without a limit", 90, "", map[string]string{
			"/proc/self/cgroup":                    "0::/user.slice\n",
			"/sys/fs/cgroup/user.slice/memory.max": "max\n",
		}, 0, "/sys/fs/cgroup/user.slice/memory.max"},
		{"cgroup v1", 80, "", map[string]string{
			"/proc/self/cgroup": "12:pids:/docker/x\n11:cpuset,memory:/docker/x\n",
			"/sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes": "1073741824\n",
		}, 1024 * mi / 100 * 80, "/sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes"},
		{"cgroup v1 unlimited", 90, "", map[string]string{
			"/proc/self/cgroup":                           "4:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0, "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{"GOMEMLIMIT set: the runtime's own", 90, "300MiB", map[string]string{
			"/sys/fs/cgroup/memory.max": "268435456",
		}, 0, ""},
		{"disabled", 0, "", map[string]string{
			"/sys/fs/cgroup/memory.max": "268435456",
		}, 0, ""},
		{"garbage and nothing readable", 90, "", map[string]string{
			"/proc/self/cgroup":         "nonsense\n::\n",
			"/sys/fs/cgroup/memory.max": "lots",
		}, 0, ""},
		{"percent above 100 is 100", 150, "", map[string]string{
			"/sys/fs/cgroup/memory.max": "1000",
		}, 1000, "/sys/fs/cgroup/memory.max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "GOMEMLIMIT" {
					return tt.env
				}
				return ""
			}
			soft, _, source := softMemoryLimit(tt.percent, getenv, files(tt.files))
			if soft != tt.soft || source != tt.source {
				t.Errorf("softMemoryLimit = %d from %q, want %d from %q", soft, source, tt.soft, tt.source)
			}
		})
	}
}
