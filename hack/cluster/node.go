package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/redislock/redislock/internal/testing/proc"
)

// Deadlines of the node's steps on a loaded 2-core machine; a step that
// takes longer fails with the end of its component's log.
const (
	componentDeadline = 90 * time.Second
	// stopGrace is short: the cluster's state is thrown away, and
	// kube-apiserver alone would wait out any grace for its watches.
	stopGrace = 5 * time.Second
)

// node runs inside the namespaces unshare made (it is pid 1 there): it
// prepares the private mounts and network, starts every component in
// order, waiting for each, prints one timeline line per step, serves the
// two host listeners it inherited (fd 3: the API server, fd 4: Redis), and
// on SIGTERM stops everything in reverse order. When it exits, the kernel
// kills whatever is left in its pid namespace.
func node(d dirs, bin string, images []string) error {
	n := &nodeRun{d: d, bin: bin, start: time.Now()}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	go reapShims(ctx)
	err := n.up(ctx, images)
	if err != nil {
		n.logf("FAILED: %v", err)
	} else {
		n.logf("ready")
		<-ctx.Done()
		n.logf("stopping")
	}
	n.stopAll()
	n.logf("stopped")
	if err != nil {
		return errors.New("the node failed (its FAILED line above says why)")
	}
	return nil
}

type nodeRun struct {
	d     dirs
	bin   string // the node binaries' directory
	start time.Time
	procs []*proc.Process
}

func (n *nodeRun) logf(format string, args ...any) {
	fmt.Printf("cluster: %6.1fs  %s\n", time.Since(n.start).Seconds(), fmt.Sprintf(format, args...))
}

// step runs fn and prints how long it took.
func (n *nodeRun) step(what string, fn func() error) error {
	t := time.Now()
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n.logf("%-34s (%.1fs)", what, time.Since(t).Seconds())
	return nil
}

func (n *nodeRun) up(ctx context.Context, images []string) error {
	steps := []struct {
		what string
		fn   func() error
	}{
		{"private /run, /var/lib, /var/log", n.mounts},
		{"network: lo, rl0 " + nodeCIDR, n.network},
		{"proxies from the host", n.proxies},
		{"etcd", func() error { return n.etcd(ctx) }},
		{"kube-apiserver", func() error { return n.apiserver(ctx) }},
		{"containerd", func() error { return n.containerd(ctx) }},
		{"images imported", func() error { return n.importImages(ctx, images) }},
		{"redis-server " + net.JoinHostPort(nodeIP, strconv.Itoa(redisPort)), func() error { return n.redis(ctx) }},
		{"kube-controller-manager", func() error { return n.controllerManager(ctx) }},
		{"kube-scheduler", func() error { return n.scheduler(ctx) }},
		// The kubelet first: kube-proxy waits for its Node, and exits
		// (to be restarted) when the Node's addresses appear later.
		{"kubelet: node Ready", func() error { return n.kubelet(ctx) }},
		{"kube-proxy", func() error { return n.kubeProxy(ctx) }},
		{"default ServiceAccount", func() error { return n.defaultServiceAccount(ctx) }},
	}
	for _, s := range steps {
		if err := n.step(s.what, s.fn); err != nil {
			return err
		}
	}
	for _, p := range n.procs {
		if p.Exited() {
			return fmt.Errorf("%s exited; the end of its log:\n%s", p.Name(), p.LogTail(2048))
		}
		go func() {
			<-p.Done()
			if ctx.Err() == nil {
				n.logf("%s exited; the end of its log:\n%s", p.Name(), p.LogTail(2048))
			}
		}()
	}
	return nil
}

func (n *nodeRun) mounts() error {
	for _, m := range []struct{ src, dst string }{{n.d.path("var-lib"), "/var/lib"}, {n.d.path("var-log"), "/var/log"}} {
		if err := os.MkdirAll(m.src, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(m.src, m.dst, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", m.src, m.dst, err)
		}
	}
	if err := syscall.Mount("tmpfs", "/run", "tmpfs", 0, "mode=755"); err != nil {
		return fmt.Errorf("tmpfs on /run: %w", err)
	}
	sysctl := n.d.path("sysctl")
	if err := os.MkdirAll(sysctl, 0o755); err != nil {
		return err
	}
	for key, value := range kernelTunables {
		f := filepath.Join(sysctl, strings.ReplaceAll(key, "/", "."))
		if err := writeFile(f, value+"\n"); err != nil {
			return err
		}
		if err := syscall.Mount(f, "/proc/sys/"+key, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on /proc/sys/%s: %w", f, key, err)
		}
	}
	for _, dir := range []string{"volume-plugins", "cni", "cni-ipam", "kubelet", "redis", "etcd"} {
		if err := os.MkdirAll(n.d.path(dir), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func (n *nodeRun) network() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "rl0", "type", "veth", "peer", "name", "rl0-peer"},
		{"addr", "add", nodeCIDR, "dev", "rl0"},
		{"link", "set", "rl0", "up"},
		{"route", "add", "default", "dev", "rl0"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// proxies forwards the host's listeners (inherited as fd 3 and 4) to the
// API server and Redis inside this namespace.
func (n *nodeRun) proxies() error {
	for fd, to := range map[uintptr]string{3: net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort)), 4: net.JoinHostPort(nodeIP, strconv.Itoa(redisPort))} {
		l, err := net.FileListener(os.NewFile(fd, "host listener"))
		if err != nil {
			return fmt.Errorf("fd %d: %w", fd, err)
		}
		go forward(l, to)
	}
	return nil
}

func forward(l net.Listener, to string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			u, err := net.DialTimeout("tcp", to, 5*time.Second)
			if err != nil {
				return
			}
			defer func() { _ = u.Close() }()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
			<-done
		}()
	}
}

