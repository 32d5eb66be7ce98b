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

// guardedClient is a Client with the restart guard on.
func guardedClient(t *testing.T, identity string, servers ...*redisproc.Server) *redislock.Client {
	t.Helper()
	c, err := redislock.New(redistest.Clients(t, servers...), &redislock.Options{Identity: identity, NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantRestartGuard fails t unless err is the restart guard's refusal (not
// a vanished key's) with a wait of at most ttl, and returns the wait.
func wantRestartGuard(t *testing.T, err error, what string, ttl time.Duration) time.Duration {
	t.Helper()
	var g *redislock.GuardedError
	if !errors.As(err, &g) || g.KeyVanished || g.Wait <= 0 || g.Wait > ttl {
		t.Fatalf("%s: %v, want the restart guard's GuardedError with a wait within the ttl %v", what, err, ttl)
	}
	return g.Wait
}

// A FLUSHALL or FLUSHDB on a node that has been up for long takes the lock
// key and its validity with every other key: the holder may still believe
// it holds the lock until its renewal finds the key gone. The epoch marker
// goes with them, so the node grants nothing for a ttl (S1), and the next
// token is still larger (S3).
func TestRestartGuardCatchesAFlush(t *testing.T) {
	t.Parallel()
	for _, flush := range []string{"flushall", "flushdb", "flushall+resetstat"} {
		t.Run(flush, func(t *testing.T) {
			s := redistest.Start(t, redisproc.Options{})
			const ttl = 2 * time.Second
			a, b := guardedClient(t, "a", s), guardedClient(t, "b", s)
			redistest.WaitUp(t, ttl, s)
			ctx := context.Background()
			// Up for a ttl and never flushed: no wait, even on first use.
			l, err := a.Obtain(ctx, "flushed", ttl)
			if err != nil {
				t.Fatalf("first lock on a node up for a ttl: %v", err)
			}
			c := s.Client()
			defer func() { _ = c.Close() }()
			cmd, resetstat := strings.CutSuffix(flush, "+resetstat")
			if err := c.Do(ctx, cmd).Err(); err != nil {
				t.Fatal(err)
			}
			if resetstat { // which clears the flush's count
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			flushed := time.Now()
			wantRestartGuard(t, firstErr(b.Obtain(ctx, "flushed", ttl)), "the held lock's name after the "+flush, ttl)
			// The guard waits the asking candidate's ttl: a long one keeps
			// this check from depending on how soon it runs.
			wantRestartGuard(t, firstErr(b.Obtain(ctx, "another", time.Minute)), "another name after the "+flush, time.Minute)
			if err := l.Refresh(ctx); !errors.Is(err, redislock.ErrLockLost) {
				t.Fatalf("the holder's renewal after the %s: %v, want ErrLockLost", flush, err)
			}
			var lb *redislock.Lock
			waitFor(t, 2*ttl+5*time.Second, "the guard to lift", func() bool {
				lb, err = b.Obtain(ctx, "flushed", ttl)
				return err == nil
			})
			if since := time.Since(flushed); since < ttl-10*time.Millisecond {
				t.Fatalf("granted %v after the %s, within the ttl %v", since, flush, ttl)
			}
			if lb.Fence() <= l.Fence() {
				t.Fatalf("fence after the %s %d, not above the fence before it %d", flush, lb.Fence(), l.Fence())
			}
		})
	}
}

// A restart that restores an older snapshot brings the epoch marker back,
// but not a lock granted after the snapshot. LASTSAVE, which Redis sets at
// start-up, tells the script that the process is newer than the marker, so
// the node is guarded for a ttl after its start.
func TestRestartGuardCatchesARestoredSnapshot(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	const ttl = 2 * time.Second
	a, b := guardedClient(t, "a", s), guardedClient(t, "b", s)
	redistest.WaitUp(t, ttl, s)
	ctx := context.Background()
	l, err := a.Obtain(ctx, "before", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := s.Client()
	defer func() { _ = c.Close() }()
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The snapshot lacks this lock; a node that lost it grants it again
	// at once unless guarded.
	if _, err := a.Obtain(ctx, "after", ttl); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if v := get(t, s, lockKey("before")+":fence"); v == "" {
		t.Fatal("the restart did not restore the snapshot: no fencing counter of the lock granted before it")
	}
	if v := get(t, s, lockKey("after")); v != "" {
		t.Fatalf("the restored snapshot holds the lock granted after it: %q", v)
	}
	// The guard waits the asking candidate's ttl from the process start: a
	// long one keeps this check from depending on how long the restart took.
	wantRestartGuard(t, firstErr(b.Obtain(ctx, "after", time.Minute)), "a lock lost by the restart", time.Minute+time.Second)
}

// LASTSAVE counts whole seconds: a marker written between two saves of
// one second, then restored by a restart in that second, shows the
// LASTSAVE the restarted process reports. So the guard takes nothing for
// checked within a save's second. Each try runs in one second of the
// server's clock; one whose restart ended in a later second proves
// nothing and is tried again.
func TestRestartGuardCatchesARestartInTheSecondOfASave(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	a, b := guardedClient(t, "a", s), guardedClient(t, "b", s)
	redistest.WaitUp(t, 7*time.Second, s)
	ctx := context.Background()
	for try := range 10 {
		c := s.Client()
		var start int64
		waitFor(t, 5*time.Second, "the start of a second on the server's clock", func() bool {
			now, err := c.Time(ctx).Result()
			start = now.Unix()
			return err == nil && now.Nanosecond() < 100*int(time.Millisecond)
		})
		name := "try" + strconv.Itoa(try) + "-"
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(c.Save(ctx).Err())
		must(firstErr(a.Obtain(ctx, name+"marker", 2*time.Second))) // reads the uptime, writes the marker
		must(c.Save(ctx).Err())                                     // which this snapshot holds
		must(firstErr(a.Obtain(ctx, name+"lost", 2*time.Second)))   // which it does not
		_ = c.Close()
		must(s.Restart())
		c = s.Client()
		restarted := c.LastSave(ctx).Val()
		_ = c.Close()
		if restarted != start {
			t.Logf("try %d: the restart ended in second %d, not %d: again", try, restarted, start)
			continue
		}
		// A ttl shorter than the old process's uptime: only a guard that
		// sees the restart holds the lock back.
		wantRestartGuard(t, firstErr(b.Obtain(ctx, name+"lost", 5*time.Second)), "a lock lost by a restart in the second of a save", 6*time.Second)
		return
	}
	t.Fatal("no try ran its saves and restart within one second")
}

// On a node known whole for a ttl, granting and releasing new names sends
// no INFO: the guard reads the epoch marker and LASTSAVE, and reads the
// uptime again only after LASTSAVE moved (a save), once past the save's
// second. Each command the
// scripts send is counted.
func TestRestartGuardSendsNoInfoOnALongRunningNode(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	const ttl = 2 * time.Second
	a := guardedClient(t, "a", s)
	redistest.WaitUp(t, ttl, s)
	ctx := context.Background()
	c := s.Client()
	defer func() { _ = c.Close() }()
	cycle := func(prefix string, n int) redisstats.Counts {
		t.Helper()
		before, err := redisstats.Read(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			l, err := a.Obtain(ctx, prefix+strconv.Itoa(i), ttl)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		after, err := redisstats.Read(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		d := after.Sub(before)
		d["info"]-- // the first Read's own
		return d
	}
	if d := cycle("first-", 1); d["info"] != 2 {
		t.Fatalf("first grant on the node: %d INFO, want 2 (uptime, and the flushes since the start)", d["info"])
	}
	const n = 200
	d := cycle("steady-", n)
	// Per acquire+release: SET NX of the key, TIME, MGET of the validity
	// and the marker, SET NX of the new counter, LASTSAVE, SET of the
	// validity, PUBLISH; then GET, DEL, PUBLISH.
	want := redisstats.Counts{"evalsha": 2 * n, "set": 3 * n, "time": n, "mget": n, "lastsave": n, "publish": 2 * n, "get": n, "del": n}
	for _, m := range []redisstats.Counts{d, want} {
		for cmd := range m {
			if cmd != "info" && d[cmd] != want[cmd] {
				t.Errorf("%d new names on a node known whole: %d %s, want %d (all: %v)", n, d[cmd], cmd, want[cmd], d)
			}
		}
	}
	if d["info"] != 0 {
		t.Fatalf("%d new names on a node known whole: %d INFO, want none", n, d["info"])
	}
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Within the save's second a restart would show the same LASTSAVE, so
	// the guard reads the uptime on each new name then; past it, once.
	saved := c.LastSave(ctx).Val()
	waitFor(t, 5*time.Second, "the server's clock past the save's second", func() bool {
		now, err := c.Time(ctx).Result()
		return err == nil && now.Unix() > saved
	})
	if d := cycle("saved-", n); d["info"] != 1 {
		t.Fatalf("%d new names after a save: %d INFO, want 1", n, d["info"])
	}
}

// An ACL user without LASTSAVE and INFO (a common hardening: -@dangerous)
// cannot pass the guard: each grant of a new name fails with the reason,
// and leaves no key behind, so the next attempt is not taken for a name the
// node knows and granted without the guard.
func TestRestartGuardFailsClosedWithoutItsCommands(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	admin := s.Client()
	defer func() { _ = admin.Close() }()
	ctx := context.Background()
	if err := admin.Do(ctx, "acl", "setuser", "locker", "on", ">pw", "~*", "&*", "+@all", "-@dangerous").Err(); err != nil {
		t.Fatal(err)
	}
	o := s.ClientOptions()
	o.Username, o.Password = "locker", "pw"
	rc := redis.NewClient(o)
	t.Cleanup(func() { _ = rc.Close() })
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "a", NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := range 2 {
		_, err := c.Obtain(ctx, "hardened", time.Minute)
		if err == nil || !strings.Contains(err.Error(), "restart guard") {
			t.Fatalf("attempt %d by a user without LASTSAVE and INFO: %v; want an error naming the restart guard", attempt, err)
		}
		if n := admin.DBSize(ctx).Val(); n != 0 {
			t.Fatalf("attempt %d left %d keys: %v", attempt, n, admin.Keys(ctx, "*").Val())
		}
	}
}

// firstErr returns the error of a two-valued call.
func firstErr[T any](_ T, err error) error { return err }

// A crash at Redis's default persistence (save points, no AOF) restores
// the last snapshot, which has a lock's fencing counter from an earlier
// grant but not the grant after it. Whose counter survived, the guard must
// still hold candidates back until a ttl after the restart (the holder may
// believe until then: S1), and the next token must be above the lost
// grant's (S3). Before, a rival was granted at once, with the holder's
// token.
func TestRestartGuardCatchesASnapshotOfAnEarlierGrant(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{Args: []string{"--save", "3600 1 300 100 60 10000"}})
	const ttl = 3 * time.Second
	a, b := guardedClient(t, "a", s), guardedClient(t, "b", s)
	redistest.WaitUp(t, ttl, s)
	ctx := context.Background()
	l, err := a.Obtain(ctx, "x", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := s.Client()
	defer func() { _ = c.Close() }()
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	held, err := a.Obtain(ctx, "x", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil { // kill -9, then a start from the snapshot
		t.Fatal(err)
	}
	if v := get(t, s, lockKey("x")+":fence"); v == "" {
		t.Fatal("the restart did not restore the snapshot: no fencing counter")
	}
	if v := get(t, s, lockKey("x")); v != "" {
		t.Fatalf("the restored snapshot holds the grant made after it: %q", v)
	}
	wantRestartGuard(t, firstErr(b.Obtain(ctx, "x", ttl)), "a lock whose counter the snapshot restored", ttl+time.Second)
	var got *redislock.Lock
	waitFor(t, 2*ttl+5*time.Second, "the guard to lift", func() bool {
		got, err = b.Obtain(ctx, "x", ttl)
		return err == nil
	})
	if got.Fence() <= held.Fence() {
		t.Fatalf("token %d after the restart, not above the lost grant's %d (S3)", got.Fence(), held.Fence())
	}
}

// An epoch marker dated in the future (forged by whoever may write the
// node's keys, such as a namespace's Redis user) holds back no name for
// longer than a ttl: the guard reads it as missing. Before, every new name
// on the node waited until that date.
func TestRestartGuardReadsAMarkerFromTheFutureAsMissing(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	const ttl = 2 * time.Second
	a := guardedClient(t, "a", s)
	redistest.WaitUp(t, ttl, s)
	ctx := context.Background()
	c := s.Client()
	defer func() { _ = c.Close() }()
	saved, err := c.LastSave(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(24 * time.Hour).UnixMilli()
	if err := c.Set(ctx, redislock.DefaultKeyPrefix+"epoch", strconv.FormatInt(future, 10)+":"+strconv.FormatInt(saved, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := firstErr(a.Obtain(ctx, "forged", ttl)); err != nil {
		t.Fatalf("a node up for a ttl, never flushed, with a marker dated a day ahead: %v; want a grant", err)
	}
}
