package localenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// What the node changes on the host, and how it is undone. Everything else
// the node does happens in its own mount namespace (containerd, the shims,
// the kubelet and the containers' mounts vanish with it) or in the pods'
// network namespaces (gone with the pods). What remains on the host:
//
//   - a bridge for the pods, with the node's address (the API server, Vault
//     and the kubelet listen on it, so Pods can reach them), and a route of
//     the Service range onto it, so that no packet to a ClusterIP ever
//     leaves the machine before kube-proxy's rules exist;
//   - an nftables table of ours that drops whatever a Pod would send
//     beyond the bridge (nothing here is to leave the machine), and
//     kube-proxy's tables;
//   - cgroups below the test process's own (the kubelet's cgroupRoot);
//   - the kernel tunables the kubelet sets (kernel.panic, vm.overcommit_memory, ...).
//
// cleanup.sh in the environment's folder undoes all of it: Stop runs it, and
// the watchdog runs it when the test process dies first.

// hostNet is the node's addressing.
type hostNet struct {
	bridge      string    // the pods' bridge
	ip          net.IP    // the node's address on the bridge
	podCIDR     net.IPNet // the pods' /24, on the bridge
	serviceCIDR net.IPNet // the ClusterIPs, a /24 routed onto the bridge
}

// pickHostNet chooses a free pod and Service /24 in 10.200.0.0 to
// 10.249.255.255, clear of every route and address of the host.
func pickHostNet(id string) (hostNet, error) {
	used, err := usedIPv4Nets()
	if err != nil {
		return hostNet{}, err
	}
	free := func(n net.IPNet) bool {
		for _, u := range used {
			if u.Contains(n.IP) || n.Contains(u.IP) {
				return false
			}
		}
		return true
	}
	var nets []net.IPNet
	for attempt := 0; attempt < 200 && len(nets) < 2; attempt++ {
		n := net.IPNet{IP: net.IPv4(10, byte(200+rand.IntN(50)), byte(rand.IntN(256)), 0).To4(), Mask: net.CIDRMask(24, 32)}
		if free(n) && (len(nets) == 0 || !nets[0].IP.Equal(n.IP)) {
			nets = append(nets, n)
		}
	}
	if len(nets) < 2 {
		return hostNet{}, errors.New("localenv: no free /24 in 10.200.0.0-10.249.255.255 for the node's pods and Services")
	}
	ip := make(net.IP, 4)
	copy(ip, nets[0].IP)
	ip[3] = 1
	return hostNet{bridge: "mvnode" + id, ip: ip, podCIDR: nets[0], serviceCIDR: nets[1]}, nil
}

// usedIPv4Nets are the host's IPv4 routes (/proc/net/route) and addresses.
func usedIPv4Nets() ([]net.IPNet, error) {
	var used []net.IPNet
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("localenv: reading the routes: %w", err)
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Scan() // header
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 8 {
			continue
		}
		dst, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil || mask == 0 {
			continue // the default route: everything, but not "taken"
		}
		ip, m := make(net.IP, 4), make(net.IPMask, 4)
		binary.LittleEndian.PutUint32(ip, uint32(dst))
		binary.LittleEndian.PutUint32(m, uint32(mask))
		used = append(used, net.IPNet{IP: ip, Mask: m})
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			used = append(used, net.IPNet{IP: n.IP.To4(), Mask: net.CIDRMask(32, 32)})
		}
	}
	return used, nil
}

// nthIP is the n-th address of a /24.
func nthIP(n net.IPNet, i byte) net.IP {
	ip := make(net.IP, 4)
	copy(ip, n.IP.To4())
	ip[3] = i
	return ip
}

// setUp creates the bridge, its address, the Service route and the
// firewall table.
func (h hostNet) setUp(ctx context.Context, table string) error {
	ones, _ := h.podCIDR.Mask.Size()
	for _, args := range [][]string{
		{"link", "add", "name", h.bridge, "type", "bridge"},
		{"addr", "add", h.ip.String() + "/" + strconv.Itoa(ones), "dev", h.bridge},
		{"link", "set", h.bridge, "up"},
		{"route", "add", h.serviceCIDR.String(), "dev", h.bridge},
	} {
		if err := run(ctx, "ip", args...); err != nil {
			return err
		}
	}
	// Pods talk to the node and to each other; anything a Pod sends that
	// would be routed off the bridge is dropped (with br_netfilter, bridged
	// pod-to-pod traffic has the bridge as both interfaces).
	rules := fmt.Sprintf(`table inet %s {
	chain forward {
		type filter hook forward priority -10; policy accept;
		iifname %q oifname != %q drop
		oifname %q iifname != %q drop
	}
}
`, table, h.bridge, h.bridge, h.bridge, h.bridge)
	return runStdin(ctx, rules, "nft", "-f", "-")
}

// nodeCgroupPath is the kubelet's cgroupRoot: below the test process's own
// memory cgroup, so that the pods stay inside whatever accounts for and
// ends the test's processes.
func nodeCgroupPath(id string) (string, error) {
	base := "/"
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[1] == "memory" {
			base = parts[2]
		}
	}
	return filepath.Join(base, "minionvault-node-"+id), nil
}

