package redislock_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/redisproc"
	"github.com/redislock/redislock/internal/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// startCluster starts a three-master Redis Cluster and returns a client.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	var addrs []string
	for i := 0; i < 3; i++ {
		s := redistest.Start(t, redisproc.Options{Args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}})
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	waitFor(t, 10*time.Second, "the cluster to serve every slot", func() bool {
		info, err := c.ClusterInfo(context.Background()).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	return c
}

// A lock's keys share a hash tag, so its multi-key scripts run on a
// Cluster without CROSSSLOT errors, and the whole lifecycle works there.
func TestLockOnRedisCluster(t *testing.T) {
	cc := startCluster(t)
	a, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{Identity: "b"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Names spread over the slots, so every master serves some.
	for _, name := range []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"} {
		l, err := a.Obtain(ctx, name, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := b.Obtain(ctx, name, 10*time.Second); err == nil {
			t.Fatalf("%s: obtained twice", name)
		}
		if h, err := b.Inspect(ctx, name); err != nil || h.Identity != "a" {
			t.Fatalf("%s: Inspect %+v, %v", name, h, err)
		}
		if err := l.Refresh(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		l2, err := b.Obtain(ctx, name, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l2.Fence() != 2 {
			t.Fatalf("%s: second holder's fence %d, want 2", name, l2.Fence())
		}
	}
}
