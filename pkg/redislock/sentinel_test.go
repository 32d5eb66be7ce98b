package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/redistest"
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
// its holder's belief never outlives the key; a lock whose holder stopped
// renewing is free again after its ttl, for any candidate.
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
	short, err := c.Obtain(ctx, "short", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
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
	// A lock whose holder stopped renewing is free again after its ttl,
	// for another candidate too, on the new master.
	other, err := redislock.New([]redis.UniversalClient{fc}, &redislock.Options{
		AssumeDurable: true, Identity: "other", WaitReplicas: 1, NodeTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var next *redislock.Lock
	waitFor(t, 20*time.Second, "another candidate to take the lock its holder stopped renewing", func() bool {
		next, err = other.Obtain(ctx, "short", 3*time.Second)
		return err == nil
	})
	if next.Fence() <= short.Fence() {
		t.Fatalf("the token %d after the failover is not above %d (S3)", next.Fence(), short.Fence())
	}
}

// WaitAllReplicas waits for as many replicas as the master has had
// connected: with two, one that does not answer makes an acquisition fail
// (a fixed WaitReplicas of 1 lets it through, and a failover could promote
// that replica without the lock); with one of them gone, too (Sentinel may
// still promote it once it is back, or a failover may be under way); and
// once it is back, grants count again. A Client made while it is gone (a
// candidate restarted during a failover) knows the count from the node's
// replicas record, which the replicas have too.
func TestWaitAllReplicasWaitsForTheMostReplicasSeen(t *testing.T) {
	g := redistest.StartSentinelGroup(t, 2, 1)
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.MasterName, SentinelAddrs: g.SentinelAddrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = fc.Close() })
	client := func(wait int) *redislock.Client {
		c, err := redislock.New([]redis.UniversalClient{fc}, &redislock.Options{
			AssumeDurable: true, Identity: "w" + strconv.Itoa(wait) + "-" + t.Name(), WaitReplicas: wait, NodeTimeout: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	all, one := client(redislock.WaitAllReplicas), client(1)
	ctx := context.Background()
	master := redistest.Clients(t, g.Master)[0]
	online := func(n int) func() bool {
		return func() bool {
			info, err := master.Info(ctx, "replication").Result()
			return err == nil && strings.Count(info, ",state=online,") == n
		}
	}
	obtain := func(c *redislock.Client, name string) error {
		l, err := c.Obtain(ctx, name, 10*time.Second)
		if err == nil {
			return l.Release(ctx)
		}
		return err
	}
	waitFor(t, 10*time.Second, "both replicas online", online(2))
	var l *redislock.Lock
	waitFor(t, 10*time.Second, "an acquisition both replicas acknowledge", func() bool {
		var err error
		l, err = all.Obtain(ctx, "both", 10*time.Second)
		return err == nil
	})
	for _, r := range g.Replicas {
		if get(t, r, lockKey("both")) == "" {
			t.Fatalf("replica %s lacks a lock that WaitAllReplicas granted", r.Addr)
		}
		if n := get(t, r, redislock.ReplicasKey(all, "both")); n != "2" {
			t.Fatalf("replica %s has the replicas record %q; want 2", r.Addr, n)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	slow := g.Replicas[1]
	if err := slow.Pause(); err != nil {
		t.Fatal(err)
	}
	errAll, errOne := obtain(all, "one-paused"), obtain(one, "one-paused-1")
	if err := slow.Resume(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errAll, redislock.ErrReplication) || !strings.Contains(errAll.Error(), "1 of the 2 most connected replicas") {
		t.Fatalf("WaitAllReplicas with one of two replicas paused: %v; want ErrReplication, 1 of the 2 most connected replicas", errAll)
	}
	if errOne != nil {
		t.Fatalf("WaitReplicas 1 with one of two replicas paused: %v; want it granted", errOne)
	}

	slow.Kill()
	waitFor(t, 30*time.Second, "one replica online", online(1))
	if err := obtain(all, "one-left"); !errors.Is(err, redislock.ErrReplication) || !strings.Contains(err.Error(), "1 of the 2 most connected replicas") {
		t.Fatalf("WaitAllReplicas with one of two replicas gone: %v; want ErrReplication, 1 of the 2 most connected replicas", err)
	}
	if err := obtain(client(redislock.WaitAllReplicas), "one-left-new"); !errors.Is(err, redislock.ErrReplication) || !strings.Contains(err.Error(), "1 of the 2 most connected replicas") {
		t.Fatalf("a Client made with one of two replicas gone: %v; want ErrReplication, 1 of the 2 most connected replicas, from the record", err)
	}
	if err := slow.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the replica online again", online(2))
	waitFor(t, 10*time.Second, "a grant once the replica is back", func() bool { return obtain(all, "back") == nil })
}

// What a write costs with WaitAllReplicas, counted by a master with two
// replicas (INFO commandstats): one INFO replication, a GET of the
// replicas record, the script and one WAIT per renewal, in the one round
// trip; a raise of the record and a second WAIT only for the write that
// first sees a replica more than the record, none afterwards.
func TestWaitAllReplicasSendsOneInfoAndOneWaitPerWrite(t *testing.T) {
	// Replicas without a Sentinel, whose own INFO every 10s would count.
	m := redistest.Start(t, redisproc.Options{})
	host, port, _ := strings.Cut(m.Addr, ":")
	for range 2 {
		redistest.Start(t, redisproc.Options{Args: []string{"--replicaof", host, port}})
	}
	master := redistest.Clients(t, m)[0]
	ctx := context.Background()
	waitFor(t, 30*time.Second, "both replicas online", func() bool {
		info, err := master.Info(ctx, "replication").Result()
		return err == nil && strings.Count(info, ",state=online,") == 2
	})
	c, err := redislock.New([]redis.UniversalClient{master}, &redislock.Options{
		AssumeDurable: true, Identity: "counted", WaitReplicas: redislock.WaitAllReplicas, NodeTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	read := func() redisstats.Counts {
		t.Helper()
		n, err := redisstats.Read(ctx, master)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := read()
	l, err := c.Obtain(ctx, "counted", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	first := read().Sub(before)
	// Each write of the grant has its INFO and its WAIT; the first finds
	// two replicas where the record had none, so it raises the record
	// (a script) and WAITs once more, for both. (The reading's own INFO
	// counts once; a script's first call is an EVALSHA and an EVAL.)
	if first["info"] < 2 || first["wait"] != first["info"] {
		t.Fatalf("the first grant sent %d scripts, info %d, wait %d; want as many WAITs as INFOs, at least 2 (the reading's own INFO, the raise's WAIT)", first.Scripts(), first["info"], first["wait"])
	}
	if n, err := master.Get(ctx, redislock.ReplicasKey(c, "counted")).Result(); err != nil || n != "2" {
		t.Fatalf("the replicas record holds %q (%v); want 2", n, err)
	}
	const renewals = 20
	before = read()
	for range renewals {
		if err := l.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := read().Sub(before)
	// (A write the grant left running in the background may land here.)
	// (A raise would add a WAIT.)
	if w := got.Scripts(); w < renewals || w > renewals+1 || got["info"] != w+1 || got["wait"] != w {
		t.Fatalf("%d renewals: %d scripts, info %d, wait %d; want one INFO (and the reading's own) and one WAIT per script, and no raise", renewals, w, got["info"], got["wait"])
	}
}