// run starts a component, logging to logs/<name>.log, and waits until
// ready reports true.
func (n *nodeRun) run(ctx context.Context, name, path string, args []string, ready func(context.Context) (bool, error)) error {
	if !strings.Contains(path, "/") {
		if p, err := exec.LookPath(path); err == nil {
			path = p
		}
	}
	p, err := proc.Start(proc.Options{Name: name, Path: path, Args: args, Log: n.d.log(name)})
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	return p.WaitReady(ctx, componentDeadline, ready)
}

func (n *nodeRun) stopAll() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		// How it exited after SIGTERM does not matter; not exiting does.
		if err := p.Stop(stopGrace); errors.Is(err, proc.ErrKilled) {
			n.logf("%s", firstLine(err))
		}
	}
}

func firstLine(err error) string { s, _, _ := strings.Cut(err.Error(), "\n"); return s }

func (n *nodeRun) etcd(ctx context.Context) error {
	return n.run(ctx, "etcd", filepath.Join(n.bin, "etcd"), []string{
		"--data-dir", n.d.path("etcd"), "--listen-client-urls", "http://127.0.0.1:2379",
		"--advertise-client-urls", "http://127.0.0.1:2379", "--listen-peer-urls", "http://127.0.0.1:2380",
		"--unsafe-no-fsync", "--log-level", "warn",
	}, httpReady("http://127.0.0.1:2379/health", ""))
}

func (n *nodeRun) apiserver(ctx context.Context) error {
	pki := n.d.pki
	return n.run(ctx, "kube-apiserver", filepath.Join(n.bin, "kube-apiserver"), []string{
		"--etcd-servers", "http://127.0.0.1:2379",
		"--secure-port", strconv.Itoa(apiPort), "--bind-address", "0.0.0.0", "--advertise-address", nodeIP,
		"--service-cluster-ip-range", serviceCIDR,
		"--client-ca-file", pki("ca.crt"), "--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
		// The node's name resolves nowhere (there is no DNS in here).
		"--kubelet-preferred-address-types", "InternalIP",
		"--kubelet-client-certificate", pki("apiserver-kubelet-client.crt"), "--kubelet-client-key", pki("apiserver-kubelet-client.key"),
		"--service-account-key-file", pki("sa.crt"), "--service-account-signing-key-file", pki("sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--authorization-mode", "Node,RBAC", "--allow-privileged",
		"--cert-dir", n.d.path("apiserver-certs"),
	}, httpReady(fmt.Sprintf("https://127.0.0.1:%d/readyz", apiPort), n.d))
}

func (n *nodeRun) containerd(ctx context.Context) error {
	cfg := n.d.path("containerd.toml")
	if err := writeFile(cfg, containerdConfig(n.d)); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(n.d.path("cni"), "10-redislock.conflist"), cniConfig(n.d)); err != nil {
		return err
	}
	return n.run(ctx, "containerd", "containerd", []string{"--config", cfg}, func(ctx context.Context) (bool, error) {
		// Bounded: ctr would wait 10s for a socket that is not there.
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return exec.CommandContext(ctx, "ctr", "--address", "/run/containerd/containerd.sock", "version").Run() == nil, nil
	})
}

func (n *nodeRun) importImages(ctx context.Context, images []string) error {
	for _, a := range images {
		err := proc.Run(ctx, proc.Options{Name: "ctr import " + filepath.Base(a), Path: "ctr", Log: n.d.log("ctr-import"),
			Args: []string{"--address", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "import", a}})
		if err != nil {
			return err
		}
	}
	return nil
}

