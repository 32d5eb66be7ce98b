package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	upDeadline   = 6 * time.Minute // after the binaries are built
	downDeadline = 60 * time.Second
)

// packages are what the node needs from Debian: a file each provides.
var packages = []struct{ pkg, file string }{
	{"containerd", "/usr/bin/containerd"},
	{"runc", "/usr/sbin/runc"},
	{"containernetworking-plugins", "/usr/lib/cni/bridge"},
	{"iptables", "/usr/sbin/iptables"},
	{"iproute2", "/usr/sbin/ip"},
	{"redis-server", "/usr/bin/redis-server"},
	{"python3", "/usr/bin/python3"}, // for the image of examples/python-worker
}

type timeline struct{ start time.Time }

func (t timeline) step(what string, fn func() error) error {
	s := time.Now()
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fmt.Printf("cluster: %6.1fs  %-34s (%.1fs)\n", time.Since(t.start).Seconds(), what, time.Since(s).Seconds())
	return nil
}

func up(ctx context.Context, d dirs) error {
	if os.Geteuid() != 0 {
		return errors.New("up needs root (namespaces, mounts, cgroups, containerd)")
	}
	if s, err := d.readState(); err == nil && alive(s.Pid) {
		return fmt.Errorf("a cluster is already up (pid %d, %s); run down first", s.Pid, d)
	}
	if err := cleanup(d); err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(d.path("logs")); err != nil { // the last run's, which down keeps
		return err
	}
	t := timeline{start: time.Now()}
	var bin, product string
	var archives []string
	var apiL, redisL *net.TCPListener
	steps := []struct {
		what string
		fn   func() error
	}{
		{"packages (apt-get when missing)", func() error { return ensurePackages(ctx) }},
		{"node binaries (hack/ensure-tools.sh)", func() error {
			out, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "ensure-tools.sh"), "--print", "envtest", "node").Output()
			if err != nil {
				return err
			}
			bin = strings.Fields(string(out))[0]
			return nil
		}},
		{"certificates, kubeconfigs", func() error {
			if err := os.MkdirAll(d.path("logs"), 0o755); err != nil {
				return err
			}
			if apiL, err = listen(); err != nil {
				return err
			}
			if redisL, err = listen(); err != nil {
				return err
			}
			return writePKI(d, apiL.Addr().String())
		}},
		{"images (OCI archives)", func() error {
			if product, err = productImage(root); err != nil {
				return err
			}
			archives, err = buildImages(ctx, root, d, product)
			return err
		}},
		{"cgroup root " + d.cgroupRoot(), func() error { return makeCgroups(d) }},
	}
	for _, s := range steps {
		err := t.step(s.what, s.fn)
		if ctx.Err() != nil {
			err = interrupted(ctx)
		}
		if err != nil {
			return errors.Join(err, cleanup(d))
		}
	}
	state := &State{
		Kubeconfig: d.path("kubeconfig"), RedisAddr: net.JoinHostPort(nodeIP, strconv.Itoa(redisPort)),
		HostRedisAddr: redisL.Addr().String(), ProductImage: product, PauseImage: pauseImage, AppImage: appImage, PythonImage: pythonImage,
	}
	err = t.step("namespaces, components", func() error { return startNode(ctx, d, bin, archives, state, apiL, redisL) })
	// As in the steps above: a signal after the node said ready but before
	// startNode returned must not leave up exiting 0 with the cluster up.
	if ctx.Err() != nil {
		err = interrupted(ctx)
	}
	if err != nil {
		return errors.Join(err, down(d))
	}
	fmt.Printf("cluster: up in %.1fs: export KUBECONFIG=%s; Redis for pods at %s\n", time.Since(t.start).Seconds(), state.Kubeconfig, state.RedisAddr)
	return nil
}

// interrupted is up's error once ctx ends: a signal (main's context).
func interrupted(ctx context.Context) error {
	fmt.Println("cluster: interrupted: stopping what was started")
	return fmt.Errorf("interrupted (%w); what was started is stopped", ctx.Err())
}

func listen() (*net.TCPListener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return l.(*net.TCPListener), nil
}

