package main

import (
	"fmt"
	"os"
)

// containerdConfig is containerd 1.6's: its state on the private /run, the
// CNI bridge below, our pause image, and restrict_oom_score_adj because this
// VM has no CAP_SYS_RESOURCE (a negative oom_score_adj fails in runc with
// "can't get final child's PID from pipe: EOF").
func containerdConfig(d dirs) string {
	return fmt.Sprintf(`version = 2
root = %q
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`, d.path("containerd"), pauseImage, d.path("cni"))
}

// cniConfig: one bridge for the pods, the node's address space as gateway.
func cniConfig(d dirs) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "redislock",
  "plugins": [{
    "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }, {"type": "portmap", "capabilities": {"portMappings": true}}]
}
`, d.path("cni-ipam"), podCIDR)
}

// kubeletConfig: each setting answers an error the kubelet gives on this
// machine (see ../../../shared/REALCLUSTER.md and the package doc).
func kubeletConfig(d dirs) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
volumePluginDir: %q
resolvConf: ""
failSwapOn: false
protectKernelDefaults: true
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 50Mi, nodefs.available: 1%%, imagefs.available: 1%%}
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 1h
nodeStatusReportFrequency: 10s
`, d.cgroupRoot(), d.pki("ca.crt"), nodeIP, d.path("volume-plugins"))
}

// kubeProxyConfig: iptables inside the namespace; the zero conntrack values
// leave the host-wide conntrack settings alone.
func kubeProxyConfig(d dirs) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
clusterCIDR: %s
bindAddress: %s
nodePortAddresses: [primary]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, d.pki("kube-proxy.kubeconfig"), nodeName, podCIDR, nodeIP)
}

// kernelTunables are the /proc/sys values the kubelet insists on; the node
// bind-mounts files holding them over the real entries in its own mount
// namespace, so the kubelet reads them and the host's stay as they are.
var kernelTunables = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }
