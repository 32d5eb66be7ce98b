// Command cluster brings a real single-node Kubernetes cluster up and down
// on this machine, for the tests of test/cluster and `make demo CLUSTER=1`:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
// and kube-proxy from the pinned k8s.io/kubernetes (hack/ensure-tools.sh
// node), containerd and runc from Debian, and a Redis for the pods.
//
//	go run ./hack/cluster up   [-dir DIR]   # prints a timeline; DIR/kubeconfig, DIR/cluster.json
//	go run ./hack/cluster down [-dir DIR]   # stops everything, removes its cgroups
//	go run ./hack/cluster demo [-keep]      # make demo CLUSTER=1: the story of test/cluster, as commands
//	go run ./hack/cluster check [-dir DIR]  # what down checks: no process, mount or cgroup of DIR left
//
// What is guaranteed:
//  1. Nothing on the host changes but what apt-get installs (containerd,
//     runc, containernetworking-plugins, when missing), the state directory
//     (default /tmp/redislock-cluster) and the cgroup directories named
//     redislock-cluster in each hierarchy (with a suffix for another
//     directory), which down removes.
//  2. Every component runs inside network, mount and pid namespaces made by
//     `unshare --net --mount --pid --fork --mount-proc`: its own loopback,
//     a veth rl0 whose peer stays down (the node address 10.233.0.2 and a
//     route for the Service addresses), the pods' CNI bridge, and all
//     iptables rules; a tmpfs on /run, private /var/lib and /var/log, and
//     /proc/sys entries the kubelet insists on bind-mounted from files, so
//     the host's sysctls are only read. No packet leaves the namespace: the
//     host reaches the API server and Redis through two loopback ports the
//     node forwards.
//  3. up returns once the node is Ready and the default ServiceAccount
//     exists, or fails within a bounded time with the failing component's
//     log tail, leaving nothing running.
//  4. down stops every process (the pid namespace dies with its first
//     process, killing the containers too) and checks none is left, nor a
//     mount or cgroup (what check reports).
//  5. SIGINT or SIGTERM during up or demo (Ctrl-C) stops what they started,
//     as down does, and they fail saying so; a second signal while that
//     runs is ignored.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", envOr("REDISLOCK_CLUSTER_DIR", defaultDir), "the cluster's state directory ($REDISLOCK_CLUSTER_DIR)")
	pidNS := fs.String("pidns", "", "check: the pid namespace (a /proc/PID/ns/pid link) whose processes count as left")
	bin := fs.String("bin", "", "node: the node binaries' directory")
	keep := fs.Bool("keep", false, "demo: leave the cluster up afterwards")
	_ = fs.Parse(os.Args[2:])
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail(err)
	}
	d := dirs(abs)
	// Ctrl-C or SIGTERM during up or demo tears down what they started;
	// a second one, while that runs, is ignored.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch os.Args[1] {
	case "up":
		err = up(ctx, d)
	case "down":
		err = down(d)
	case "check":
		err = check(d, *pidNS)
	case "demo":
		err = demo(ctx, d, *keep)
	case "node": // started by up, inside the namespaces
		err = node(d, *bin, fs.Args())
	default:
		usage()
	}
	if err != nil {
		stop()
		fail(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cluster up|down|demo|check [-dir DIR] [-keep] [-pidns LINK]")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
	os.Exit(1)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// repoRoot is the repository this program belongs to: the nearest
// directory above the working directory with hack/ensure-tools.sh.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "ensure-tools.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the redislock repository (no hack/ensure-tools.sh above the working directory)")
		}
		dir = parent
	}
}
