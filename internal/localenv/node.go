package localenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Node is a real single-node cluster around the environment's API server
// (Options.Node): containerd with its CRI plugin and runc, CNI bridge
// networking, the kubelet, kube-controller-manager, kube-scheduler and
// kube-proxy, all built from their Go modules by `make node-tools`. Pods run
// for real: images imported into containerd, containers run by runc with
// the securityContext the kubelet asks for, probes, Services through
// kube-proxy, ServiceAccount tokens projected into Pods.
//
// The control plane, Vault and the kubelet listen on the node's address IP,
// on a bridge of the host that only the Pods are on: a Pod reaches the API
// server through the `kubernetes` Service and Vault at IP. Nothing here
// reaches beyond the machine. The node needs root and a cgroup v1 (hybrid)
// host, as this project's machines are; one node runs at a time per host
// (kube-proxy's nftables tables have fixed names).
type Node struct {
	// Name is the Node object's name.
	Name string
	// IP is the node's address on its bridge.
	IP string
	// PodCIDR and ServiceCIDR are the Pods' and the ClusterIPs' ranges.
	PodCIDR, ServiceCIDR string
	// Bridge is the pods' bridge interface.
	Bridge string
	// Dir holds the node's state, configuration and logs (containerd.log,
	// kubelet.log, kube-controller-manager.log, kube-scheduler.log,
	// kube-proxy.log); PodLogsDir the containers' logs.
	Dir, PodLogsDir string
	// CgroupRoot is the kubelet's cgroupRoot, in every cgroup hierarchy.
	CgroupRoot string
	// ContainerdSocket is containerd's gRPC socket.
	ContainerdSocket string

	toolsDir  string
	net       hostNet
	table     string
	cleanup   string
	pidsProcs string
	wd        *watchdog
	holder    *nodeProc
	procs     []*nodeProc
	exited    chan string
	stopping  atomic.Bool
	stopOnce  sync.Once
}

type nodeProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// PauseImage is the CRI sandbox image the node imports from the tools
// folder (pause-image.tar, hack/tools/pause).
const PauseImage = "localhost/minionvault/pause:v1"

// nodeTools are the files the node needs in the tools folder.
var nodeTools = []string{
	"kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy",
	"containerd", "containerd-shim-runc-v2", "ctr", "runc",
	"cni/bridge", "cni/host-local", "cni/loopback", "pause-image.tar",
}

// prepareNode checks what the node needs and lays out the host side: the
// bridge with the node's address (the API server and Vault bind to it, so
// it comes first), the cgroups, and the clean-up script that undoes both.
func prepareNode(ctx context.Context, envDir, toolsDir string, wd *watchdog) (*Node, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("localenv: the node (containerd, the kubelet) needs root")
	}
	if toolsDir == "" {
		return nil, errors.New("localenv: no tools folder for the node: set " + EnvToolsDir + ", or run inside the repository")
	}
	for _, t := range nodeTools {
		if !fileExists(filepath.Join(toolsDir, t)) {
			return nil, fmt.Errorf("localenv: %s not found in %s: run `make node-tools` (see docs/development.md)", t, toolsDir)
		}
	}
	for _, c := range []string{"ip", "nft", "unshare", "nsenter", "mount", "sleep"} {
		if _, err := exec.LookPath(c); err != nil {
			return nil, fmt.Errorf("localenv: the node needs %s on PATH (Debian: iproute2, nftables, util-linux, coreutils): %w", c, err)
		}
	}
	id := newNodeID()
	h, err := pickHostNet(id)
	if err != nil {
		return nil, err
	}
	n := &Node{
		Name:        "minionvault-" + id,
		IP:          h.ip.String(),
		PodCIDR:     h.podCIDR.String(),
		ServiceCIDR: h.serviceCIDR.String(),
		Bridge:      h.bridge,
		Dir:         filepath.Join(envDir, "node"),
		toolsDir:    toolsDir,
		net:         h,
		table:       "minionvault_" + id,
		cleanup:     filepath.Join(envDir, "cleanup.sh"),
		wd:          wd,
		exited:      make(chan string, 16),
	}
	n.PodLogsDir = filepath.Join(n.Dir, "pod-logs")
	n.ContainerdSocket = filepath.Join(n.Dir, "containerd", "containerd.sock")
	if err := os.MkdirAll(n.PodLogsDir, 0o755); err != nil {
		return nil, err
	}
	// The clean-up script first, so that a failure or a crash from here on
	// leaves nothing behind (the watchdog runs it).
	hier, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	root, err := nodeCgroupPath(id)
	if err != nil {
		return nil, err
	}
	n.CgroupRoot = root
	script := cleanupScript(filepath.Join(hier["pids"], root), root, n.table, h, missingCgroupParents(root, hier), currentSysctls(kubeletSysctls))
	if err := os.WriteFile(n.cleanup, []byte(script), 0o700); err != nil {
		return nil, err
	}
	if n.pidsProcs, err = makeNodeCgroups(root, hier); err != nil {
		return n, err
	}
	if err := h.setUp(ctx, n.table); err != nil {
		return n, err
	}
	return n, nil
}

