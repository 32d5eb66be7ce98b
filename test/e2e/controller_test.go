package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// What a user does: run the controller binary, kubectl apply a RedisLock,
// and read the holder with kubectl get.
func TestControllerBinaryShowsHolderInKubectlGet(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "s3cret"})
	ctrl := startController(t, nil)
	ns := newNamespace(t)
	applyRedisLock(t, ns, "orders-leader", s, "s3cret", durations{lease: 5 * time.Second, renew: 3 * time.Second, retry: 500 * time.Millisecond})

	c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "orders-7d9f8b-x2kq4"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(context.Background(), lockIn(t, ns)+"/orders-leader", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var table string
	waitUntil(t, 30*time.Second, "the holder in kubectl get", func() bool {
		table, _ = kubectl(t, "get", "-n", ns, "redislocks")
		return strings.Contains(table, "orders-7d9f8b-x2kq4")
	})
	t.Logf("kubectl get redislocks:\n%s", table)
	if f := strings.Fields(strings.Split(table, "\n")[1]); len(f) < 6 || f[1] != "orders-7d9f8b-x2kq4" || f[2] != "Standalone" || f[3] != "5s" || f[4] != "0" {
		t.Fatalf("row %q; want NAME HOLDER MODE TTL TRANSITIONS AGE", f)
	}
	if err := ctrl.Stop(30 * time.Second); err != nil {
		t.Fatalf("controller after SIGTERM: %v", err)
	}
}

// Two controller replicas elect the active one with a RedisLock
// (-leader-election-redislock): the active one shows itself as the lock's
// holder, and when it stops, the other takes over.
func TestControllerReplicasElectWithARedisLock(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "s3cret"})
	ns := newNamespace(t)
	d := durations{lease: 3 * time.Second, renew: 2 * time.Second, retry: 500 * time.Millisecond}
	createRedisLock(t, ns, "controller-leader", s, "s3cret", d)
	flag := "-leader-election-redislock=" + ns + "/controller-leader"
	replicas := map[string]*proc.Process{
		"controller-a": startController(t, []string{"POD_NAME=controller-a"}, flag),
		"controller-b": startController(t, []string{"POD_NAME=controller-b"}, flag),
	}
	holder := func() string {
		out, _ := kubectl(t, "get", "-n", ns, "redislock", "controller-leader", "-o", "jsonpath={.status.holderIdentity}")
		return out
	}
	var first string
	waitUntil(t, 30*time.Second, "a controller replica holding its own RedisLock", func() bool {
		first = holder()
		return replicas[first] != nil
	})
	if err := replicas[first].Stop(30 * time.Second); err != nil {
		t.Fatalf("%s after SIGTERM: %v", first, err)
	}
	var second string
	waitUntil(t, 30*time.Second, "the other replica taking over", func() bool {
		second = holder()
		return replicas[second] != nil && second != first
	})
	t.Logf("active controller: %s, then %s", first, second)
}