func ensurePackages(ctx context.Context) error {
	var missing []string
	for _, p := range packages {
		if _, err := os.Stat(p.file); err != nil {
			missing = append(missing, p.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	fmt.Printf("cluster: apt-get update, then apt-get install %s\n", strings.Join(missing, " "))
	// The packages' services stay stopped (the cluster runs its own
	// containerd, in its namespaces): policy-rc.d refuses them, as
	// hack/ensure-packages.sh does, and goes again after.
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
			return err
		}
		defer func() { _ = os.Remove(policy) }()
	}
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
		}
	}
	return nil
}

// productImage is the chart's default image: its repository and appVersion.
func productImage(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "charts", "redislock", "Chart.yaml"))
	if err != nil {
		return "", err
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return "", fmt.Errorf("charts/redislock/Chart.yaml: %w", err)
	}
	if chart.AppVersion == "" {
		return "", errors.New("charts/redislock/Chart.yaml: no appVersion")
	}
	return "ghcr.io/redislock/redislock:" + chart.AppVersion, nil
}

// startNode copies this program into d (go run deletes its own binary) and
// starts it as the first process of new namespaces, detached, with the two
// host listeners; it returns once the node prints "ready", printing its
// timeline, or fails with its log, or once ctx ends.
func startNode(ctx context.Context, d dirs, bin string, archives []string, state *State, apiL, redisL *net.TCPListener) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	exe := d.path("cluster")
	if err := copyFile(self, exe); err != nil {
		return err
	}
	logf, err := os.OpenFile(d.log("node"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	apiF, err := apiL.File()
	if err != nil {
		return err
	}
	redisF, err := redisL.File()
	if err != nil {
		return err
	}
	cmd := exec.Command("unshare", append([]string{"--net", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child",
		exe, "node", "-dir", string(d), "-bin", bin}, archives...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{apiF, redisF}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives up; down stops it
	if err := cmd.Start(); err != nil {
		return err
	}
	state.Pid = cmd.Process.Pid
	_ = cmd.Process.Release()
	for _, f := range []*os.File{apiF, redisF} {
		_ = f.Close()
	}
	_ = apiL.Close()
	_ = redisL.Close()
	if err := d.writeState(state); err != nil {
		return err
	}
	// Follow the node's log until it says ready or FAILED.
	f, err := os.Open(d.log("node"))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReader(f)
	deadline := time.NewTimer(upDeadline)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond) // the log file has no notification
	defer poll.Stop()
	var partial string
	failed := false // then print the rest (the failing component's log tail) until the node exits
	for {
		if state.PidNS == "" {
			// Recorded as soon as the node runs, so that down (after a
			// Ctrl-C, say) checks its namespace too.
			if nodePid := childOf(state.Pid); nodePid > 0 {
				if state.PidNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", nodePid)); state.PidNS != "" {
					if err := d.writeState(state); err != nil {
						return err
					}
				}
			}
		}
		line, err := r.ReadString('\n')
		partial += line
		if err != nil {
			switch {
			case failed && !alive(state.Pid):
				return errors.New("the node failed (above)")
			case !alive(state.Pid):
				return fmt.Errorf("the node exited; the end of %s:\n%s", d.log("node"), tail(d.log("node"), 3000))
			}
			select {
			case <-ctx.Done():
				return interrupted(ctx)
			case <-deadline.C:
				return fmt.Errorf("the node was not ready within %v; the end of %s:\n%s", upDeadline, d.log("node"), tail(d.log("node"), 3000))
			case <-poll.C:
			}
			continue
		}
		line, partial = partial, ""
		fmt.Print("  node " + line)
		switch {
		case strings.Contains(line, "  FAILED: "):
			failed = true
		case failed:
		case strings.HasSuffix(line, "  ready\n"):
			return d.writeState(state)
		}
	}
}

func down(d dirs) error {
	start := time.Now()
	s, err := d.readState()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var errs []error
	if s != nil && alive(s.Pid) {
		if nodePid := childOf(s.Pid); nodePid > 0 {
			_ = syscall.Kill(nodePid, syscall.SIGTERM)
		}
		if !waitGone(s.Pid, downDeadline) {
			errs = append(errs, fmt.Errorf("the node did not stop within %v: killed", downDeadline))
			_ = syscall.Kill(s.Pid, syscall.SIGKILL) // --kill-child: the node, and with it its pid namespace
			waitGone(s.Pid, 10*time.Second)
		}
	}
	// check lists any process, mount or cgroup left, once.
	var pidNS string
	if s != nil {
		pidNS = s.PidNS
	}
	errs = append(errs, cleanup(d), check(d, pidNS))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("cluster: down in %.1fs; logs kept in %s\n", time.Since(start).Seconds(), d.path("logs"))
	return nil
}

// cleanup removes the cgroups, the state file and the heavy state of a
// cluster that is not running; it refuses if a mount is left below d.
func cleanup(d dirs) error {
	if s, err := d.readState(); err == nil && alive(s.Pid) {
		return fmt.Errorf("cleanup: pid %d still runs", s.Pid)
	}
	if err := removeCgroups(d); err != nil {
		return err
	}
	if m := mountsBelow(string(d)); len(m) > 0 {
		return fmt.Errorf("cleanup: mounts left below %s: %s", d, strings.Join(m, ", "))
	}
	for _, sub := range []string{"cluster.json", "containerd", "var-lib", "kubelet", "etcd", "images", "cni-ipam"} {
		if err := os.RemoveAll(d.path(sub)); err != nil {
			return err
		}
	}
	return nil
}

// cgroupMounts are the host's cgroup (v1 and v2) mount points.
func cgroupMounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		_, after, ok := strings.Cut(line, " - ")
		f := strings.Fields(line)
		if !ok || len(f) < 5 {
			continue
		}
		if fstype := strings.Fields(after)[0]; fstype == "cgroup" || fstype == "cgroup2" {
			mounts = append(mounts, f[4])
		}
	}
	return mounts, nil
}

