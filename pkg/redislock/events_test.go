package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// A Client with a KeyPrefix hears the grants and releases of the lock it
// watches under its prefix, and nothing of the same name under another
// prefix or of another name: the controller finds out about changes this
// way.
func TestWatchEventsHearsItsLockUnderItsKeyPrefix(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ctx := context.Background()
	client := func(prefix string) *redislock.Client {
		c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "p", KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	heard := make(chan struct{}, 16)
	stop := client("app*:").WatchEvents(ctx, "team/job", func() { heard <- struct{}{} })
	defer stop()
	// WatchEvents waits only NodeTimeout for the confirmation; a loaded
	// machine may take longer, and a grant before it would go unheard.
	admin := s.Client()
	defer func() { _ = admin.Close() }()
	waitFor(t, 10*time.Second, "the channel to be subscribed", func() bool {
		chans, err := admin.PubSubChannels(ctx, "*").Result()
		return err == nil && len(chans) == 1 && chans[0] == "app*:{team/job}:events"
	})
	for _, c := range []struct{ prefix, name string }{{"app:", "team/job"}, {redislock.DefaultKeyPrefix, "team/job"}, {"app*:", "team/other"}, {"app*:", "team/job"}} {
		l, err := client(c.prefix).Obtain(ctx, c.name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"grant", "release"} {
		select {
		case <-heard:
		case <-time.After(10 * time.Second):
			t.Fatalf("heard nothing of the %s of app*:{team/job}", want)
		}
	}
	stop()
	select {
	case <-heard:
		t.Fatal("heard more than the grant and the release of the watched lock")
	default:
	}
}

// pubsubClients is how many pub/sub connections s has: subscribed to at
// least one channel (Redis clears the flag on the last UNSUBSCRIBE).
func pubsubClients(t *testing.T, s *redisproc.Server) int {
	t.Helper()
	n := 0
	for _, line := range clientList(t, s) {
		if strings.Contains(line, " flags=P ") {
			n++
		}
	}
	return n
}

// clientList is s's CLIENT LIST, a line per connection.
func clientList(t *testing.T, s *redisproc.Server) []string {
	t.Helper()
	c := s.Client()
	defer func() { _ = c.Close() }()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(list), "\n")
}

// The release watches of one Client share one subscription per node: 200
// waiters on 200 names hold one pub/sub connection on each of three nodes,
// each name subscribed once; a release wakes exactly the watches of its
// name, two watches of one name share its subscription, and the last stop
// closes the connection.
func TestReleaseWatchesShareOneSubscriptionPerNode(t *testing.T) {
	servers := []*redisproc.Server{redistest.Start(t, redisproc.Options{}), redistest.Start(t, redisproc.Options{}), redistest.Start(t, redisproc.Options{})}
	// The waiter's connections carry its name, so that they can be told
	// from the holder's: a Redlock grant's announcement and the release
	// right after it may use two of its pool's (they did beside two busy
	// loops).
	nodes := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr, ClientName: "waiter", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rc.Close() })
		nodes[i] = rc
	}
	c, err := redislock.New(nodes, &redislock.Options{AssumeDurable: true, Identity: "waiter", NodeTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	holder := newClient(t, "holder", servers...)
	waiterConns := func(s *redisproc.Server) []string {
		var out []string
		for _, line := range clientList(t, s) {
			if strings.Contains(line, " name=waiter ") {
				out = append(out, line)
			}
		}
		return out
	}
	ctx := context.Background()
	const n = 200
	wakes := make([]<-chan struct{}, n)
	stops := make([]func(), n)
	for i := range n {
		wakes[i], stops[i] = c.WatchReleases(ctx, fmt.Sprintf("job-%d", i))
	}
	again, stopAgain := c.WatchReleases(ctx, "job-7")
	for i, s := range servers {
		if got := pubsubClients(t, s); got != 1 {
			t.Errorf("node %d: %d pub/sub connections for %d watches; want 1", i, got, n+1)
		}
		if got := waiterConns(s); len(got) != 1 {
			t.Errorf("node %d: the waiter has %d connections for %d watches; want 1, its subscription:\n%s", i, len(got), n+1, strings.Join(got, "\n"))
		}
		admin := s.Client()
		// A confirmation slower than the 100ms NodeTimeout (a loaded
		// machine) leaves a SUBSCRIBE in flight when WatchReleases returns.
		var chans []string
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d to subscribe %d channels", i, n), func() bool {
			var err error
			chans, err = admin.PubSubChannels(ctx, "redislock:{job-*}:events").Result()
			return err == nil && len(chans) >= n
		})
		if len(chans) != n {
			t.Errorf("node %d: %d channels subscribed; want %d", i, len(chans), n)
		}
		subs, err := admin.PubSubNumSub(ctx, redislock.EventsChannel("job-7")).Result()
		if err != nil || subs[redislock.EventsChannel("job-7")] != 1 {
			t.Errorf("node %d: job-7 has %v subscribers (%v); want 1 for its two watches", i, subs, err)
		}
		_ = admin.Close()
	}
	l, err := holder.Obtain(ctx, "job-7", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, w := range []<-chan struct{}{wakes[7], again} {
		select {
		case <-w:
		case <-time.After(10 * time.Second):
			t.Fatal("the release of job-7 woke not every watch of job-7")
		}
	}
	for i, w := range wakes {
		select {
		case <-w:
			if i != 7 {
				t.Errorf("the release of job-7 woke the watch of job-%d", i)
			}
		default:
		}
	}
	stopAgain()
	for _, stop := range stops {
		stop()
	}
	// Unsubscribed, a connection loses its pub/sub flag: count them all.
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, redislock.SubscriptionLinger+10*time.Second, true, func(context.Context) (bool, error) {
		left = nil
		for i, s := range servers {
			if conns := waiterConns(s); len(conns) > 0 {
				left = append(left, fmt.Sprintf("node %d:\n%s", i, strings.Join(conns, "\n")))
			}
		}
		return left == nil, nil
	})
	if err != nil {
		t.Fatalf("the waiter's connections did not close within %v of its last watch's end:\n%s", redislock.SubscriptionLinger+10*time.Second, strings.Join(left, "\n"))
	}
}

