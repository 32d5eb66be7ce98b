package redisconn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

const tenantCluster = "0b6f1e6a-7d6c-4c1e-9a57-3b1f0c6d2e11"

// setTenantUser creates, on each server as its default user, the user
// TenantACL gives namespace (with globals), password pw.
func setTenantUser(t *testing.T, namespace, pw string, globals []string, servers ...*redisproc.Server) {
	t.Helper()
	args := []any{"acl", "setuser", TenantUser(namespace), "reset", "on", ">" + pw}
	for _, r := range TenantACL(tenantCluster, namespace, globals) {
		args = append(args, r)
	}
	for _, c := range redistest.Clients(t, servers...) {
		if err := c.Do(context.Background(), args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER: %v", err)
		}
	}
}

// A namespace's Redis user campaigns for its namespace's locks, on one
// server, and with WaitAllReplicas on a Sentinel group (the user on the
// master and its replica) and on a Cluster (on every node): obtain, renew, wait on
// another's release (the events' subscription), release, the restart
// guard. Another namespace's lock, a Global name it was not granted, the
// controller's leader key (a lock of the controller's namespace) and any
// other key fail with NOPERM, through the lock and with a raw SET: the
// crossing a shared password allowed (a tenant's pod took another
// namespace's lock with one SET).
func TestTenantUserReachesOnlyItsNamespacesLocks(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		s := redistest.Start(t, redisproc.Options{})
		setTenantUser(t, "shop", "pw-shop", []string{"orders"}, s)
		testTenantUser(t, func(user, pw string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: s.Addr, Username: user, Password: pw, ContextTimeoutEnabled: true})
		}, 0)
	})
	t.Run("sentinel", func(t *testing.T) {
		g := redistest.StartSentinelGroup(t, 1, 1)
		setTenantUser(t, "shop", "pw-shop", []string{"orders"}, append([]*redisproc.Server{g.Master}, g.Replicas...)...)
		testTenantUser(t, func(user, pw string) redis.UniversalClient {
			return redislock.NewSentinelNode(&redis.FailoverOptions{MasterName: g.MasterName, SentinelAddrs: g.SentinelAddrs(), Username: user, Password: pw, ContextTimeoutEnabled: true})
		}, redislock.WaitAllReplicas)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartReplicatedCluster(t, 3, 1)
		setTenantUser(t, "shop", "pw-shop", []string{"orders"}, cl.Servers...)
		testTenantUser(t, func(user, pw string) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, Username: user, Password: pw, ContextTimeoutEnabled: true})
		}, redislock.WaitAllReplicas)
	})
}

func testTenantUser(t *testing.T, connect func(user, pw string) redis.UniversalClient, wait int) {
	ctx := context.Background()
	rc := connect(TenantUser("shop"), "pw-shop")
	t.Cleanup(func() { _ = rc.Close() })
	client := func(id string) *redislock.Client {
		c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: id, WaitReplicas: wait, NodeTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := client("a"), client("b")
	own := tenantCluster + "/shop/worker"
	// The restart guard holds a name back for a ttl after the server
	// started: wait it out, as a candidate would.
	var l *redislock.Lock
	waitFor(t, 30*time.Second, "the first grant of its own lock", func() bool {
		var err error
		l, err = a.Obtain(ctx, own, 10*time.Second)
		if err != nil && strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("its own lock: %v", err)
		}
		return err == nil
	})
	if err := l.Refresh(ctx); err != nil {
		t.Fatalf("renew its own lock: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		wl, err := b.ObtainWait(wctx, own, 10*time.Second, nil)
		if err == nil {
			err = wl.Release(ctx)
		}
		got <- err
	}()
	admin := connect("", "")
	t.Cleanup(func() { _ = admin.Close() })
	channel := redislock.DefaultKeyPrefix + "{" + own + "}:events"
	waitFor(t, 10*time.Second, "the waiter to subscribe to the lock's events", func() bool {
		n, err := admin.PubSubNumSub(ctx, channel).Result()
		if _, ok := admin.(*redis.ClusterClient); ok {
			n, err = admin.PubSubShardNumSub(ctx, channel).Result()
		}
		return err == nil && n[channel] > 0
	})
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release its own lock: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("wait for its own lock: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not get the released lock within 30s")
	}
	if err := obtainRelease(ctx, a, "global/orders"); err != nil {
		t.Fatalf("the Global name it was granted: %v", err)
	}

	for _, name := range []string{
		tenantCluster + "/billing/worker",                        // another namespace's lock
		tenantCluster + "/shop-2/worker",                         // a namespace whose name starts with its own
		"global/payments",                                        // a Global name not granted
		tenantCluster + "/redislock-system/redislock-controller", // the controller's leader key
	} {
		err := obtainRelease(ctx, a, name)
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("obtain %s: %v; want NOPERM", name, err)
		}
		key := redislock.DefaultKeyPrefix + "{" + name + "}"
		if err := rc.Set(ctx, key, "v1:stolen:mallory", time.Minute).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("SET %s: %v; want NOPERM", key, err)
		}
	}
	for _, key := range []string{"unrelated", redislock.DefaultKeyPrefix + "replicas"} {
		if err := rc.Set(ctx, key, "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("SET %s: %v; want NOPERM", key, err)
		}
	}
	if err := rc.Do(ctx, "flushall").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("FLUSHALL: %v; want NOPERM", err)
	}
}

// obtainRelease obtains name with c and releases it.
func obtainRelease(ctx context.Context, c *redislock.Client, name string) error {
	l, err := c.Obtain(ctx, name, 10*time.Second)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

// waitFor polls cond every 50ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}
