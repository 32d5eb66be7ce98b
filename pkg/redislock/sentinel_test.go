package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/redisproc"
	"github.com/redislock/redislock/internal/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// A node can be a Sentinel-managed master: the client asks the Sentinel
// where the master is and locks there.
func TestLockThroughSentinel(t *testing.T) {
	master := redistest.Start(t, redisproc.Options{})
	sentinel := redistest.Start(t, redisproc.Options{SentinelFor: "mymaster " + master.Addr})
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{sentinel.Addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = fc.Close() })
	c, err := redislock.New([]redis.UniversalClient{fc}, &redislock.Options{AssumeDurable: true, Identity: "via-sentinel"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := c.Obtain(ctx, "sentineled", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v, err := redislock.ParseValue(get(t, master, lockKey("sentineled")))
	if err != nil || v.Identity != "via-sentinel" {
		t.Fatalf("the master holds %+v, %v; want the lock of via-sentinel", v, err)
	}
	if err := l.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(t, master, lockKey("sentineled")); got != "" {
		t.Fatalf("released key still on the master: %q", got)
	}
}

// With WaitReplicas, an acquisition counts only once a replica has it: one
// that no replica acknowledges fails (and is given back), and a lock that
// was granted survives the master's death and the Sentinel failover, so
// its holder's belief never outlives the key.
func TestWaitReplicasKeepsTheLockThroughASentinelFailover(t *testing.T) {
	g := redistest.StartSentinelGroup(t, 2, 1)
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.MasterName, SentinelAddrs: g.SentinelAddrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = fc.Close() })
	c, err := redislock.New([]redis.UniversalClient{fc}, &redislock.Options{
		AssumeDurable: true, Identity: "replicated", WaitReplicas: 1, NodeTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// No replica answers: the acquisition does not count.
	for _, r := range g.Replicas {
		if err := r.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Obtain(ctx, "unreplicated", 10*time.Second)
	for _, r := range g.Replicas {
		if err := r.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if !errors.Is(err, redislock.ErrReplication) || !errors.Is(err, redislock.ErrNoQuorum) {
		t.Fatalf("Obtain with no replica answering: %v, want ErrNoQuorum wrapping ErrReplication", err)
	}
	// It is given back in the background.
	waitFor(t, 5*time.Second, "the unreplicated acquisition given back", func() bool {
		return get(t, g.Master, lockKey("unreplicated")) == ""
	})

	// The replicas just woke from SIGSTOP and may take a moment to
	// acknowledge again; until one does, an acquisition rightly fails.
	var l *redislock.Lock
	waitFor(t, 10*time.Second, "an acquisition a replica acknowledges", func() bool {
		l, err = c.Obtain(ctx, "replicated", 30*time.Second)
		return err == nil
	})
	old := g.Master.Addr
	g.Master.Kill()
	var promoted string
	waitFor(t, 30*time.Second, "a Sentinel failover", func() bool {
		promoted, _ = g.MasterAddr(ctx)
		return promoted != "" && promoted != old
	})
	if got := get(t, g.Server(promoted), lockKey("replicated")); got == "" {
		t.Fatalf("the promoted replica %s lacks the lock", promoted)
	}
	waitFor(t, 10*time.Second, "a renewal on the new master", func() bool { return l.Refresh(ctx) == nil })
	if _, err := c.Obtain(ctx, "replicated", 30*time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("a second Obtain after the failover: %v, want ErrNotObtained (the lock is still held)", err)
	}
}