// configureAPIServer makes envtest's API server the node's: bound to the
// node's address (Pods reach it there through the `kubernetes` Service),
// with a certificate for the Service's ClusterIP and names, the Service
// range on the bridge, the Node authorizer and NodeRestriction for the
// kubelet, and the ServiceAccount admission plugin that envtest turns off
// (it gives Pods their ServiceAccount token).
func (n *Node) configureAPIServer(api *envtest.APIServer) error {
	port, err := freePortOn(n.IP)
	if err != nil {
		return err
	}
	api.SecureServing.Address = n.IP
	api.SecureServing.Port = strconv.Itoa(port)
	kubernetesSvc := nthIP(n.net.serviceCIDR, 1)
	ca, err := nodeCerts(api.CertDir,
		[]net.IP{n.net.ip, net.IPv4(127, 0, 0, 1), kubernetesSvc},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	api.SecureServing.CA = ca
	api.Configure().
		Set("advertise-address", n.IP).
		Set("service-cluster-ip-range", n.ServiceCIDR).
		Set("authorization-mode", "Node,RBAC").
		Set("enable-admission-plugins", "NodeRestriction").
		Disable("disable-admission-plugins")
	return nil
}

// start starts the node's processes against the running API server and
// waits until the Node is Ready and the default namespace has its
// ServiceAccount (Pods cannot be created before).
func (n *Node) start(ctx context.Context, te *envtest.Environment, c client.Client, certDir string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// The mount namespace.
	ready := filepath.Join(n.Dir, "mountns.ready")
	holder, err := n.startProc("mountns", false, []string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", holderScript, ready})
	if err != nil {
		return err
	}
	n.holder = holder
	if err := waitFor(ctx, "the node's mount namespace", n.exited, func() error {
		if fileExists(ready) {
			return nil
		}
		return errors.New("not ready")
	}); err != nil {
		return n.failed(err)
	}

	// containerd, with the pod network's configuration and our pause image.
	cdDir := filepath.Join(n.Dir, "containerd")
	cniConfDir := filepath.Join(n.Dir, "cni", "net.d")
	for _, d := range []string{cdDir, cniConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	cni, err := cniConfig(n.net, filepath.Join(n.Dir, "cni", "ipam"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConfDir, "10-localenv.conflist"), cni, 0o644); err != nil {
		return err
	}
	cdConf := filepath.Join(cdDir, "config.toml")
	if err := os.WriteFile(cdConf, []byte(containerdConfig(cdDir, n.ContainerdSocket, n.toolsDir, cniConfDir, PauseImage)), 0o644); err != nil {
		return err
	}
	if _, err := n.startProc("containerd", true, []string{filepath.Join(n.toolsDir, "containerd"), "--config", cdConf}); err != nil {
		return err
	}
	if err := waitFor(ctx, "containerd", n.exited, func() error {
		_, err := n.Ctr(ctx, "version")
		return err
	}); err != nil {
		return n.failed(err)
	}
	if out, err := n.Ctr(ctx, "images", "import", filepath.Join(n.toolsDir, "pause-image.tar")); err != nil {
		return n.failed(fmt.Errorf("localenv: importing the pause image: %w: %s", err, out))
	}

	// The control plane's other components and the node's, each as its own
	// user of the API server with the roles Kubernetes bootstraps for it.
	kubeconfig := func(name, user string, groups ...string) (string, error) {
		u, err := te.AddUser(envtest.User{Name: user, Groups: groups}, nil)
		if err != nil {
			return "", fmt.Errorf("localenv: user %s: %w", user, err)
		}
		data, err := u.KubeConfig()
		if err != nil {
			return "", err
		}
		p := filepath.Join(n.Dir, name+".kubeconfig")
		return p, os.WriteFile(p, data, 0o600)
	}
	kcmConfig, err := kubeconfig("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	if _, err := n.startProc("kube-controller-manager", false, []string{
		filepath.Join(n.toolsDir, "kube-controller-manager"),
		"--kubeconfig=" + kcmConfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + filepath.Join(certDir, "sa-signer.key"),
		"--root-ca-file=" + filepath.Join(certDir, "ca.crt"),
		"--cluster-name=" + n.Name,
		"--concurrent-deployment-syncs=2",
	}); err != nil {
		return err
	}

	schedKubeconfig, err := kubeconfig("kube-scheduler", "system:kube-scheduler")
	if err != nil {
		return err
	}
	schedConf, err := kubeSchedulerConfig(schedKubeconfig)
	if err != nil {
		return err
	}
	schedConfPath := filepath.Join(n.Dir, "kube-scheduler.json")
	if err := os.WriteFile(schedConfPath, schedConf, 0o644); err != nil {
		return err
	}
	if _, err := n.startProc("kube-scheduler", false, []string{
		filepath.Join(n.toolsDir, "kube-scheduler"), "--config=" + schedConfPath, "--secure-port=0",
	}); err != nil {
		return err
	}

	proxyKubeconfig, err := kubeconfig("kube-proxy", "system:kube-proxy")
	if err != nil {
		return err
	}
	proxyMetrics, err := freePortOn("127.0.0.1")
	if err != nil {
		return err
	}
	proxyHealthz, err := freePortOn("127.0.0.1")
	if err != nil {
		return err
	}
	proxyConf, err := kubeProxyConfig(proxyKubeconfig, n.Name, n.net, proxyMetrics, proxyHealthz)
	if err != nil {
		return err
	}
	proxyConfPath := filepath.Join(n.Dir, "kube-proxy.json")
	if err := os.WriteFile(proxyConfPath, proxyConf, 0o644); err != nil {
		return err
	}
	if _, err := n.startProc("kube-proxy", false, []string{
		filepath.Join(n.toolsDir, "kube-proxy"), "--config=" + proxyConfPath,
	}); err != nil {
		return err
	}

	kubeletKubeconfig, err := kubeconfig("kubelet", "system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	kubeletPort, err := freePortOn(n.IP)
	if err != nil {
		return err
	}
	kubeletHealthz, err := freePortOn("127.0.0.1")
	if err != nil {
		return err
	}
	kubeletDir := filepath.Join(n.Dir, "kubelet")
	resolv := filepath.Join(n.Dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# no DNS on the localenv node\n"), 0o644); err != nil {
		return err
	}
	kcfg, err := kubeletConfig(kubeletParams{
		cgroupRoot: n.CgroupRoot, criSocket: n.ContainerdSocket, address: n.IP,
		podLogsDir: n.PodLogsDir, resolvConf: resolv, port: kubeletPort, healthzPort: kubeletHealthz,
	})
	if err != nil {
		return err
	}
	kcfgPath := filepath.Join(n.Dir, "kubelet.json")
	if err := os.WriteFile(kcfgPath, kcfg, 0o644); err != nil {
		return err
	}
	if _, err := n.startProc("kubelet", true, []string{
		filepath.Join(n.toolsDir, "kubelet"),
		"--config=" + kcfgPath,
		"--kubeconfig=" + kubeletKubeconfig,
		"--root-dir=" + kubeletDir,
		"--cert-dir=" + filepath.Join(kubeletDir, "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--volume-plugin-dir=" + filepath.Join(kubeletDir, "volume-plugins"),
	}); err != nil {
		return err
	}

	if err := waitFor(ctx, "node "+n.Name+" Ready", n.exited, func() error {
		node := &corev1.Node{}
		if err := c.Get(ctx, types.NamespacedName{Name: n.Name}, node); err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("Ready=%s: %s", cond.Status, cond.Message)
			}
		}
		return errors.New("no Ready condition yet")
	}); err != nil {
		return n.failed(err)
	}
	if err := waitFor(ctx, "the default ServiceAccount", n.exited, func() error {
		return c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
	}); err != nil {
		return n.failed(err)
	}
	return nil
}

// failed adds the tails of the node's logs to err.
func (n *Node) failed(err error) error {
	return fmt.Errorf("%w%s", err, tails(n.Logs()...))
}

// Logs are the node's log files.
func (n *Node) Logs() []string {
	var logs []string
	for _, name := range []string{"mountns", "containerd", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet"} {
		logs = append(logs, filepath.Join(n.Dir, name+".log"))
	}
	return logs
}

// startProc starts argv as one of the node's daemons: in its own process
// group (the watchdog's), in the node's cgroup (the clean-up kills all of
// it), and with mountNS in the node's mount namespace. Output goes to
// Dir/<name>.log.
func (n *Node) startProc(name string, mountNS bool, argv []string) (*nodeProc, error) {
	logFile, err := os.Create(filepath.Join(n.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own
	// Into the cgroup before the daemon starts, so no child of it escapes.
	args := []string{"-c", `procs="$1"; shift; echo $$ > "$procs" && exec "$@"`, "localenv-" + name, n.pidsProcs}
	if mountNS {
		args = append(args, "nsenter", "--mount=/proc/"+strconv.Itoa(n.holder.cmd.Process.Pid)+"/ns/mnt", "--")
	}
	cmd := exec.Command("/bin/sh", append(args, argv...)...)
	cmd.Dir = n.Dir
	cmd.Env = n.env()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("localenv: starting %s: %w", name, err)
	}
	n.wd.adopt(cmd.Process.Pid)
	p := &nodeProc{name: name, cmd: cmd, done: make(chan struct{})}
	n.procs = append(n.procs, p)
	go func() {
		_ = cmd.Wait()
		close(p.done)
		if !n.stopping.Load() {
			select {
			case n.exited <- name:
			default:
			}
		}
	}()
	return p, nil
}

// env is the daemons' environment: the tools folder first on PATH
// (containerd finds its shim there), no KUBECONFIG.
func (n *Node) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+n.toolsDir+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
}

// Ctr runs ctr against the node's containerd in the CRI's namespace
// (k8s.io), inside the node's mount namespace (an image import unpacks
// there), and returns its standard output (and standard error on failure).
func (n *Node) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	if n.holder == nil {
		return nil, errors.New("localenv: the node is not started")
	}
	argv := append([]string{"--mount=/proc/" + strconv.Itoa(n.holder.cmd.Process.Pid) + "/ns/mnt", "--",
		filepath.Join(n.toolsDir, "ctr"), "--address", n.ContainerdSocket, "--namespace", "k8s.io"}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", argv...)
	cmd.Env = n.env()
	// Standard output only: ctr warns on standard error (about cgroup v1).
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return append(out.Bytes(), stderr.Bytes()...), err
	}
	return out.Bytes(), nil
}

// ImportImage imports an image tar (docker save or OCI layout) into the
// node's containerd, where the kubelet finds it without a registry.
func (n *Node) ImportImage(ctx context.Context, tar string) error {
	out, err := n.Ctr(ctx, "images", "import", "--no-unpack=false", tar)
	if err != nil {
		return fmt.Errorf("localenv: ctr images import %s: %w: %s", tar, err, bytes.TrimSpace(out))
	}
	return nil
}

// kill kills every process of the node: its daemons' process groups, then
// whatever is still in its cgroups (shims, containers). The host state
// stays until stop: the API server and Vault still listen on the node's
// address, and the API server's own loopback client uses it while it shuts
// down.
func (n *Node) kill() {
	if n == nil {
		return
	}
	n.stopping.Store(true)
	for _, p := range n.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	if n.pidsProcs == "" {
		return
	}
	root := filepath.Dir(filepath.Dir(n.pidsProcs))
	for range 50 {
		var pids []int
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "cgroup.procs" {
				b, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids = append(pids, pid)
					}
				}
			}
			return nil
		})
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop kills every process of the node and undoes its host state.
func (n *Node) stop() error {
	if n == nil {
		return nil
	}
	var err error
	n.stopOnce.Do(func() {
		n.kill()
		if fileExists(n.cleanup) {
			if out, e := exec.Command("/bin/sh", n.cleanup).CombinedOutput(); e != nil {
				err = fmt.Errorf("localenv: node clean-up: %w: %s", e, out)
			}
		}
		for _, p := range n.procs {
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				err = errors.Join(err, fmt.Errorf("localenv: %s did not exit", p.name))
			}
		}
	})
	return err
}