func (n *nodeRun) redis(ctx context.Context) error {
	return n.run(ctx, "redis-server", "redis-server", []string{
		"--bind", "0.0.0.0", "--port", strconv.Itoa(redisPort), "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", n.d.path("redis"),
	}, func(context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(nodeIP, strconv.Itoa(redisPort)), time.Second)
		if err != nil {
			return false, nil
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return false, nil
		}
		b := make([]byte, 7)
		_, err = io.ReadFull(c, b)
		return err == nil && string(b) == "+PONG\r\n", nil
	})
}

func (n *nodeRun) controllerManager(ctx context.Context) error {
	pki := n.d.pki
	return n.run(ctx, "kube-controller-manager", filepath.Join(n.bin, "kube-controller-manager"), []string{
		"--kubeconfig", pki("controller-manager.kubeconfig"),
		"--authentication-kubeconfig", pki("controller-manager.kubeconfig"),
		"--authorization-kubeconfig", pki("controller-manager.kubeconfig"),
		"--service-account-private-key-file", pki("sa.key"), "--root-ca-file", pki("ca.crt"),
		"--use-service-account-credentials", "--leader-elect=false",
		"--cluster-signing-cert-file", pki("ca.crt"), "--cluster-signing-key-file", pki("ca.key"),
		"--service-cluster-ip-range", serviceCIDR, "--flex-volume-plugin-dir", n.d.path("volume-plugins"),
		"--bind-address", "127.0.0.1", "--cert-dir", n.d.path("controller-manager-certs"),
	}, httpReady("https://127.0.0.1:10257/healthz", ""))
}

func (n *nodeRun) scheduler(ctx context.Context) error {
	kc := n.d.pki("scheduler.kubeconfig")
	return n.run(ctx, "kube-scheduler", filepath.Join(n.bin, "kube-scheduler"), []string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--cert-dir", n.d.path("scheduler-certs"),
	}, httpReady("https://127.0.0.1:10259/healthz", ""))
}

func (n *nodeRun) kubeProxy(ctx context.Context) error {
	cfg := n.d.path("kube-proxy.yaml")
	if err := writeFile(cfg, kubeProxyConfig(n.d)); err != nil {
		return err
	}
	return n.run(ctx, "kube-proxy", filepath.Join(n.bin, "kube-proxy"), []string{"--config", cfg},
		func(ctx context.Context) (bool, error) {
			// Listening is enough: it reports healthy only once the node exists.
			c, err := net.DialTimeout("tcp", "127.0.0.1:10256", time.Second)
			if err != nil {
				return false, nil
			}
			return true, c.Close()
		})
}

func (n *nodeRun) kubelet(ctx context.Context) error {
	cfg := n.d.path("kubelet.yaml")
	if err := writeFile(cfg, kubeletConfig(n.d)); err != nil {
		return err
	}
	cs, err := n.client()
	if err != nil {
		return err
	}
	return n.run(ctx, "kubelet", filepath.Join(n.bin, "kubelet"), []string{
		"--config", cfg, "--kubeconfig", n.d.pki("kubelet.kubeconfig"), "--root-dir", n.d.path("kubelet"),
		"--hostname-override", nodeName, "--node-ip", nodeIP, "--cert-dir", n.d.path("kubelet", "pki"),
	}, func(ctx context.Context) (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// defaultServiceAccount waits for the default namespace's ServiceAccount:
// a pod created before it exists is refused.
func (n *nodeRun) defaultServiceAccount(ctx context.Context) error {
	cs, err := n.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, componentDeadline)
	defer cancel()
	for {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) || ctx.Err() != nil {
			return fmt.Errorf("%w; the end of kube-controller-manager's log:\n%s", err, tail(n.d.log("kube-controller-manager"), 2048))
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (n *nodeRun) client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.d.pki("admin.kubeconfig"))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// httpReady reports true once url answers 200, asking anonymously. With d
// set it trusts only the cluster's CA; without, any certificate (the
// components' self-signed health endpoints).
func httpReady(url string, d dirs) func(context.Context) (bool, error) {
	tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // health of a self-signed loopback endpoint
	if d != "" {
		pool := x509.NewCertPool()
		if ca, err := os.ReadFile(d.pki("ca.crt")); err == nil {
			pool.AppendCertsFromPEM(ca)
		}
		tlsConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	return func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
}

func tail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// reapShims waits for the containerd shims that exit: each daemonizes, so
// its parent is this process, the pid namespace's init. Only shims: every
// other child is waited for by whoever started it.
func reapShims(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...
			s := string(stat)
			i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			if i < 0 || j < i || j+3 > len(s) {
				continue
			}
			if f := strings.Fields(s[j+2:]); len(f) > 1 && s[i+1:j] == "containerd-shim" && f[0] == "Z" && f[1] == "1" {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			}
		}
	}
}