// A subscription outlives its last watch by SubscriptionLinger: a watch
// that comes within it dials no new connection and hears a release, and
// the connection closes once the linger has passed with nothing watched.
// Waiters that come and go, goroutines of one process taking turns on a
// lock, otherwise dialled one connection per few handovers.
func TestASubscriptionLingersForTheNextWatch(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	clk := testingclock.NewFakeClock(time.Now())
	c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "waiter", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	admin := s.Client()
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	stat := func(section, field string) int64 {
		t.Helper()
		info, err := admin.Info(ctx, section).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				var n int64
				if _, err := fmt.Sscan(v, &n); err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("INFO %s has no %s", section, field)
		return 0
	}
	holder := newClient(t, "holder", s)
	obtainAndRelease(t, holder, "warm-up") // its connection, counted in before
	before := stat("clients", "connected_clients")
	_, stop := c.WatchReleases(ctx, "job")
	stop()
	dialled := stat("stats", "total_connections_received")
	wake, stop := c.WatchReleases(ctx, "job")
	defer stop()
	if got := stat("stats", "total_connections_received"); got != dialled {
		t.Errorf("a watch right after the last one left dialled %d new connections; want 0, the lingering subscription", got-dialled)
	}
	obtainAndRelease(t, holder, "job")
	select {
	case <-wake:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch on the lingering subscription heard no release")
	}
	stop()
	if got := stat("clients", "connected_clients"); got != before+1 {
		t.Errorf("%d connections right after the last watch ended; want %d, the lingering subscription", got, before+1)
	}
	// The Client's fake clock stands still: the linger runs on the real
	// one, and leaves no timer on Options.Clock.
	if clk.HasWaiters() {
		t.Error("the lingering subscription left a timer on the Client's clock")
	}
	waitFor(t, redislock.SubscriptionLinger+20*time.Second, "the lingering subscription to close", func() bool {
		return stat("clients", "connected_clients") == before
	})
}

