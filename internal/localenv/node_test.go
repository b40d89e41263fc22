package localenv

import (
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// The node's configuration as files; the node itself runs in test/node.

func TestPickHostNet(t *testing.T) {
	h, err := pickHostNet("abc123")
	if err != nil {
		t.Fatal(err)
	}
	used, err := usedIPv4Nets()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []net.IPNet{h.podCIDR, h.serviceCIDR} {
		if ones, _ := n.Mask.Size(); ones != 24 || n.IP[0] != 10 || n.IP[1] < 200 || n.IP[1] > 249 {
			t.Errorf("%s: want a /24 in 10.200.0.0-10.249.255.255", n.String())
		}
		for _, u := range used {
			if u.Contains(n.IP) || n.Contains(u.IP) {
				t.Errorf("%s overlaps the host's %s", n.String(), u.String())
			}
		}
	}
	if h.podCIDR.IP.Equal(h.serviceCIDR.IP) {
		t.Errorf("pods and Services share %s", h.podCIDR.String())
	}
	if !h.podCIDR.Contains(h.ip) || h.ip[3] != 1 {
		t.Errorf("node address %s, want .1 of %s", h.ip, h.podCIDR.String())
	}
	if h.bridge != "mvnodeabc123" || len(h.bridge) > 15 {
		t.Errorf("bridge %q: an interface name has at most 15 bytes", h.bridge)
	}
}

func TestNodeConfigFiles(t *testing.T) {
	_, pods, _ := net.ParseCIDR("10.201.7.0/24")
	_, svcs, _ := net.ParseCIDR("10.202.8.0/24")
	h := hostNet{bridge: "mvnodeabc123", ip: net.IPv4(10, 201, 7, 1).To4(), podCIDR: *pods, serviceCIDR: *svcs}

	decode := func(b []byte, err error) map[string]any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	kubelet := decode(kubeletConfig(kubeletParams{cgroupRoot: "/x/minionvault-node-abc123", criSocket: "/d/containerd.sock", address: "10.201.7.1", port: 1234}))
	for k, want := range map[string]any{
		"failCgroupV1": false, "cgroupDriver": "cgroupfs", "failSwapOn": false,
		"cgroupRoot": "/x/minionvault-node-abc123", "containerRuntimeEndpoint": "unix:///d/containerd.sock",
		"address": "10.201.7.1", "readOnlyPort": float64(0),
	} {
		if kubelet[k] != want {
			t.Errorf("kubelet %s = %v, want %v", k, kubelet[k], want)
		}
	}
	if a := kubelet["authentication"].(map[string]any)["anonymous"].(map[string]any)["enabled"]; a != false {
		t.Errorf("kubelet anonymous authentication %v", a)
	}

	cni := decode(cniConfig(h, "/d/ipam"))
	plugin := cni["plugins"].([]any)[0].(map[string]any)
	if plugin["bridge"] != "mvnodeabc123" || plugin["ipMasq"] != false || plugin["isGateway"] != false {
		t.Errorf("bridge plugin %v", plugin)
	}
	rng := plugin["ipam"].(map[string]any)["ranges"].([]any)[0].([]any)[0].(map[string]any)
	if rng["subnet"] != "10.201.7.0/24" || rng["gateway"] != "10.201.7.1" || rng["rangeStart"] != "10.201.7.10" {
		t.Errorf("host-local range %v", rng)
	}

	proxy := decode(kubeProxyConfig("/d/kp.kubeconfig", "n", h, 1, 2))
	if proxy["mode"] != "nftables" || proxy["clusterCIDR"] != "10.201.7.0/24" {
		t.Errorf("kube-proxy %v", proxy)
	}

	cd := containerdConfig("/d/containerd", "/d/containerd/containerd.sock", "/tools", "/d/net.d", PauseImage)
	for _, want := range []string{`sandbox = "localhost/minionvault/pause:v1"`, `BinaryName = "/tools/runc"`, `bin_dirs = ["/tools/cni"]`, `"io.containerd.nri.v1.nri"`, `imports = []`} {
		if !strings.Contains(cd, want) {
			t.Errorf("containerd config lacks %s", want)
		}
	}

	script := cleanupScript("/sys/fs/cgroup/pids/x/minionvault-node-abc123", "/x/minionvault-node-abc123", "minionvault_abc123", h, []string{"/sys/fs/cgroup/pids/x"}, map[string]string{"/proc/sys/kernel/panic": "1"})
	for _, want := range []string{"ip link delete mvnodeabc123", "nft delete table inet minionvault_abc123", "nft delete table ip kube-proxy", `rmdir "/sys/fs/cgroup/pids/x"`, `echo "1" > "/proc/sys/kernel/panic"`} {
		if !strings.Contains(script, want) {
			t.Errorf("clean-up script lacks %q:\n%s", want, script)
		}
	}
	if out, err := exec.Command("/bin/sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("clean-up script: %v: %s", err, out)
	}
}
