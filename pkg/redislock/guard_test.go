package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/redisproc"
	"github.com/redislock/redislock/internal/redisstats"
	"github.com/redislock/redislock/internal/redistest"
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
	for _, flush := range []string{"flushall", "flushdb"} {
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
			if err := c.Do(ctx, flush).Err(); err != nil {
				t.Fatal(err)
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

// On a node known whole for a ttl, granting and releasing new names sends
// no INFO: the guard reads the epoch marker and LASTSAVE, and reads the
// uptime again only after LASTSAVE moved (a save), once. Each command the
// scripts send is counted.
func TestRestartGuardSendsNoInfoOnALongRunningNode(t *testing.T) {
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
	if d := cycle("saved-", n); d["info"] != 1 {
		t.Fatalf("%d new names after a save: %d INFO, want 1", n, d["info"])
	}
}

// firstErr returns the error of a two-valued call.
func firstErr[T any](_ T, err error) error { return err }