// With WaitReplicas a grant is announced once its replica acknowledged it,
// and one the replica refused (it is paused), which is given back,
// announces nothing: the next message after it on the lock's channel is
// one the test publishes.
func TestARefusedGrantWakesNoWatcher(t *testing.T) {
	t.Parallel()
	m := redistest.Start(t, redisproc.Options{})
	host, port, _ := strings.Cut(m.Addr, ":")
	replica := redistest.Start(t, redisproc.Options{Args: []string{"--replicaof", host, port}})
	master := redistest.Clients(t, m)[0]
	ctx := context.Background()
	waitFor(t, 30*time.Second, "the replica online", func() bool {
		info, err := master.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, ",state=online,")
	})
	c, err := redislock.New([]redis.UniversalClient{master}, &redislock.Options{
		AssumeDurable: true, Identity: "refused", WaitReplicas: 1, NodeTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	sub := master.Subscribe(ctx, redislock.EventsChannel("job"))
	defer func() { _ = sub.Close() }()
	if _, err := sub.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	next := func() string {
		t.Helper()
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		msg, err := sub.ReceiveMessage(wait)
		if err != nil {
			t.Fatalf("no message on the lock's channel: %v", err)
		}
		return msg.Payload
	}
	l, err := c.Obtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "acquired" {
		t.Fatalf("a grant the replica acknowledged announced %q; want acquired", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "released" {
		t.Fatalf("the release announced %q; want released", got)
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Obtain(ctx, "job", time.Minute)
	if rerr := replica.Resume(); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, redislock.ErrReplication) {
		t.Fatalf("a grant with the replica paused: %v; want ErrReplication", err)
	}
	if err := master.Publish(ctx, redislock.EventsChannel("job"), "marker").Err(); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "marker" {
		t.Fatalf("a grant the replica refused announced %q; want nothing before the marker", got)
	}
}

// With Redlock a grant is announced once a majority granted it: an attempt
// that won one node of three (the other two held by someone else) is given
// back there and announces nothing, so no watcher looks for a holder that
// never held. Before, that node's script announced it at once.
func TestALostRedlockAttemptWakesNoWatcher(t *testing.T) {
	servers := redistest.StartN(t, 3)
	nodes := redistest.Clients(t, servers...)
	ctx := context.Background()
	c, err := redislock.New(nodes, &redislock.Options{AssumeDurable: true, Identity: "loser", NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[1:] {
		if err := n.Set(ctx, lockKey("job"), "v1:0123456789abcdef0123456789abcdef:other", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	first := nodes[0].(*redis.Client)
	sub := first.Subscribe(ctx, redislock.EventsChannel("job"))
	defer func() { _ = sub.Close() }()
	if _, err := sub.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	if _, err := c.Obtain(ctx, "job", time.Minute); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("an attempt that won one node of three: %v; want ErrNotObtained", err)
	}
	if err := first.Publish(ctx, redislock.EventsChannel("job"), "marker").Err(); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := sub.ReceiveMessage(wait)
	if err != nil {
		t.Fatalf("no message on the lock's channel: %v", err)
	}
	if msg.Payload != "marker" {
		t.Fatalf("a lost Redlock attempt announced %q; want nothing before the marker", msg.Payload)
	}
}

// A watch whose context has ended before its SUBSCRIBE is sent (a caller
// that gave up, or one that waited its NodeTimeout out behind thousands of
// others) leaves the shared subscription as it was: the release of
// another watch's lock right after it still wakes that watch.
func TestAnEndedWatchLeavesTheSharedSubscriptionAlone(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	c := newClient(t, "waiter", s)
	ctx := context.Background()
	wake, stop := c.WatchReleases(ctx, "kept")
	defer stop()
	admin := s.Client()
	defer func() { _ = admin.Close() }()
	waitFor(t, 10*time.Second, "kept's channel subscribed", func() bool {
		n, err := admin.PubSubNumSub(ctx, redislock.EventsChannel("kept")).Result()
		return err == nil && n[redislock.EventsChannel("kept")] == 1
	})
	l, err := newClient(t, "holder", s).Obtain(ctx, "kept", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, stopEnded := c.WatchReleases(ended, "given-up")
	defer stopEnded()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("a release right after another watch's ended context woke no one: the shared subscription dropped it")
	}
}
