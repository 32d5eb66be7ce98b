package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// startCluster starts a three-master Redis Cluster and returns a client.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t, 3), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A lock's keys share a hash tag, so its multi-key scripts run on a
// Cluster without CROSSSLOT errors, and the whole lifecycle works there.
func TestLockOnRedisCluster(t *testing.T) {
	cc := startCluster(t)
	a, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{AssumeDurable: true, Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{AssumeDurable: true, Identity: "b"})
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
		if l2.Fence() != l.Fence()+1 {
			t.Fatalf("%s: second holder's fence %d, want %d", name, l2.Fence(), l.Fence()+1)
		}
	}
}
