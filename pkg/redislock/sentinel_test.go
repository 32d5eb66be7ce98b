package redislock_test

import (
	"context"
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
