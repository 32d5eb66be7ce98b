package redislock_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/proc"
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
	t.Parallel()
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

// sentinelNode is a SentinelNode for g, closed when t ends.
func sentinelNode(t *testing.T, g *redistest.SentinelGroup) *redislock.SentinelNode {
	t.Helper()
	n := redislock.NewSentinelNode(&redis.FailoverOptions{MasterName: g.MasterName, SentinelAddrs: g.SentinelAddrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// sentinelSet runs SENTINEL SET <master> option value on every Sentinel
// of g.
func sentinelSet(t *testing.T, g *redistest.SentinelGroup, option, value string) {
	t.Helper()
	for _, s := range g.Sentinels {
		c := redistest.Clients(t, s)[0]
		if err := c.Do(context.Background(), "sentinel", "set", g.MasterName, option, value).Err(); err != nil {
			t.Fatalf("SENTINEL SET %s %s on %s: %v", option, value, s.Addr, err)
		}
	}
}

// allReplicasClient is a Client on node with WaitAllReplicas, whose
// writes wait up to 1s (half the NodeTimeout) for a replica that answers:
// room for a loaded machine, as a replica that does not answer fails the
// write whatever the wait.
func allReplicasClient(t *testing.T, node redis.UniversalClient, id string) *redislock.Client {
	t.Helper()
	c, err := redislock.New([]redis.UniversalClient{node}, &redislock.Options{
		AssumeDurable: true, Identity: id, WaitReplicas: redislock.WaitAllReplicas, NodeTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tryObtain obtains name with c and releases it.
func tryObtain(c *redislock.Client, name string) error {
	ctx := context.Background()
	l, err := c.Obtain(ctx, name, 10*time.Second)
	if err == nil {
		return l.Release(ctx)
	}
	return err
}

// onlineReplicas returns a condition: the master has n replicas online.
func onlineReplicas(master redis.UniversalClient, n int) func() bool {
	return func() bool {
		info, err := master.Info(context.Background(), "replication").Result()
		return err == nil && strings.Count(info, ",state=online,") == n
	}
}

// WaitAllReplicas waits for every replica Sentinel may promote: with two,
// one that does not answer makes an acquisition fail (a fixed WaitReplicas
// of 1 lets it through, and a failover could promote that replica without
// the lock); one that is gone, too, while the Sentinels may still promote
// it; and once they see it down, grants count again, with no restart of
// the candidates.
func TestWaitAllReplicasWaitsForEveryReplicaSentinelMayPromote(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t, 2, 1)
	// Nothing is down until the test says so.
	sentinelSet(t, g, "down-after-milliseconds", "600000")
	node := sentinelNode(t, g)
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.MasterName, SentinelAddrs: g.SentinelAddrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = fc.Close() })
	all := allReplicasClient(t, node, "all")
	one, err := redislock.New([]redis.UniversalClient{fc}, &redislock.Options{AssumeDurable: true, Identity: "one", WaitReplicas: 1, NodeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	master := redistest.Clients(t, g.Master)[0]
	waitFor(t, 10*time.Second, "both replicas online", onlineReplicas(master, 2))
	var l *redislock.Lock
	waitFor(t, 10*time.Second, "an acquisition both replicas acknowledge", func() bool {
		l, err = all.Obtain(ctx, "both", 10*time.Second)
		return err == nil
	})
	for _, r := range g.Replicas {
		if get(t, r, lockKey("both")) == "" {
			t.Fatalf("replica %s lacks a lock that WaitAllReplicas granted", r.Addr)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	slow := g.Replicas[1]
	if err := slow.Pause(); err != nil {
		t.Fatal(err)
	}
	errAll, errOne := tryObtain(all, "one-paused"), tryObtain(one, "one-paused-1")
	if err := slow.Resume(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errAll, redislock.ErrReplication) || !strings.Contains(errAll.Error(), "1 of the 2 replicas that may be promoted") || !strings.Contains(errAll.Error(), slow.Addr) {
		t.Fatalf("WaitAllReplicas with one of two replicas paused: %v; want ErrReplication, 1 of the 2 replicas that may be promoted, naming %s", errAll, slow.Addr)
	}
	if errOne != nil {
		t.Fatalf("WaitReplicas 1 with one of two replicas paused: %v; want it granted", errOne)
	}

	slow.Kill()
	waitFor(t, 30*time.Second, "one replica online", onlineReplicas(master, 1))
	// A name each: a refused grant is given back in the background, and
	// the second Client may come before it (it did beside two busy
	// loops: "held by all").
	for _, c := range []*redislock.Client{all, allReplicasClient(t, node, "fresh")} {
		if err := tryObtain(c, "one-gone-"+c.Identity()); !errors.Is(err, redislock.ErrReplication) || !strings.Contains(err.Error(), "replica "+slow.Addr+", which may be promoted, is not attached") {
			t.Fatalf("%s with a replica gone that Sentinel may still promote: %v; want ErrReplication naming it not attached", c.Identity(), err)
		}
	}
	// Once the Sentinel sees it down, it promotes it no more.
	sentinelSet(t, g, "down-after-milliseconds", "1000")
	waitFor(t, 30*time.Second, "a grant once the Sentinel sees the replica down", func() bool { return tryObtain(all, "gone") == nil })
	if err := tryObtain(allReplicasClient(t, node, "fresh-after"), "gone-fresh"); err != nil {
		t.Fatalf("a Client made once the replica is down: %v", err)
	}
}

// A backup taken as Redis documents it (redis-cli --rdb) shows up in the
// master's INFO replication as a replica without a listening port, and
// in SENTINEL REPLICAS too, for as long as the master's diskless-sync
// delay (5s by default). No lock may stop for it, during or after: before,
// one renewal in that window made WaitAllReplicas wait for three replicas
// where there were two, for good, for every Client.
func TestABackupStopsNoLock(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t, 2, 1)
	node := sentinelNode(t, g)
	c := allReplicasClient(t, node, "holder")
	ctx := context.Background()
	master := redistest.Clients(t, g.Master)[0]
	if err := master.ConfigSet(ctx, "repl-diskless-sync-delay", "5").Err(); err != nil {
		t.Fatal(err)
	}
	var (
		l   *redislock.Lock
		err error
	)
	waitFor(t, 10*time.Second, "a grant both replicas acknowledge", func() bool {
		l, err = c.Obtain(ctx, "kept", time.Minute)
		return err == nil
	})
	host, port, _ := net.SplitHostPort(g.Master.Addr)
	dir := t.TempDir()
	backup, err := proc.Start(proc.Options{Name: "redis-cli --rdb", Path: "redis-cli",
		Args: []string{"-h", host, "-p", port, "--rdb", filepath.Join(dir, "dump.rdb")}, Log: filepath.Join(dir, "redis-cli.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = backup.Kill() })
	waitFor(t, 10*time.Second, "the backup attached to the master", func() bool {
		info, err := master.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, ",port=0,")
	})
	if err := l.Refresh(ctx); err != nil {
		t.Fatalf("a renewal during the backup: %v", err)
	}
	if err := tryObtain(c, "during"); err != nil {
		t.Fatalf("a grant during the backup: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := backup.Wait(wctx); err != nil {
		t.Fatalf("the backup: %v", err)
	}
	if err := l.Refresh(ctx); err != nil {
		t.Fatalf("a renewal after the backup: %v", err)
	}
	for _, cl := range []*redislock.Client{c, allReplicasClient(t, node, "fresh")} {
		if err := tryObtain(cl, "after-"+cl.Identity()); err != nil {
			t.Fatalf("a grant by %s after the backup: %v", cl.Identity(), err)
		}
	}
}

// A replica added for a while (a migration, a replacement before the old
// one is removed) is waited for while it is there, and stops being waited
// for once the Sentinels see it gone: before, the count it raised stopped
// every lock for good, until the record was deleted and every candidate
// restarted.
func TestAReplicaAddedThenRemovedStopsNoLock(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t, 1, 1)
	node := sentinelNode(t, g)
	c := allReplicasClient(t, node, "holder")
	ctx := context.Background()
	master := redistest.Clients(t, g.Master)[0]
	host, port, _ := net.SplitHostPort(g.Master.Addr)
	added := redistest.Start(t, redisproc.Options{Args: []string{"--replicaof", host, port}})
	waitFor(t, 30*time.Second, "two replicas online", onlineReplicas(master, 2))
	sc := redis.NewSentinelClient(&redis.Options{Addr: g.SentinelAddrs()[0]})
	t.Cleanup(func() { _ = sc.Close() })
	waitFor(t, 30*time.Second, "the Sentinel to know the added replica", func() bool {
		reps, err := sc.Replicas(ctx, g.MasterName).Result()
		return err == nil && len(reps) == 2
	})
	var l *redislock.Lock
	waitFor(t, 10*time.Second, "a grant both replicas acknowledge", func() bool {
		var err error
		l, err = c.Obtain(ctx, "kept", 10*time.Second)
		return err == nil
	})
	if get(t, added, lockKey("kept")) == "" {
		t.Fatal("the added replica lacks a grant WaitAllReplicas counted")
	}
	added.Kill()
	waitFor(t, 30*time.Second, "a renewal once the Sentinel sees the added replica down", func() bool { return l.Refresh(ctx) == nil })
	for _, cl := range []*redislock.Client{c, allReplicasClient(t, node, "fresh")} {
		if err := tryObtain(cl, "after-"+cl.Identity()); err != nil {
			t.Fatalf("a grant by %s once the added replica is gone: %v", cl.Identity(), err)
		}
	}
}

// A replica detached from its master (here pointed elsewhere, as a
// failover reconfiguring replicas leaves them) while the Sentinels may
// still promote it: a Client made then (a candidate restarted meanwhile)
// must not be granted the lock, which that replica lacks. Before, it read
// a count from a key in Redis, and with that key deleted (the documented
// remedy for a stuck count) or evicted it waited for the one replica left
// and was granted.
func TestAFreshClientWaitsForADetachedReplicaSentinelMayPromote(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t, 2, 1)
	// Neither down nor reconfigured back by the Sentinel during the test.
	sentinelSet(t, g, "down-after-milliseconds", "600000")
	sentinelSet(t, g, "failover-timeout", "600000")
	node := sentinelNode(t, g)
	ctx := context.Background()
	before := allReplicasClient(t, node, "before")
	waitFor(t, 10*time.Second, "a grant both replicas acknowledge", func() bool { return tryObtain(before, "before") == nil })
	detached := g.Replicas[0]
	if err := redistest.Clients(t, detached)[0].Do(ctx, "replicaof", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	master := redistest.Clients(t, g.Master)[0]
	waitFor(t, 10*time.Second, "one replica attached", onlineReplicas(master, 1))
	for _, k := range []string{"redislock:replicas", "redislock:{x}:replicas"} {
		if err := master.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	err := tryObtain(allReplicasClient(t, node, "fresh"), "x")
	if !errors.Is(err, redislock.ErrReplication) || !strings.Contains(err.Error(), detached.Addr) {
		t.Fatalf("a fresh Client with a promotable replica detached: %v; want ErrReplication naming %s", err, detached.Addr)
	}
}

// What a write costs with WaitAllReplicas on a client of one server,
// counted by a master with two replicas (INFO commandstats): a ROLE (the
// offset before), the script, an INFO replication after it, a WAIT, and an
// INFO replication after that, in one round trip, for each write; nothing
// kept in Redis, so no GET and no raise.
func TestWaitAllReplicasSendsTwoInfosAndOneWaitPerWrite(t *testing.T) {
	t.Parallel()
	// Replicas without a Sentinel, whose own INFO every 10s would count.
	m := redistest.Start(t, redisproc.Options{})
	host, port, _ := strings.Cut(m.Addr, ":")
	for range 2 {
		redistest.Start(t, redisproc.Options{Args: []string{"--replicaof", host, port}})
	}
	master := redistest.Clients(t, m)[0]
	ctx := context.Background()
	waitFor(t, 30*time.Second, "both replicas online", onlineReplicas(master, 2))
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
	l, err := c.Obtain(ctx, "counted", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const renewals = 20
	before := read()
	for range renewals {
		if err := l.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := read().Sub(before)
	// (A write the grant left running in the background may land here;
	// the reading's own INFO counts once.)
	if w := got.Scripts(); w < renewals || w > renewals+1 || got["info"] != 2*w+1 || got["wait"] != w || got["role"] != w {
		t.Fatalf("%d renewals: %d scripts, info %d, wait %d, role %d; want a ROLE, two INFOs (and the reading's own) and one WAIT per script", renewals, w, got["info"], got["wait"], got["role"])
	}
	if n, err := master.DBSize(ctx).Result(); err != nil || n != 3 {
		keys, _ := master.Keys(ctx, "*").Result()
		t.Fatalf("the master holds %d keys (%v): %v; want the lock's 3 (key, counter, validity), nothing kept for the wait", n, err, keys)
	}
}

// A call that writes nothing (an acquire refused because the lock is held)
// has nothing to wait for: it is refused as held, whatever the replicas
// acknowledged meanwhile. Before, with a replica behind on others' writes
// (here paused), it failed as a replication shortfall.
func TestARefusedAcquireIsNotAReplicationFailure(t *testing.T) {
	t.Parallel()
	m := redistest.Start(t, redisproc.Options{})
	host, port, _ := strings.Cut(m.Addr, ":")
	var replicas []*redisproc.Server
	for range 2 {
		replicas = append(replicas, redistest.Start(t, redisproc.Options{Args: []string{"--replicaof", host, port}}))
	}
	master := redistest.Clients(t, m)[0]
	ctx := context.Background()
	waitFor(t, 30*time.Second, "both replicas online", onlineReplicas(master, 2))
	holder := allReplicasClient(t, master, "holder")
	if _, err := holder.Obtain(ctx, "held", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := replicas[1].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replicas[1].Resume() })
	// Another client's write, which the paused replica does not acknowledge.
	if err := master.Set(ctx, "unrelated", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := allReplicasClient(t, master, "standby").Obtain(ctx, "held", time.Minute)
	if !errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, redislock.ErrReplication) {
		t.Fatalf("an acquire of a held lock, a replica behind: %v; want ErrNotObtained, not a replication shortfall", err)
	}
}
