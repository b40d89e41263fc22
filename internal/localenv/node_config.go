package localenv

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The node's configuration files. JSON for the Kubernetes components (it is
// YAML too, and quoting is json.Marshal's), TOML for containerd.

// containerdConfig is containerd's config (version 4, containerd 2.4): every
// path in the node's folder, the CRI plugin with runc from the tools folder,
// our pause image pinned as the sandbox image, the CNI plugins and
// configuration of the node, and no plugin that would listen or write
// elsewhere (NRI's socket, tracing, the snapshotters that are not used),
// nor a drop-in of the host's (imports). The sandboxes these tests run in
// withhold CAP_SYS_RESOURCE, so no process can lower its oom_score_adj
// (runc init fails on the pause container's -998 with "failed to update
// /proc/self/oom_score_adj: Permission denied"): restrict_oom_score_adj
// keeps every container at containerd's own score or above, as for
// rootless containerd.
func containerdConfig(dir, sock, toolsDir, cniConfDir, pauseRef string) string {
	q := strconv.Quote
	return fmt.Sprintf(`version = 4
root = %s
state = %s
imports = []
disabled_plugins = [
  "io.containerd.nri.v1.nri",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.differ.v1.erofs",
  "io.containerd.mount-handler.v1.erofs",
  "io.containerd.image-verifier.v1.bindir",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[plugins]
  [plugins."io.containerd.server.v1.grpc"]
    address = %s
  [plugins."io.containerd.server.v1.ttrpc"]
    address = %s
  [plugins."io.containerd.internal.v1.opt"]
    path = %s
  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = %s
  [plugins."io.containerd.cri.v1.runtime"]
    netns_mounts_under_state_dir = true
    restrict_oom_score_adj = true
    cdi_spec_dirs = []
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = %s
          SystemdCgroup = false
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = [%s]
      conf_dir = %s
  [plugins."io.containerd.grpc.v1.cri"]
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`, q(dir+"/root"), q(dir+"/state"), q(sock), q(sock+".ttrpc"), q(dir+"/opt"), q(pauseRef),
		q(toolsDir+"/runc"), q(toolsDir+"/cni"), q(cniConfDir))
}

// cniConfig is the pod network: the bridge (created beforehand, with the
// node's address) and host-local addresses from the pod /24, the node as
// the default gateway. No IP masquerading: nothing is to leave the machine.
func cniConfig(h hostNet, ipamDir string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "minionvault-localenv",
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      h.bridge,
			"isGateway":   false,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type": "host-local",
				"ranges": [][]map[string]string{{{
					"subnet":     h.podCIDR.String(),
					"rangeStart": nthIP(h.podCIDR, 10).String(),
					"rangeEnd":   nthIP(h.podCIDR, 250).String(),
					"gateway":    h.ip.String(),
				}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": ipamDir,
			},
		}},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletConfig: cgroup v1 allowed (these machines are hybrid), cgroupfs
// under the node's own cgroup, no swap check; the API server's webhook
// authentication and authorization for the kubelet's API; no port on
// anything but the node's address; pods' logs in the node's folder; DNS
// off (an empty resolv.conf: no Pod here resolves names, and none should
// send a query off the machine); eviction thresholds low enough for a
// developer's nearly full disk.
func kubeletConfig(k kubeletParams) ([]byte, error) {
	conf := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               k.cgroupRoot,
		"failSwapOn":               false,
		"containerRuntimeEndpoint": "unix://" + k.criSocket,
		"address":                  k.address,
		"port":                     k.port,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              k.healthzPort,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": k.clientCAFile},
		},
		"authorization":               map[string]any{"mode": "Webhook"},
		"podLogsDir":                  k.podLogsDir,
		"resolvConf":                  k.resolvConf,
		"registerNode":                true,
		"maxPods":                     30,
		"serializeImagePulls":         false,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"nodefs.inodesFree": "1%",
			"imagefs.available": "1%",
		},
		"syncFrequency":             "10s",
		"nodeStatusUpdateFrequency": "5s",
		"shutdownGracePeriod":       "0s",
		// Not below 0: see containerdConfig (CAP_SYS_RESOURCE).
		"oomScoreAdj": 0,
	}
	return json.MarshalIndent(conf, "", "  ")
}

type kubeletParams struct {
	cgroupRoot, criSocket, address, clientCAFile, podLogsDir, resolvConf string
	port, healthzPort                                                    int
}

// kubeProxyConfig: nftables mode (Debian's nft), ClusterIPs only, with
// NodePorts on the node's address only; no conntrack sysctl changes.
func kubeProxyConfig(kubeconfig, node string, h hostNet, metricsPort, healthzPort int) ([]byte, error) {
	zero := int32(0)
	conf := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"mode":               "nftables",
		"clientConnection":   map[string]any{"kubeconfig": kubeconfig},
		"hostnameOverride":   node,
		"bindAddress":        h.ip.String(),
		"healthzBindAddress": "127.0.0.1:" + strconv.Itoa(healthzPort),
		"metricsBindAddress": "127.0.0.1:" + strconv.Itoa(metricsPort),
		"clusterCIDR":        h.podCIDR.String(),
		"detectLocalMode":    "ClusterCIDR",
		"nodePortAddresses":  []string{h.ip.String() + "/32"},
		"oomScoreAdj":        zero, // not below 0: see containerdConfig
		"conntrack": map[string]any{
			"maxPerCore":            zero,
			"min":                   zero,
			"tcpEstablishedTimeout": "0s",
			"tcpCloseWaitTimeout":   "0s",
			"udpTimeout":            "0s",
			"udpStreamTimeout":      "0s",
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeSchedulerConfig: the scheduler's client, no leader election.
func kubeSchedulerConfig(kubeconfig string) ([]byte, error) {
	conf := map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": kubeconfig},
		"leaderElection":   map[string]any{"leaderElect": false},
	}
	return json.MarshalIndent(conf, "", "  ")
}
