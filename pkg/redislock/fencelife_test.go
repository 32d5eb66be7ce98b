package redislock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

func TestFenceLifetimeIsMaxOfADayAndAHundredTTLs(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{time.Second, 24 * time.Hour},
		{15 * time.Second, 24 * time.Hour},
		{864 * time.Second, 24 * time.Hour},
		{time.Hour, 100 * time.Hour},
	} {
		if got := redislock.FenceLifetime(c.ttl); got != c.want {
			t.Errorf("fence lifetime for ttl %v: %v, want %v", c.ttl, got, c.want)
		}
	}
}

// pttl reads the PTTL of key on s.
func pttl(t testing.TB, s *redisproc.Server, key string) time.Duration {
	t.Helper()
	c := s.Client()
	defer func() { _ = c.Close() }()
	d, err := c.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The fencing counter expires its lifetime after the grant, and again
// after each renewal; the metadata with the lock key; the validity never
// (an eviction policy could take it with the lock key otherwise).
func TestLockKeysCarryTheirLifetimes(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			c := newClient(t, "a", servers...)
			ctx := context.Background()
			for _, ttl := range []time.Duration{10 * time.Second, 20 * time.Minute} {
				l, err := c.ObtainWait(ctx, "life", ttl, &redislock.ObtainOptions{Metadata: "m"})
				if err != nil {
					t.Fatal(err)
				}
				life := redislock.FenceLifetime(ttl)
				for i, s := range servers {
					if d := pttl(t, s, lockKey("life")+":fence"); d <= life-time.Minute || d > life {
						t.Errorf("ttl %v, node %d: fence PTTL %v, want about %v", ttl, i, d, life)
					}
					if d := pttl(t, s, lockKey("life")+":meta"); d <= 0 || d > ttl {
						t.Errorf("ttl %v, node %d: metadata PTTL %v, want within the ttl", ttl, i, d)
					}
					if d := pttl(t, s, lockKey("life")+":until"); d != -1 {
						t.Errorf("ttl %v, node %d: validity PTTL %v, want none", ttl, i, d)
					}
				}
				// A renewal starts the counter's lifetime again.
				for _, s := range servers {
					cl := s.Client()
					if err := cl.PExpire(ctx, lockKey("life")+":fence", time.Second).Err(); err != nil {
						t.Fatal(err)
					}
					_ = cl.Close()
				}
				if err := l.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
				for i, s := range servers {
					if d := pttl(t, s, lockKey("life")+":fence"); d <= life-time.Minute {
						t.Errorf("ttl %v, node %d: fence PTTL %v after a renewal, want about %v", ttl, i, d, life)
					}
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// S3 across the counter's expiry, the worst case made logical rather than
// waited for: a burst of grants and then the counter's lifetime passing at
// once (PEXPIRE), so that the restarted counter has the least time to have
// moved on. The next token is still above every earlier one.
func TestFencingTokensIncreaseAcrossACounterThatExpiredAfterABurst(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			c := newClient(t, "a", servers...)
			ctx := context.Background()
			last := int64(0)
			for round := range 3 {
				for range 200 {
					l, err := c.Obtain(ctx, "burst", 10*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					if l.Fence() <= last {
						t.Fatalf("round %d: fence %d after %d", round, l.Fence(), last)
					}
					last = l.Fence()
					if err := l.Release(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for _, s := range servers {
					cl := s.Client()
					if err := cl.PExpire(ctx, lockKey("burst")+":fence", time.Millisecond).Err(); err != nil {
						t.Fatal(err)
					}
					_ = cl.Close()
				}
				waitFor(t, 5*time.Second, "the counters to expire", func() bool { return countKeys(t, servers) == 0 })
			}
		})
	}
}

// countKeys is the number of keys on all servers together.
func countKeys(t testing.TB, servers []*redisproc.Server) int64 {
	t.Helper()
	var n int64
	for _, s := range servers {
		c := s.Client()
		k, err := c.DBSize(context.Background()).Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

// On real Redis with a short counter lifetime: locks named per entity and
// released leave no key behind once the lifetime has passed; those left to
// expire leave their validity key only. A name obtained again after its
// counter expired gets a token above every earlier one (S3).
func TestLockKeysAllExpireAndTokensStillIncrease(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			c := newClient(t, "a", servers...)
			redislock.SetFenceLifetime(c, 2*time.Second)
			ctx := context.Background()
			fences := map[string]int64{}
			for i := range 20 {
				name := "order-" + string(rune('a'+i))
				l, err := c.ObtainWait(ctx, name, 2*time.Second, &redislock.ObtainOptions{Metadata: "worker"})
				if err != nil {
					t.Fatal(err)
				}
				fences[name] = l.Fence()
				if i%2 == 0 { // the others expire
					if err := l.Release(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if n := countKeys(t, servers); n < int64(20*m.nodes) {
				t.Fatalf("%d keys after 20 grants, want at least a counter per name per node", n)
			}
			// Ten validity keys per node, of the holders that never released.
			waitFor(t, 15*time.Second, "every other key to expire", func() bool { return countKeys(t, servers) == int64(10*m.nodes) })
			for i, s := range servers {
				cl := s.Client()
				keys, err := cl.Keys(ctx, "*").Result()
				_ = cl.Close()
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					if !strings.HasSuffix(k, "}:until") {
						t.Errorf("node %d keeps %s after the counters' lifetime", i, k)
					}
				}
			}
			for name, before := range fences {
				l, err := c.Obtain(ctx, name, 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if l.Fence() <= before {
					t.Errorf("%s: fence %d after its counter expired, want above the earlier %d", name, l.Fence(), before)
				}
			}
		})
	}
}

// A counter that no grant could have written (a tenant's write: not a
// whole number from 0 below 2^53) restarts from the server's clock, as a
// missing one does. It used to fail each grant (INCR's error) and leave
// the lock key set, with no holder, for a ttl.
func TestACounterThatIsNotACountRestartsFromTheClock(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	rc := redistest.Clients(t, s)[0]
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true, Identity: "a", NodeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, bad := range []string{"garbage", "1.5", "-7", "1e300", "9007199254740993"} {
		if err := rc.Set(ctx, lockKey("n")+":fence", bad, 0).Err(); err != nil {
			t.Fatal(err)
		}
		now, err := rc.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Obtain(ctx, "n", 10*time.Second)
		if err != nil {
			t.Fatalf("a grant over the counter %q: %v", bad, err)
		}
		if least := now.UnixMilli() * 1000; l.Fence() < least {
			t.Errorf("the token over the counter %q is %d; want at least %d, from the clock", bad, l.Fence(), least)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
