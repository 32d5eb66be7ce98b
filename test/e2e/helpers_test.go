package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/redisconn"
)

// clusterIDOf returns the identity of the cluster cfg reaches, which
// names its RedisLocks of scope Cluster in Redis.
func clusterIDOf(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	c, err := testenv.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id, err := redisconn.ClusterID(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// lockIn returns the prefix of the Redis lock names of ns's RedisLocks of
// scope Cluster in the test cluster: "<clusterID>/<ns>".
func lockIn(t *testing.T, ns string) string {
	return clusterIDOf(t, apiServer(t)) + "/" + ns
}

// goBuild builds the main package pkg ("." for the redislock binary),
// relative to the repository root, into t's temporary directory.
func goBuild(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(filepath.Clean(filepath.Join(repoRoot, pkg))))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// startController builds and starts `redislock controller` against the
// test API server, with env added to its environment and args after the
// defaults. It is killed when t ends; its output is shown if t failed.
func startController(t *testing.T, env []string, args ...string) *proc.Process {
	t.Helper()
	bin := goBuild(t, ".")
	return startProc(t, 4096, proc.Options{Name: "controller", Path: bin,
		Args: append([]string{"controller", "-metrics-bind-address=0", "-health-probe-bind-address=0"}, args...),
		Env:  append([]string{"KUBECONFIG=" + adminKubeconfig(t)}, env...), Log: filepath.Join(t.TempDir(), "controller.log")})
}

// startProc starts o; the process is killed when t ends, and the last
// tail bytes of its output are shown if t failed.
func startProc(t *testing.T, tail int64, o proc.Options) *proc.Process {
	t.Helper()
	p, err := proc.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s output (last %d bytes):\n%s", p.Name(), tail, p.LogTail(tail))
		}
	})
	return p
}

// freeAddr returns a loopback address (host:port) free to listen on.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// applyRedisLock applies, in ns, a Secret holding password and a RedisLock
// called name on server s with timing d, and waits until it is Ready.
func applyRedisLock(t *testing.T, ns, name string, s *redisproc.Server, password string, d durations) {
	t.Helper()
	createRedisLock(t, ns, name, s, password, d)
	waitUntil(t, 30*time.Second, "RedisLock "+name+" Ready=True", func() bool {
		out, _ := kubectl(t, "get", "-n", ns, "redislock", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
}

// createRedisLock applies, in ns, a Secret holding password and a RedisLock
// called name on server s with timing d.
func createRedisLock(t *testing.T, ns, name string, s *redisproc.Server, password string, d durations) {
	t.Helper()
	createRedisLockWith(t, ns, name, s, password, d, "")
}

// createRedisLockWith is createRedisLock with more spec: YAML lines indented
// by two spaces ("  shards: 64\n", say).
func createRedisLockWith(t *testing.T, ns, name string, s *redisproc.Server, password string, d durations, spec string) {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), "lock.yaml")
	yaml := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: redis-auth
stringData:
  password: %s
---
apiVersion: redislock.io/v1alpha1
kind: RedisLock
metadata:
  name: %s
spec:
  ttl: %s
  renewDeadline: %s
  renewInterval: %s
  redis:
    addrs: [%q]
    passwordSecretRef: {name: redis-auth, key: password}
%s`, password, name, d.lease, d.renew, d.retry, s.Addr, spec)
	if err := os.WriteFile(manifest, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "apply", "-n", ns, "-f", manifest)
}

// faultTiming is the lock timing of the tests that inject faults (the
// agents', the chaos run): short, so that many faults fit in a minute.
var faultTiming = durations{lease: 2 * time.Second, renew: 1500 * time.Millisecond, retry: 300 * time.Millisecond}

// waitUntil polls cond every 50ms until it holds or within has passed.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, within, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// applyAgentRole applies the redislock-agent ClusterRole
// (config/rbac/agent/role.yaml) for t and deletes it when t ends, so that a
// later test never finds a copy that Helm did not make (helm install, even
// a dry run, refuses to take over such an object).
func applyAgentRole(t *testing.T) {
	t.Helper()
	role := filepath.Join(repoRoot, "config", "rbac", "agent", "role.yaml")
	mustKubectl(t, "apply", "-f", role)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "--ignore-not-found", "-f", role) })
}
