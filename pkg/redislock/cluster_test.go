package redislock_test

import (
	"context"
	"errors"
	"os"
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

// startCluster starts a three-master Redis Cluster and returns a client.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	return redistest.ClusterClient(t, redistest.StartCluster(t, 3))
}

// A lock's keys share a hash tag, so its multi-key scripts run on a
// Cluster without CROSSSLOT errors, and the whole lifecycle works there.
func TestLockOnRedisCluster(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// A lock whose slot migrates to another master, by hand as redis-cli
// --cluster reshard does it (SETSLOT IMPORTING and MIGRATING, MIGRATE key
// by key, SETSLOT NODE), stays its holder's through every step: renewals
// meet ASK, TRYAGAIN (the lock's keys split between the two masters) and
// MOVED, and are never counted as a lost or a foreign lock, nor is another
// candidate ever granted it; the validity
// and fencing keys move with it, as they share its hash tag, so the next
// holder's token is the next one. With WaitAllReplicas, where each write
// and its WAIT go to the slot's master on one connection, the same: ASK and
// MOVED are followed there. A lock without metadata too: it has no
// metadata key, which a script naming one would find missing, and a
// migrating slot refuses a script whose keys exist only in part; before,
// such a lock could neither renew nor be inspected from SETSLOT MIGRATING
// on.
func TestLockFollowsASlotMigration(t *testing.T) {
	t.Parallel()
	t.Run("no wait", func(t *testing.T) { testLockFollowsASlotMigration(t, 0, "m") })
	t.Run("wait for all replicas", func(t *testing.T) { testLockFollowsASlotMigration(t, redislock.WaitAllReplicas, "m") })
	t.Run("no metadata", func(t *testing.T) { testLockFollowsASlotMigration(t, 0, "") })
}

func testLockFollowsASlotMigration(t *testing.T, wait int, metadata string) {
	replicas := 0
	if wait != 0 {
		replicas = 1
	}
	cl := redistest.StartReplicatedCluster(t, 3, replicas)
	cc := redistest.ClusterClient(t, cl.Addrs)
	ctx := context.Background()
	opts := func(id string) *redislock.Options {
		return &redislock.Options{AssumeDurable: true, Identity: id, NodeTimeout: 2 * time.Second, WaitReplicas: wait}
	}
	a, err := redislock.New([]redis.UniversalClient{cc}, opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := redislock.New([]redis.UniversalClient{cc}, opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	const name = "migrant"
	key := lockKey(name)
	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key + ":fence", key + ":until", key + ":meta", redislock.EpochKey(a, name)} {
		if s, err := cc.ClusterKeySlot(ctx, k).Result(); err != nil || s != slot {
			t.Fatalf("key %s is in slot %d (%v), the lock's in %d", k, s, err, slot)
		}
	}
	l, err := a.ObtainWait(ctx, name, 10*time.Second, &redislock.ObtainOptions{Metadata: metadata})
	if err != nil {
		t.Fatal(err)
	}

	// The masters by node ID, and which one serves the slot.
	nodes := map[string]*redis.Client{}
	var source, target string
	for _, addr := range cl.Addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		if role, err := c.Do(ctx, "role").Slice(); err != nil {
			t.Fatal(err)
		} else if role[0] != "master" {
			continue
		}
		id, err := c.Do(ctx, "cluster", "myid").Text()
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = c
		if n, err := c.ClusterCountKeysInSlot(ctx, int(slot)).Result(); err != nil {
			t.Fatal(err)
		} else if n > 0 {
			source = id
		}
	}
	for id := range nodes {
		if id != source {
			target = id
			break
		}
	}
	if source == "" {
		t.Fatal("no master holds the lock's keys")
	}
	src, dst := nodes[source], nodes[target]
	host, port, _ := strings.Cut(dst.Options().Addr, ":")
	migrate := func(keys ...string) {
		t.Helper()
		args := append([]any{"migrate", host, port, "", 0, 5000, "keys"}, toAny(keys)...)
		if err := src.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("MIGRATE %v: %v", keys, err)
		}
	}
	renew := func(step string) {
		t.Helper()
		if err := l.Refresh(ctx); err != nil {
			t.Fatalf("%s: renewal: %v", step, err)
		}
		if h, err := b.Inspect(ctx, name); err != nil || h.Identity != "a" || h.Fence != l.Fence() {
			t.Fatalf("%s: Inspect %+v, %v; want a with fence %d", step, h, err, l.Fence())
		}
		// Refused, or not answered: while the slot migrates, a script
		// whose keys are not all on one master gets TRYAGAIN, and b's
		// attempt names some (the epoch marker) that a's lock lacks.
		if _, err := b.Obtain(ctx, name, 10*time.Second); err == nil {
			t.Fatalf("%s: b obtained the lock a holds", step)
		} else {
			t.Logf("%s: b's attempt: %v", step, err)
		}
	}

	if err := dst.Do(ctx, "cluster", "setslot", slot, "importing", source).Err(); err != nil {
		t.Fatal(err)
	}
	if err := src.Do(ctx, "cluster", "setslot", slot, "migrating", target).Err(); err != nil {
		t.Fatal(err)
	}
	renew("slot migrating, no key moved")
	// The lock key first: the scripts then find their keys split between
	// the masters (TRYAGAIN) until the rest follows.
	migrate(key)
	split := l.Refresh(ctx)
	if errors.Is(split, redislock.ErrLockLost) || errors.Is(split, redislock.ErrNotObtained) {
		t.Fatalf("a renewal with the lock's keys split between two masters counted the lock as lost: %v", split)
	}
	if !l.Valid() {
		t.Fatal("the holder stopped believing while its keys were split between two masters")
	}
	t.Logf("renewal with the keys split: %v", split)
	rest, err := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	migrate(rest...)
	renew("every key moved, slot still migrating (ASK)")
	for id, c := range nodes {
		if err := c.Do(ctx, "cluster", "setslot", slot, "node", target).Err(); err != nil {
			t.Fatalf("SETSLOT NODE on %s: %v", id, err)
		}
	}
	renew("slot moved (MOVED)")
	keys := []string{key, key + ":fence", key + ":until"}
	if metadata != "" {
		keys = append(keys, key+":meta")
	}
	if n, _ := dst.Exists(ctx, keys...).Result(); n != int64(len(keys)) {
		t.Fatalf("the new master holds %d of the lock's %d keys", n, len(keys))
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release after the migration: %v", err)
	}
	next, err := b.Obtain(ctx, name, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if next.Fence() != l.Fence()+1 {
		t.Fatalf("the next holder's fence %d, want %d: the counter did not move with the lock", next.Fence(), l.Fence()+1)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// In a Cluster, WaitAllReplicas sends each write and its WAIT to the master
// of the lock's slot: a grant counts once that master's replica has it,
// fails while the replica does not answer, and survives a CLUSTER FAILOVER
// TAKEOVER (a promotion without the master's agreement, the riskiest):
// the promoted replica has the lock, the holder's renewal follows MOVED to
// it, another candidate is refused there, and, once the holder stops
// renewing, that candidate takes the lock after its ttl (after a failover
// the lock is not left to its old holder alone), with a greater token.
func TestWaitAllReplicasInACluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartReplicatedCluster(t, 3, 1)
	cc := redistest.ClusterClient(t, cl.Addrs)
	ctx := context.Background()
	client := func(id string) *redislock.Client {
		c, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{
			AssumeDurable: true, Identity: id, WaitReplicas: redislock.WaitAllReplicas, NodeTimeout: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := client("a"), client("b")
	const name, ttl = "replicated", 3 * time.Second
	key := lockKey(name)
	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The master of the lock's slot and its replica, once gossip has told
	// every node of the replica.
	sh, err := cl.WaitHealthy(ctx, slot, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	master, replica := sh.Master, sh.Replicas[0]
	onReplica := func() string {
		t.Helper()
		c := redistest.Clients(t, replica)[0].(*redis.Client).Conn()
		defer func() { _ = c.Close() }()
		if err := c.ReadOnly(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		v, err := c.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		return v
	}

	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	_, err = a.Obtain(ctx, name, ttl)
	if rerr := replica.Resume(); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, redislock.ErrReplication) || !strings.Contains(err.Error(), "0 of the 1 replicas that may be promoted") {
		t.Fatalf("a grant the slot's replica does not acknowledge: %v; want ErrReplication, 0 of the 1 replicas that may be promoted", err)
	}
	waitFor(t, 10*time.Second, "the unreplicated grant given back", func() bool { return get(t, master, key) == "" })
	var l *redislock.Lock
	waitFor(t, 10*time.Second, "a grant the replica acknowledges", func() bool {
		l, err = a.Obtain(ctx, name, ttl)
		return err == nil
	})
	if onReplica() == "" {
		t.Fatal("the replica lacks a grant WaitAllReplicas counted")
	}

	if err := redistest.Clients(t, replica)[0].Do(ctx, "cluster", "failover", "takeover").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the old master to follow the promoted replica", func() bool {
		info, err := redistest.Clients(t, master)[0].Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:slave")
	})
	if v := get(t, replica, key); v == "" {
		t.Fatal("the promoted replica lacks the lock")
	}
	waitFor(t, 10*time.Second, "a renewal on the promoted replica", func() bool { return l.Refresh(ctx) == nil })
	if _, err := b.Obtain(ctx, name, ttl); err == nil {
		t.Fatal("b obtained the lock a holds, after the failover")
	}
	// a stops renewing: b takes the lock once a's ttl has passed.
	var next *redislock.Lock
	waitFor(t, 3*ttl+10*time.Second, "b to take the lock a stopped renewing", func() bool {
		next, err = b.Obtain(ctx, name, ttl)
		return err == nil
	})
	if next.Fence() <= l.Fence() {
		t.Fatalf("b's token %d after the failover is not above a's %d (S3)", next.Fence(), l.Fence())
	}
}

// busMessages sums, over every node of a Cluster, the CLUSTER INFO
// counters of broadcast PUBLISH messages and of sharded ones (SPUBLISH)
// sent on the cluster bus. A node counts a message as it queues it on a
// link, within the command that sends it; what the receivers count
// depends on the bus links staying up until delivery, which is Redis's
// business, not ours.
func busMessages(t *testing.T, c *redistest.Cluster) (publish, shard int) {
	t.Helper()
	for _, s := range c.Servers {
		rc := s.Client()
		info, err := rc.ClusterInfo(context.Background()).Result()
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			n, _ := strconv.Atoi(v)
			switch k {
			case "cluster_stats_messages_publish_sent":
				publish += n
			case "cluster_stats_messages_publishshard_sent":
				shard += n
			}
		}
	}
	return publish, shard
}

// On a Redis Cluster a lock's events are shard messages: a grant and a
// release on a 3-master, 6-node Cluster send no broadcast PUBLISH across
// the cluster bus (which reaches every node), only a sharded one to the
// replica of the lock's shard; and a waiter on each of the names, spread
// over the shards, is still woken at once by its release, over one
// subscription per shard.
func TestEventsStayInTheLocksShard(t *testing.T) {
	t.Parallel()
	cl := redistest.StartReplicatedCluster(t, 3, 1)
	holder, waiter := clusterClient(t, cl, "holder"), clusterClient(t, cl, "waiter")
	ctx := context.Background()
	names := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}
	first := redistest.Clients(t, cl.Servers[0])[0]
	masters := make([]redis.UniversalClient, len(names))
	for i, name := range names {
		slot, err := first.ClusterKeySlot(ctx, lockKey(name)).Result()
		if err != nil {
			t.Fatal(err)
		}
		sh, err := cl.WaitHealthy(ctx, slot, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		m := redistest.Clients(t, sh.Master)[0]
		masters[i] = m
	}
	wakes := make([]<-chan struct{}, len(names))
	for i, name := range names {
		var stop func()
		wakes[i], stop = waiter.WatchReleases(ctx, name)
		defer stop()
	}
	// A watch subscribes in the background: a release before its
	// SSUBSCRIBE reached the shard would wake no one, rightly.
	waitFor(t, 30*time.Second, "the waiter to subscribe to each name's events", func() bool {
		for i, name := range names {
			n, err := masters[i].Do(ctx, "pubsub", "shardnumsub", redislock.EventsChannel(name)).Slice()
			if err != nil || len(n) != 2 || n[1] != int64(1) {
				return false
			}
		}
		return true
	})
	counter := redistest.ClusterClient(t, cl.Addrs)
	commands, err := redisstats.Read(ctx, counter)
	if err != nil {
		t.Fatal(err)
	}
	publish0, shard0 := busMessages(t, cl)
	for i, name := range names {
		obtainAndRelease(t, holder, name)
		select {
		case <-wakes[i]:
		case <-time.After(30 * time.Second):
			t.Fatalf("the release of %s woke no waiter", name)
		}
	}
	publish, shard := busMessages(t, cl)
	after, err := redisstats.Read(ctx, counter)
	if err != nil {
		t.Fatal(err)
	}
	commands = after.Sub(commands)
	if got, want := commands["spublish"], int64(2*len(names)); got != want {
		t.Errorf("the masters ran %d SPUBLISH for %d grants and releases; want %d", got, len(names), want)
	}
	if got := commands["publish"]; got != 0 {
		t.Errorf("the masters ran %d broadcast PUBLISH; want 0", got)
	}
	if publish != publish0 {
		t.Errorf("%d broadcast PUBLISH messages crossed the cluster bus for %d grants and releases; want 0", publish-publish0, 2*len(names))
	}
	// Each shard has one replica: a shard message goes to it alone (it is
	// not sent to a node whose bus link is down, so fewer is possible).
	if shard-shard0 > 2*len(names) {
		t.Errorf("%d shard messages sent on the bus; want at most %d, one per grant and release to the shard's one replica", shard-shard0, 2*len(names))
	}
	if got := pubsubConns(t, cl); got != 3 {
		t.Errorf("the waiter's watches of %d names hold %d pub/sub connections; want 3, one per shard", len(names), got)
	}
}

// clusterClient returns a Client of identity on a Cluster client of its
// own.
func clusterClient(t *testing.T, cl *redistest.Cluster, identity string) *redislock.Client {
	t.Helper()
	cc := redistest.ClusterClient(t, cl.Addrs)
	c, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{AssumeDurable: true, Identity: identity, NodeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// obtainAndRelease takes the lock called name with c and releases it: a
// grant and a release event.
func obtainAndRelease(t *testing.T, c *redislock.Client, name string) {
	t.Helper()
	ctx := context.Background()
	l, err := c.Obtain(ctx, name, time.Minute)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// pubsubConns counts the pub/sub connections on every node of a Cluster.
func pubsubConns(t *testing.T, c *redistest.Cluster) int {
	t.Helper()
	n := 0
	for _, s := range c.Servers {
		n += pubsubClients(t, s)
	}
	return n
}

// A watch follows its lock's slot to another shard: after the slot is
// migrated (the old master drops the shard channel, or refuses it with
// MOVED), a release on the new master still wakes the waiter, and a
// watch of a name that stayed keeps working.
func TestWatchFollowsItsSlotToAnotherShard(t *testing.T) {
	t.Parallel()
	cl := redistest.StartReplicatedCluster(t, 3, 0)
	holder, waiter := clusterClient(t, cl, "holder"), clusterClient(t, cl, "waiter")
	ctx := context.Background()
	slot, from, to := migrationOf(t, cl, "migrant")
	wakes := map[string]<-chan struct{}{}
	for _, name := range []string{"migrant", "alpha", "bravo"} {
		var stop func()
		wakes[name], stop = waiter.WatchReleases(ctx, name)
		defer stop()
	}
	if err := cl.MigrateSlot(ctx, slot, to); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"migrant", "alpha", "bravo"} {
		// The waiter may still be moving its subscription: each release
		// of a retry wakes it once it is there.
		woken := false
		for deadline := time.Now().Add(20 * time.Second); !woken && time.Now().Before(deadline); {
			obtainAndRelease(t, holder, name)
			select {
			case <-wakes[name]:
				woken = true
			case <-time.After(500 * time.Millisecond):
			}
		}
		if !woken {
			t.Fatalf("no release of %s woke its waiter within 20s of the migration of slot %d from %s to %s", name, slot, from.Master.Addr, to.Addr)
		}
	}
}

// WaitAllReplicas waits, on each master, for that master's replicas: in a
// Cluster whose masters have different numbers of replicas (a second one
// added to one master), a Client that wrote to the master with two goes on
// being granted on the one with one, and so does a fresh one. Before, the
// count was the most one Client had seen on any master, and it spread from
// master to master through the records it wrote.
func TestWaitAllReplicasCountsEachMastersOwnReplicas(t *testing.T) {
	t.Parallel()
	cl := redistest.StartReplicatedCluster(t, 3, 1)
	cc := redistest.ClusterClient(t, cl.Addrs)
	ctx := context.Background()
	client := func(id string) *redislock.Client {
		c, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{
			AssumeDurable: true, Identity: id, WaitReplicas: redislock.WaitAllReplicas, NodeTimeout: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// A name on each of two masters.
	shardOf := func(name string) redistest.Shard {
		slot, err := cc.ClusterKeySlot(ctx, lockKey(name)).Result()
		if err != nil {
			t.Fatal(err)
		}
		sh, err := cl.WaitHealthy(ctx, slot, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		return sh
	}
	two, one := "n0", ""
	twoShard := shardOf(two)
	for i := 1; one == ""; i++ {
		if name := "n" + strconv.Itoa(i); shardOf(name).Master != twoShard.Master {
			one = name
		}
	}
	added := cl.AddReplica(t, twoShard.Master)
	c := client("c")
	var l *redislock.Lock
	waitFor(t, 30*time.Second, "a grant both replicas of its master acknowledge", func() bool {
		var err error
		l, err = c.Obtain(ctx, two, time.Minute)
		return err == nil
	})
	// A replica answers GET with MOVED: read it in READONLY.
	rc := redistest.Clients(t, added)[0].(*redis.Client).Conn()
	defer func() { _ = rc.Close() }()
	if err := rc.ReadOnly(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := rc.Get(ctx, lockKey(two)).Result(); err != nil || v == "" {
		t.Fatalf("the added replica lacks a grant WaitAllReplicas counted: %q, %v", v, err)
	}
	for _, cl := range []*redislock.Client{c, client("fresh")} {
		if err := tryObtain(cl, one); err != nil {
			t.Fatalf("%s, on the master with one replica: %v", cl.Identity(), err)
		}
	}
	if err := l.Refresh(ctx); err != nil {
		t.Fatalf("a renewal on the master with two replicas: %v", err)
	}
}

// A release made while the lock's slot migrates, once its keys have moved
// and before SETSLOT NODE, runs on the importing master (ASK) and is
// published in that master's shard, which the waiter does not listen to.
// At SETSLOT NODE the old owner drops the waiter's subscription; the
// waiter subscribes where the slot lives now, and takes the drop for a
// release it may have missed: it wakes. Before, it slept on until its
// next look.
func TestAReleaseDuringASlotMigrationWakesItsWaiter(t *testing.T) {
	t.Parallel()
	cl := redistest.StartReplicatedCluster(t, 3, 0)
	holder, waiter := clusterClient(t, cl, "holder"), clusterClient(t, cl, "waiter")
	ctx := context.Background()
	slot, from, to := migrationOf(t, cl, "migrant")
	l, err := holder.Obtain(ctx, "migrant", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wake, stop := waiter.WatchReleases(ctx, "migrant")
	defer stop()
	err = cl.MigrateSlotWith(ctx, slot, to, redistest.MigrationSteps{Moved: func(ctx context.Context) error { return l.Release(ctx) }})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(20 * time.Second):
		t.Fatalf("a release during the migration of slot %d from %s to %s woke no waiter within 20s of SETSLOT NODE", slot, from.Master.Addr, to.Addr)
	}
}

// migrationOf returns the slot of the lock called name on cl, the shard
// that serves it, and another master to migrate it to.
func migrationOf(t *testing.T, cl *redistest.Cluster, name string) (int64, redistest.Shard, *redisproc.Server) {
	t.Helper()
	ctx := context.Background()
	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	t.Cleanup(func() { _ = admin.Close() })
	slot, err := admin.ClusterKeySlot(ctx, lockKey(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	from, err := cl.SlotShard(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cl.Servers {
		if s != from.Master {
			return slot, from, s
		}
	}
	t.Fatal("no other master")
	return 0, redistest.Shard{}, nil
}

// A CLUSTER FAILOVER leaves the old master's other replica following the
// old master, now itself a replica, until it hears who took the slots: a
// chain whose end the new master's WAIT does not see. That replica may be
// promoted before it has synced with the new master (its data is as fresh
// as its last link), so a grant must wait for it. Before, the new master
// listed only its own replicas (CLUSTER REPLICAS), and a grant counted
// with the chained replica lacking it: the token it handed out could be
// handed out again after a failover to that replica (the chaos run's two
// S3 regressions).
func TestWaitAllReplicasCountsTheOldMastersOtherReplicaAfterAFailover(t *testing.T) {
	t.Parallel()
	// A long node timeout: the paused replica is not flagged failed (and
	// so no longer promotable) while the test looks.
	cl := redistest.StartReplicatedCluster(t, 3, 1, "--cluster-node-timeout", "60000")
	cc := redistest.ClusterClient(t, cl.Addrs)
	c, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{
		AssumeDurable: true, Identity: "c", WaitReplicas: redislock.WaitAllReplicas, NodeTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const name = "chained"
	slot, _, _ := migrationOf(t, cl, name)
	sh, err := cl.WaitHealthy(ctx, slot, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	old, promoted := sh.Master, sh.Replicas[0]
	chained := cl.AddReplica(t, old)
	obtainAndRelease(t, c, name)
	oldID, promotedID, chainedID := nodeID(t, old), nodeID(t, promoted), nodeID(t, chained)

	if err := chained.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := chained.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	pc := redistest.Clients(t, promoted)[0]
	failover := func(mode ...any) {
		if err := pc.Do(ctx, append([]any{"cluster", "failover"}, mode...)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	failover()
	asked := time.Now()
	var nodes string
	defer func() {
		if t.Failed() {
			t.Logf("the new master's last view:\n%s", nodes)
		}
	}()
	// The new master sees the old one follow it, and the chained replica
	// still following the old one. A manual failover that does not
	// complete within its 5s (the old master's handshake, the votes: a
	// loaded machine) is dropped by Redis, and asking again the same way
	// does nothing: a master votes once per two node timeouts (120s
	// here), and the replica asks for votes again only after twice that.
	// So the second ask is a TAKEOVER, which needs no votes.
	waitFor(t, 60*time.Second, "the new master to see the old one follow it", func() bool {
		var err error
		nodes, err = pc.ClusterNodes(ctx).Result()
		if err == nil && slaveOf(nodes, oldID) == promotedID && slaveOf(nodes, chainedID) == oldID {
			return true
		}
		if time.Since(asked) > 10*time.Second {
			if info, err := pc.Info(ctx, "replication").Result(); err == nil && strings.Contains(info, "role:slave") {
				t.Logf("CLUSTER FAILOVER not done in 10s; asking for a TAKEOVER. The new master's view:\n%s", nodes)
				failover("takeover")
			}
			asked = time.Now()
		}
		return false
	})
	if sh, err = cl.SlotShard(ctx, slot); err != nil || sh.Master != promoted {
		t.Fatalf("after CLUSTER FAILOVER the slot's master is %v (%v); want %s", sh.Master, err, promoted.Addr)
	}
	// The first call after the failover follows a MOVED, and go-redis
	// then reloads the Cluster's layout from a node it picks at random: the
	// paused replica, at times, which answers nothing within the node
	// timeout (with a NodeTimeout of 2s and of 4s alike). Such a call is
	// tried again; the refusal is what the others must give.
	waitFor(t, 30*time.Second, "a grant that does not time out", func() bool {
		_, err = c.Obtain(ctx, name, 10*time.Second)
		return !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded)
	})
	if !errors.Is(err, redislock.ErrReplication) || !strings.Contains(err.Error(), chained.Addr) {
		t.Fatalf("a grant on the new master while the old master's other replica, paused, follows the old one: %v; want ErrReplication naming %s", err, chained.Addr)
	}
	resume()
	waitFor(t, 60*time.Second, "a grant once the chained replica follows the new master", func() bool {
		l, err := c.Obtain(ctx, name, 10*time.Second)
		if err != nil {
			return false
		}
		_ = l.Release(ctx)
		return true
	})
}

// nodeID is s's Cluster node ID.
func nodeID(t *testing.T, s *redisproc.Server) string {
	t.Helper()
	id, err := redistest.Clients(t, s)[0].Do(context.Background(), "cluster", "myid").Text()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// slaveOf is the master ID that CLUSTER NODES gives for the node id.
func slaveOf(nodes, id string) string {
	for line := range strings.Lines(nodes) {
		if f := strings.Fields(line); len(f) > 3 && f[0] == id {
			return f[3]
		}
	}
	return ""
}

// E1 of WaitAllReplicas in a Cluster: each call that waits for replicas
// (an acquire, a renewal; a release waits for none) reads the master's
// CLUSTER NODES once, in its own round trip, whether it wrote or not (an
// acquire refused for a holder sends it too: the round trip is one, so it
// goes before the outcome is known), and nothing more.
func TestClusterWaitReadsTheTopologyOncePerWrite(t *testing.T) {
	t.Parallel()
	cl := redistest.StartReplicatedCluster(t, 3, 1)
	cc := redistest.ClusterClient(t, cl.Addrs)
	client := func(id string) *redislock.Client {
		c, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{
			AssumeDurable: true, Identity: id, WaitReplicas: redislock.WaitAllReplicas, NodeTimeout: 2 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := client("a"), client("b")
	ctx := context.Background()
	const name = "counted"
	slot, _, _ := migrationOf(t, cl, name)
	sh, err := cl.WaitHealthy(ctx, slot, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	master := redistest.Clients(t, sh.Master)[0]
	reads := func() int64 {
		t.Helper()
		n, err := redisstats.Read(ctx, master)
		if err != nil {
			t.Fatal(err)
		}
		return n["cluster nodes"]
	}
	obtainAndRelease(t, a, name) // the first write's round trips aside
	before := reads()
	const ops = 10
	for range ops {
		obtainAndRelease(t, a, name)
	}
	if got := reads() - before; got != ops {
		t.Errorf("%d acquires and releases read CLUSTER NODES %d times; want %d, one per acquire", ops, got, ops)
	}
	l, err := a.Obtain(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before = reads()
	for range ops {
		if _, err := b.Obtain(ctx, name, time.Minute); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("an acquire of a held lock: %v; want ErrNotObtained", err)
		}
	}
	if got := reads() - before; got != ops {
		t.Errorf("%d refused acquires read CLUSTER NODES %d times; want %d, one per call", ops, got, ops)
	}
	_ = l.Release(ctx)
}