// makeNodeCgroups creates root in every cgroup v1 hierarchy (and the
// unified one of a hybrid host), and a cgroup for the node's daemons in the
// pids hierarchy, whose cgroup.procs it returns.
func makeNodeCgroups(root string, hier map[string]string) (string, error) {
	if _, ok := hier["pids"]; !ok {
		return "", errors.New("localenv: the node needs the cgroup v1 pids controller mounted at /sys/fs/cgroup/pids")
	}
	for name, mnt := range hier {
		if err := mkdirCgroup(mnt, root, name == "cpuset"); err != nil {
			return "", err
		}
	}
	daemons := filepath.Join(hier["pids"], root, "daemons")
	if err := os.Mkdir(daemons, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(daemons, "cgroup.procs"), nil
}

// cgroupHierarchies maps each hierarchy under /sys/fs/cgroup to its folder.
func cgroupHierarchies() (map[string]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		dir := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil && e.IsDir() {
			out[e.Name()] = dir
		}
	}
	if len(out) == 0 {
		return nil, errors.New("localenv: no cgroup hierarchy under /sys/fs/cgroup")
	}
	if fileExists("/sys/fs/cgroup/cgroup.controllers") {
		return nil, errors.New("localenv: the node runs on cgroup v1 (hybrid) hosts only, as this project's machines are")
	}
	return out, nil
}

// missingCgroupParents are the folders strictly above root, in any
// hierarchy, that do not exist yet, deepest first.
func missingCgroupParents(root string, hier map[string]string) []string {
	var out []string
	for _, mnt := range hier {
		for dir := filepath.Dir(filepath.Join(mnt, root)); dir != mnt && len(dir) > len(mnt); dir = filepath.Dir(dir) {
			if !fileExists(dir) {
				out = append(out, dir)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// kubeletSysctls are the kernel tunables the kubelet sets at start
// (pkg/kubelet/cm: setupKernelTunables, protectKernelDefaults false).
var kubeletSysctls = []string{
	"/proc/sys/vm/overcommit_memory", "/proc/sys/vm/panic_on_oom",
	"/proc/sys/kernel/panic", "/proc/sys/kernel/panic_on_oops",
	"/proc/sys/kernel/keys/root_maxkeys", "/proc/sys/kernel/keys/root_maxbytes",
}

// currentSysctls reads the present values of paths.
func currentSysctls(paths []string) map[string]string {
	out := map[string]string{}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			out[p] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// mkdirCgroup creates rel below mnt level by level; a new cpuset cgroup
// has no CPUs and memory nodes until given its parent's.
func mkdirCgroup(mnt, rel string, cpuset bool) error {
	dir := mnt
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil {
			if os.IsExist(err) {
				continue
			}
			return fmt.Errorf("localenv: cgroup %s: %w", dir, err)
		}
		if cpuset {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(parent, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("localenv: cgroup %s: %w", dir, err)
				}
			}
		}
	}
	return nil
}

// cleanupScript undoes what the node did to the host: it kills every
// process in the node's cgroups (the daemons, the shims, the containers)
// until none is left, removes the cgroups, and deletes the firewall tables
// and the bridge (its routes go with it). Each step ignores what is
// already gone, so it can run twice.
// parents are the folders above the cgroupRoot that the node creates,
// deepest first; they go too once empty. sysctls are the values to restore
// (/proc/sys paths to values): the kubelet sets a few kernel tunables.
func cleanupScript(pidsDir, cgroupRoot, table string, h hostNet, parents []string, sysctls map[string]string) string {
	var rmParents strings.Builder
	for _, p := range parents {
		fmt.Fprintf(&rmParents, "rmdir %q 2>/dev/null\n", p)
	}
	keys := make([]string, 0, len(sysctls))
	for k := range sysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&rmParents, "echo %q > %q 2>/dev/null\n", sysctls[k], k)
	}
	return fmt.Sprintf(`# The single-node cluster's host state (internal/localenv/node_host.go).
pids=%[1]q
root=%[2]q
i=0
while [ -d "$pids" ] && [ $i -lt 50 ]; do
  procs=$(find "$pids" -name cgroup.procs -exec cat {} + 2>/dev/null)
  [ -z "$procs" ] && break
  kill -s KILL $procs 2>/dev/null
  sleep 0.2
  i=$((i + 1))
done
for h in /sys/fs/cgroup/*/; do
  [ -d "$h$root" ] && find "$h$root" -depth -type d -exec rmdir {} \; 2>/dev/null
done
%[5]snft delete table inet %[3]s 2>/dev/null
nft delete table ip kube-proxy 2>/dev/null
nft delete table ip6 kube-proxy 2>/dev/null
ip link delete %[4]s 2>/dev/null
true
`, pidsDir, strings.TrimPrefix(cgroupRoot, "/"), table, h.bridge, rmParents.String())
}

// The mount namespace: a holder process (sleep) in a new, private mount
// namespace with its own /run, /var/lib and /var/log, where containerd,
// the CNI plugins and the kubelet keep the state whose paths they do not
// let us choose (/run/containerd/s for the shims' sockets, /var/lib/cni,
// /var/log/containers, /var/log/pods). Every mount in it goes when its last
// process does.
const holderScript = `set -e
ready="$0"
mount -t tmpfs -o mode=0755 localenv-run /run
mount -t tmpfs -o mode=0755 localenv-var-lib /var/lib
mount -t tmpfs -o mode=0755 localenv-var-log /var/log
mkdir -p /run/containerd /var/lib/cni /var/log/containers /var/log/pods
: > "$ready"
exec sleep 2147483647
`

func newNodeID() string {
	b := make([]byte, 3)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return hex.EncodeToString(b)
}

func run(ctx context.Context, name string, args ...string) error {
	return runStdin(ctx, "", name, args...)
}

func runStdin(ctx context.Context, stdin, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("localenv: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// waitFor polls f until it returns nil, ctx ends or a daemon exits.
func waitFor(ctx context.Context, what string, exited <-chan string, f func() error) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = f(); last == nil {
			return nil
		}
		select {
		case name := <-exited:
			return fmt.Errorf("localenv: waiting for %s: %s exited", what, name)
		case <-ctx.Done():
			return fmt.Errorf("localenv: waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-tick.C:
		}
	}
}
