package redislock_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
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
	t.Parallel()
	for _, n := range []int{1, 5} {
		t.Run(map[int]string{1: "single", 5: "redlock5"}[n], func(t *testing.T) {
			servers := redistest.StartN(t, n)
			// A NodeTimeout far above the 100ms of newClient: no call of
			// the 4,000 may fail, and beside two busy loops one missed
			// 100ms on 4 of 5 nodes.
			var clients []*redislock.Client
			for _, id := range []string{"a", "b"} {
				c, err := redislock.New(redistest.Clients(t, servers...), &redislock.Options{AssumeDurable: true, Identity: id, NodeTimeout: 2 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				clients = append(clients, c)
			}
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
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// A failed attempt undoes itself without a trace a waiter could act on: it
// announces no grant (it won no majority), gives back the node it took
// without publishing "released" (which would wake every standby, each of
// which would fail and give back in turn, for ever), and takes back the
// fencing count it added there.
func TestFailedAttemptsNeitherWakeWaitersNorCountTokens(t *testing.T) {
	servers := redistest.StartN(t, 3)
	nodes := redistest.Clients(t, servers...)
	ctx := context.Background()
	// The holder has nodes 1 and 2, a majority; node 0 is free, as a split
	// vote leaves it.
	if _, err := newClient(t, "holder", servers...).Obtain(ctx, "split", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// As a split vote leaves node 0: free, with no validity recorded (the
	// loser's give-back took it).
	if err := nodes[0].Del(ctx, lockKey("split"), lockKey("split")+":until").Err(); err != nil {
		t.Fatal(err)
	}
	fence := func() int64 {
		n, err := nodes[0].Get(ctx, lockKey("split")+":fence").Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		return n
	}
	sub := nodes[0].Subscribe(ctx, redislock.EventsChannel("split"))
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, "standby", servers...)
	var before int64
	for i := range 50 {
		if _, err := c.Obtain(ctx, "split", 10*time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("attempt %d against a majority holder: %v; want ErrNotObtained", i, err)
		}
		// The give-back runs in the background.
		waitFor(t, 2*time.Second, "node 0 to be given back", func() bool { return get(t, servers[0], lockKey("split")) == "" })
		if i == 0 {
			before = fence()
		} else if got := fence(); got != before {
			t.Fatalf("after %d failed attempts node 0's fencing counter is %d, was %d after the first", i+1, got, before)
		}
	}
	// No attempt announced anything: not its node-level grant (it won no
	// majority), not its give-back. The marker comes first.
	if err := nodes[0].Publish(ctx, redislock.EventsChannel("split"), "marker").Err(); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveTimeout(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := msg.(*redis.Message); !ok || m.Payload != "marker" {
		t.Fatalf("50 failed attempts published %v before the marker; want nothing", msg)
	}
}

// A failed attempt that started a node's counter (a new name there) gives
// the node back as it found it, without a counter: otherwise the counter,
// started from the clock later than the winner's, would stay above the
// winner's token, and holder repair there would have to keep that count.
func TestRedlockGiveBackDeletesTheCounterItStarted(t *testing.T) {
	servers := redistest.StartN(t, 3)
	ctx := context.Background()
	nodes := redistest.Clients(t, servers...)
	for i := range 2 {
		ghost := redislock.Value{Token: strings.Repeat(strconv.Itoa(i), 32), Identity: "ghost" + strconv.Itoa(i)}
		if err := nodes[i].Set(ctx, lockKey("fresh"), ghost.String(), 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	b := newClient(t, "b", servers...)
	if _, err := b.Obtain(ctx, "fresh", 10*time.Second); err == nil {
		t.Fatal("b obtained a lock held on two of three nodes")
	}
	waitFor(t, 5*time.Second, "b's give-back on node 2", func() bool { return get(t, servers[2], lockKey("fresh")) == "" })
	if v := get(t, servers[2], lockKey("fresh")+":fence"); v != "" {
		t.Fatalf("node 2 kept the counter %s that b's failed attempt started", v)
	}
	// A counter the attempt found is counted back, not deleted.
	if err := nodes[2].Set(ctx, lockKey("fresh")+":fence", 41, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Obtain(ctx, "fresh", 10*time.Second); err == nil {
		t.Fatal("b obtained a lock held on two of three nodes")
	}
	waitFor(t, 5*time.Second, "b's second give-back on node 2", func() bool { return get(t, servers[2], lockKey("fresh")) == "" })
	if v := get(t, servers[2], lockKey("fresh")+":fence"); v != "41" {
		t.Fatalf("node 2's counter %q after a failed attempt on a counter of 41, want 41", v)
	}
}

// Redlock holder repair: a holder whose renewal a majority confirms puts its
// key back where it went missing, with its fencing token made known there,
// so one lost key does not leave the node free for the whole leadership. It
// never takes a node another candidate holds, and a restored key never
// counts toward the holder's belief: with the majority gone, the renewal
// fails however many keys it could restore.
func TestRedlockHolderRestoresAMissingKey(t *testing.T) {
	servers := redistest.StartN(t, 3)
	ctx := context.Background()
	a := newClient(t, "a", servers...)
	l, err := a.Obtain(ctx, "repair", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nodes := redistest.Clients(t, servers...)
	// Node 0 forgets the lock and its counter (a FLUSHALL, a restart).
	if err := nodes[0].FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(ctx); err != nil {
		t.Fatalf("renew with two of three nodes: %v", err)
	}
	if v, err := redislock.ParseValue(get(t, servers[0], lockKey("repair"))); err != nil || v.Identity != "a" {
		t.Fatalf("node 0 holds %+v (%v) after the renewal; want a's key back", v, err)
	}
	if pttl := nodes[0].PTTL(ctx, lockKey("repair")).Val(); pttl <= 0 || pttl > 10*time.Second {
		t.Fatalf("restored key's PTTL %v; want the lock's ttl", pttl)
	}
	if got, _ := nodes[0].Get(ctx, lockKey("repair")+":fence").Int64(); got < l.Fence() {
		t.Fatalf("node 0's counter %d after the repair is below the holder's token %d", got, l.Fence())
	}
	// A node that counted past the token (here: attempts whose keys expired
	// before their give-back) is repaired with its count kept: a counter
	// is never lowered (S3), as a repair may arrive late, after a later
	// holder counted there.
	if err := nodes[1].Del(ctx, lockKey("repair")).Err(); err != nil {
		t.Fatal(err)
	}
	ahead := nodes[1].IncrBy(ctx, lockKey("repair")+":fence", 1000).Val()
	if err := l.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := redislock.ParseValue(get(t, servers[1], lockKey("repair"))); err != nil || v.Identity != "a" {
		t.Fatalf("node 1 holds %+v (%v) after the renewal; want a's key back", v, err)
	}
	if got, _ := nodes[1].Get(ctx, lockKey("repair")+":fence").Int64(); got != ahead {
		t.Fatalf("node 1's counter %d after the repair, want %d kept", got, ahead)
	}
	// With every node held, b is refused on each and takes nothing.
	b := newClient(t, "b", servers...)
	if _, err := b.Obtain(ctx, "repair", 10*time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("b against the repaired lock: %v; want ErrNotObtained", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := b.Obtain(ctx, "repair", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if next.Fence() <= l.Fence() {
		t.Fatalf("next holder's fence %d is not above the repaired holder's %d (S3)", next.Fence(), l.Fence())
	}

	// A node held by another value is left alone, and keys restored while
	// the majority is lost do not save the holder.
	for i := range 2 {
		if err := nodes[i].Del(ctx, lockKey("repair")).Err(); err != nil {
			t.Fatal(err)
		}
	}
	set(t, servers[2], lockKey("repair"), "v1:"+strings.Repeat("0", 32)+":other")
	if err := next.Refresh(ctx); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("renew with no node holding the token: %v; want ErrLockLost", err)
	}
	if next.Valid() {
		t.Fatal("the holder still believes after losing every node")
	}
	for i := range 2 {
		if got := get(t, servers[i], lockKey("repair")); got != "" {
			t.Fatalf("a failed renewal wrote %q on node %d", got, i)
		}
	}
}

// Two addresses that reach one server would count it twice in the quorum:
// CheckIndependent refuses them, naming both.
func TestCheckIndependentRefusesTwoAddressesOfOneServer(t *testing.T) {
	servers := redistest.StartN(t, 2)
	_, port, err := net.SplitHostPort(servers[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	alias := net.JoinHostPort("localhost", port)
	nodes := append(redistest.Clients(t, servers...), redis.NewClient(&redis.Options{Addr: alias}))
	t.Cleanup(func() { _ = nodes[2].Close() })
	c, err := redislock.New(nodes, &redislock.Options{Identity: "x"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckIndependent(context.Background())
	if !errors.Is(err, redislock.ErrInvalidOptions) || !strings.Contains(err.Error(), servers[0].Addr) || !strings.Contains(err.Error(), alias) {
		t.Fatalf("CheckIndependent with %s twice: %v; want ErrInvalidOptions naming both addresses", servers[0].Addr, err)
	}
	independent, err := redislock.New(redistest.Clients(t, append(servers, redistest.Start(t, redisproc.Options{}))...), &redislock.Options{Identity: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if err := independent.CheckIndependent(context.Background()); err != nil {
		t.Fatalf("three independent servers: %v", err)
	}
}

// A node with a memory limit and a policy that can evict lock keys is
// named, with its policy; noeviction, or no limit, is fine.
func TestCheckEvictionNamesNodesThatCanEvictLockKeys(t *testing.T) {
	servers := redistest.StartN(t, 3)
	nodes := redistest.Clients(t, servers...)
	c := newClient(t, "x", servers...)
	ctx := context.Background()
	if err := c.CheckEviction(ctx); err != nil {
		t.Fatalf("no memory limit: %v", err)
	}
	for _, kv := range [][2]string{{"maxmemory", "100mb"}, {"maxmemory-policy", "noeviction"}} {
		if err := nodes[1].ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CheckEviction(ctx); err != nil {
		t.Fatalf("maxmemory with noeviction: %v", err)
	}
	if err := nodes[1].ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	err := c.CheckEviction(ctx)
	if !errors.Is(err, redislock.ErrEvictionPolicy) || !strings.Contains(err.Error(), servers[1].Addr) || !strings.Contains(err.Error(), "allkeys-lru") || strings.Contains(err.Error(), servers[0].Addr) {
		t.Fatalf("allkeys-lru on node 1: %v; want ErrEvictionPolicy naming node 1 and its policy only", err)
	}
}

// Observers see the holder's token from the moment its acquisition's
// replies are in: nodes whose counters lag behind it, before the holder's
// fencing commit raised them, do not make Inspect report a lower one (the
// status would then show two tokens for one holder).
func TestInspectSeesTheTokenBeforeTheLaggingCountersAreRaised(t *testing.T) {
	servers := redistest.StartN(t, 3)
	ctx := context.Background()
	a := newClient(t, "a", servers...)
	l, err := a.Obtain(ctx, "commit", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nodes := redistest.Clients(t, servers...)
	// As right after the acquisition, before the commit: node 0 granted
	// the token, the others counted less.
	for i, behind := range []int64{0, 1, 5} {
		if err := nodes[i].Set(ctx, lockKey("commit")+":fence", l.Fence()-behind, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := a.Inspect(ctx, "commit"); err != nil || h.Identity != "a" || h.Fence != l.Fence() {
		t.Fatalf("Inspect with lagging counters: %+v, %v; want a with fence %d", h, err, l.Fence())
	}
}
