package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/redisproc"
	"github.com/redislock/redislock/internal/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// What a user does: run the controller binary, kubectl apply a RedisLock,
// and read the holder with kubectl get.
func TestControllerBinaryShowsHolderInKubectlGet(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "redislock")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s := redistest.Start(t, redisproc.Options{Password: "s3cret"})

	ctrlCmd := exec.Command(bin, "controller", "-metrics-bind-address=0", "-health-probe-bind-address=0")
	ctrlCmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigPath)
	var logs strings.Builder
	ctrlCmd.Stdout, ctrlCmd.Stderr = &logs, &logs
	ctrlCmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ctrlCmd.Start(); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	exited := make(chan struct{})
	go func() {
		exitErr = ctrlCmd.Wait()
		close(exited)
	}()
	defer func() {
		_ = ctrlCmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("controller output:\n%s", logs.String())
		}
	}()

	ns := newNamespace(t)
	manifest := filepath.Join(t.TempDir(), "lock.yaml")
	yaml := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: redis-auth
stringData:
  password: s3cret
---
apiVersion: redislock.io/v1alpha1
kind: RedisLock
metadata:
  name: orders-leader
spec:
  ttl: 5s
  renewInterval: 500ms
  renewDeadline: 3s
  redis:
    addrs: [%q]
    passwordSecretRef: {name: redis-auth, key: password}
`, s.Addr)
	if err := os.WriteFile(manifest, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "apply", "-n", ns, "-f", manifest)
	waitKubectl(t, "Ready=True", func() bool {
		out, _ := kubectl(t, "get", "-n", ns, "redislock", "orders-leader", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})

	c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{Identity: "orders-7d9f8b-x2kq4"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(context.Background(), ns+"/orders-leader", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var table string
	waitKubectl(t, "the holder in kubectl get", func() bool {
		table, _ = kubectl(t, "get", "-n", ns, "redislocks")
		return strings.Contains(table, "orders-7d9f8b-x2kq4")
	})
	t.Logf("kubectl get redislocks:\n%s", table)
	if f := strings.Fields(strings.Split(table, "\n")[1]); len(f) < 6 || f[1] != "orders-7d9f8b-x2kq4" || f[2] != "Standalone" || f[3] != "5s" {
		t.Fatalf("row %q; want NAME HOLDER MODE TTL TRANSITIONS AGE", f)
	}

	if err := ctrlCmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("controller exited with %v after SIGTERM", exitErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("controller still running 30s after SIGTERM")
	}
}

func waitKubectl(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
