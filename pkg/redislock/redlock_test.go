package redislock_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

func TestRedlockSurvivesMinorityAndRefusesWithoutQuorum(t *testing.T) {
	servers := redistest.StartN(t, 5)
	c := newClient(t, "a", servers...)
	ctx := context.Background()

	servers[0].Kill()
	servers[1].Kill()
	l, err := c.Obtain(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatalf("Obtain with 3 of 5 nodes up: %v", err)
	}
	if err := l.Refresh(ctx); err != nil {
		t.Fatalf("Refresh with 3 of 5 nodes up: %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, redislock.ErrNoQuorum) {
		t.Fatalf("Release with 2 nodes down: %v; want it to report the unreachable nodes", err)
	}
	for _, s := range servers[2:] {
		if v := get(t, s, lockKey("k")); v != "" {
			t.Fatalf("release left %q on %s", v, s.Addr)
		}
	}

	servers[2].Kill()
	_, err = c.Obtain(ctx, "k", 5*time.Second)
	if !errors.Is(err, redislock.ErrNoQuorum) {
		t.Fatalf("Obtain with 2 of 5 nodes up: %v; want ErrNoQuorum", err)
	}
}

func TestRedlockMinorityHolderIsGivenBack(t *testing.T) {
	servers := redistest.StartN(t, 5)
	c := newClient(t, "a", servers...)
	// Another holder owns 3 of 5 nodes: we win the other 2 and must give
	// them back rather than sit on a minority until the ttl runs out.
	other := newClient(t, "b", servers[:3]...)
	if _, err := other.Obtain(context.Background(), "k", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	_, err := c.Obtain(context.Background(), "k", 10*time.Second)
	if !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Obtain against a majority holder: %v; want ErrNotObtained", err)
	}
	for _, s := range servers[3:] {
		waitFor(t, 2*time.Second, "the minority keys to be given back", func() bool { return get(t, s, lockKey("k")) == "" })
	}
}

func TestFencingTokensIncreaseAcrossHandovers(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(map[int]string{1: "single", 5: "redlock5"}[n], func(t *testing.T) {
			servers := redistest.StartN(t, n)
			clients := []*redislock.Client{newClient(t, "a", servers...), newClient(t, "b", servers...)}
			ctx := context.Background()
			last := int64(0)
			for i := 0; i < 1000; i++ {
				l, err := clients[i%2].Obtain(ctx, "fenced", 10*time.Second)
				if err != nil {
					t.Fatalf("handover %d: %v", i, err)
				}
				if l.Fence() <= last {
					t.Fatalf("handover %d: fence %d after %d", i, l.Fence(), last)
				}
				last = l.Fence()
				if err := l.Release(ctx); err != nil {
					t.Fatalf("handover %d: %v", i, err)
				}
			}
		})
	}
}

// When the nodes' counters disagree (some nodes missed earlier
// acquisitions), the token handed out must still exceed every earlier one,
// whichever majority grants the next acquisition: the holder raises the
// lagging counters of its quorum before it may use the token, and any later
// majority overlaps that quorum.
func TestRedlockFencingSurvivesDivergentCounters(t *testing.T) {
	servers := redistest.StartN(t, 5)
	clients := redistest.Clients(t, servers...)
	// Node 0 saw 100 acquisitions the others missed.
	if err := clients[0].Set(context.Background(), lockKey("f")+":fence", 100, 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A closed port stands in for an unreachable node: it refuses at
	// once, and nothing sent to it lands later.
	dead := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = dead.Close() })
	ctx := context.Background()
	last := int64(0)
	for round := 0; round < 20; round++ {
		// Each round two nodes are unreachable, so a different majority
		// grants the lock; the first round's majority includes node 0.
		nodes := slices.Clone(clients)
		a, b := (round+3)%5, (round+4)%5
		nodes[a], nodes[b] = dead, dead
		c, err := redislock.New(nodes, &redislock.Options{AssumeDurable: true, Identity: "r", NodeTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Obtain(ctx, "f", 10*time.Second)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if l.Fence() <= last {
			t.Fatalf("round %d: fence %d after %d", round, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); !errors.Is(err, redislock.ErrNoQuorum) {
			t.Fatalf("round %d: release with two nodes down: %v", round, err)
		}
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
