package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/redisproc"
)

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

// controllerProc is a running `redislock controller`.
type controllerProc struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
}

// startController builds and starts `redislock controller` against the
// test API server, with env added to its environment and args after the
// defaults. It is killed when t ends; its output is shown if t failed.
func startController(t *testing.T, env []string, args ...string) *controllerProc {
	t.Helper()
	bin := goBuild(t, ".")
	logPath := filepath.Join(t.TempDir(), "controller.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	c := &controllerProc{cmd: exec.Command(bin, append([]string{"controller", "-metrics-bind-address=0", "-health-probe-bind-address=0"}, args...)...), exited: make(chan struct{})}
	c.cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfigPath), env...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.exitErr = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
		_ = logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("controller output (last 4KiB):\n%s", tail(out, 4096))
		}
	})
	return c
}

// terminate sends SIGTERM and returns how the controller exited, or an
// error if it has not within the timeout.
func (c *controllerProc) terminate(within time.Duration) error {
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-c.exited:
		return c.exitErr
	case <-time.After(within):
		return fmt.Errorf("controller still running %v after SIGTERM", within)
	}
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
`, password, name, d.lease, d.renew, d.retry, s.Addr)
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
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
