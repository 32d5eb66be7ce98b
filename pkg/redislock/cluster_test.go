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

// With the restart guard on, each slot has its own epoch marker, whose
// key hashes to the slot of the locks it guards (else the script would
// fail with a cross-slot error); the guard holds the just-started Cluster's
// locks back for a ttl, and then the lifecycle works.
func TestRestartGuardOnRedisCluster(t *testing.T) {
	cc := startCluster(t)
	const ttl = time.Second
	c, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"} {
		marker := redislock.EpochKey(c, name)
		want, err := cc.ClusterKeySlot(ctx, "redislock:{"+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := cc.ClusterKeySlot(ctx, marker).Result(); err != nil || got != want {
			t.Fatalf("%s: epoch marker %q in slot %d (%v), the lock's slot is %d", name, marker, got, err, want)
		}
		wait, cancel := context.WithTimeout(ctx, 10*ttl)
		l, err := c.ObtainWait(wait, name, ttl, nil)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n, err := cc.Exists(ctx, marker).Result(); err != nil || n != 1 {
			t.Fatalf("%s: epoch marker %q not written (%d, %v)", name, marker, n, err)
		}
	}
}