func makeCgroups(d dirs) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := os.MkdirAll(filepath.Join(m, d.cgroupRoot()), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// removeCgroups removes d's cgroup root tree in every hierarchy, deepest
// first, retrying while the kernel still counts exiting tasks.
func removeCgroups(d dirs) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range mounts {
		root := filepath.Join(m, d.cgroupRoot())
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, dir := range dirs {
			for {
				err := syscall.Rmdir(dir)
				if err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("remove cgroup %s: %w", dir, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return nil
}

// check reports what is left of the cluster of d: a process in pidNS (if
// set) or naming d, a mount below d, a cgroup directory of d's root. down
// ends with it; the tests run it (the check verb) after an interrupted up.
func check(d dirs, pidNS string) error {
	var left []string
	for _, p := range leftovers(d, pidNS) {
		left = append(left, "process "+p)
	}
	for _, m := range mountsBelow(string(d)) {
		left = append(left, "mount "+m)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, d.cgroupRoot())); err == nil {
			left = append(left, "cgroup "+filepath.Join(m, d.cgroupRoot()))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left of the cluster in %s: %s", d, strings.Join(left, "; "))
	}
	return nil
}

func mountsBelow(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []string{err.Error()}
	}
	var below []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			below = append(below, f[4])
		}
	}
	return below
}

// leftovers lists the processes still in the cluster's pid namespace, or
// naming its state directory (what `pgrep -f DIR` finds), but this one.
func leftovers(d dirs, pidNS string) []string {
	var left []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")
		if (pidNS != "" && ns == pidNS) || strings.Contains(args, string(d)+"/") || strings.HasSuffix(args, string(d)) {
			left = append(left, fmt.Sprintf("%d %s", pid, args))
		}
	}
	if out, err := exec.Command("pgrep", "-f", string(d)).Output(); err == nil {
		for _, p := range strings.Fields(string(out)) {
			if pid, _ := strconv.Atoi(p); pid != os.Getpid() && alive(pid) {
				left = append(left, "pgrep: "+p)
			}
		}
	}
	return left
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func waitGone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// childOf is pid's first child: unshare's is the node.
func childOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	child, _ := strconv.Atoi(f[0])
	return child
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
