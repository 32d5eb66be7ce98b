package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/redisproc"
	"github.com/redislock/redislock/internal/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

func TestWatchdogKeepsLockForTenTTLs(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	c := newClient(t, "a", s)
	const ttl = 200 * time.Millisecond
	l, err := c.Obtain(context.Background(), "kept", ttl)
	if err != nil {
		t.Fatal(err)
	}
	value := get(t, s, lockKey("kept"))
	held, stop, err := l.Watchdog(context.Background(), 40*time.Millisecond, 120*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * ttl); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if got := get(t, s, lockKey("kept")); got != value || held.Err() != nil || !l.Valid() {
			t.Fatalf("after %v: key %q (want %q), held %v, valid %v", time.Until(end), got, value, held.Err(), l.Valid())
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if held.Err() == nil {
		t.Fatal("context still live after stop")
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// S1: a holder that cannot reach Redis stops believing by its local
// deadline, even though every renewal is stuck until the node timeout.
func TestHolderCutOffFromRedisStepsDownByDeadline(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	rc := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true, Identity: "a", NodeTimeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Obtain(context.Background(), "cut", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held, stop, err := l.Watchdog(context.Background(), 100*time.Millisecond, 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Resume() }()
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("holder still believes it leads 5s after losing Redis")
	}
	// The S1 bound moves only on successful renewals, and none can succeed
	// while Redis is paused, so reading it now gives the bound in force.
	if now, bound := time.Now(), l.Deadline(); !now.Before(bound) {
		t.Fatalf("stepped down %v after the S1 deadline", now.Sub(bound))
	}
	if err := stop(); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("stop: %v, want ErrLockLost", err)
	}
	waitFor(t, 2*time.Second, "the lock to turn invalid", func() bool { return !l.Valid() })
}

func TestWatchdogReportsLostLock(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	c := newClient(t, "a", s)
	l, err := c.Obtain(context.Background(), "stolen", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held, stop, err := l.Watchdog(context.Background(), 50*time.Millisecond, 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// An admin deletes the key and another process takes it.
	rc := s.Client()
	defer func() { _ = rc.Close() }()
	rc.Del(context.Background(), lockKey("stolen"))
	if _, err := newClient(t, "b", s).Obtain(context.Background(), "stolen", time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("watchdog did not notice the lost lock")
	}
	if err := context.Cause(held); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", err)
	}
	if err := stop(); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("stop: %v, want ErrLockLost", err)
	}
}

func TestWatchdogRejectsBadTiming(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	l, err := newClient(t, "a", s).Obtain(context.Background(), "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Watchdog(context.Background(), time.Second, 2*time.Second); !errors.Is(err, redislock.ErrInvalidOptions) {
		t.Fatalf("renew interval = ttl: %v, want ErrInvalidOptions", err)
	}
}

// A Redis restart without persistence forgets the lock. The holder steps
// down at its next renewal (which does not re-create the key), and the
// restart guard grants the lock to nobody until the node has been up for a
// ttl, by which time the old holder's belief has ended (S1); and the
// next fencing token is still larger (S3).
func TestRedisRestartHolderStepsDownAndNobodyIsGrantedForATTL(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	const ttl = 2 * time.Second
	guarded := func(identity string) *redislock.Client {
		c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{Identity: identity})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := guarded("a"), guarded("b")

	// The node just started and has no record of the lock: guarded.
	_, err := a.Obtain(context.Background(), "amnesia", ttl)
	var guard *redislock.GuardedError
	if !errors.As(err, &guard) || !errors.Is(err, redislock.ErrGuarded) || errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Obtain on a node up for less than a ttl: %v, want a GuardedError (ErrGuarded, not ErrNotObtained)", err)
	}
	if guard.Wait <= 0 || guard.Wait > ttl+time.Second || guard.Name != "amnesia" {
		t.Fatalf("GuardedError %+v: want the lock's name and a wait within the ttl and a second", guard)
	}
	var l *redislock.Lock
	waitFor(t, 2*ttl, "the fresh node's guard to lift", func() bool {
		l, err = a.Obtain(context.Background(), "amnesia", ttl)
		return err == nil
	})
	held, stop, err := l.Watchdog(context.Background(), 100*time.Millisecond, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	steppedDown := make(chan time.Time, 1)
	go func() {
		<-held.Done()
		steppedDown <- time.Now()
	}()

	restarted := time.Now()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	var (
		granted time.Time
		lb      *redislock.Lock
	)
	for granted.IsZero() {
		if time.Since(restarted) > 3*ttl {
			t.Fatalf("b was not granted the lock within %v of the restart", 3*ttl)
		}
		if lb, err = b.Obtain(context.Background(), "amnesia", ttl); err == nil {
			granted = time.Now()
		} else if !errors.Is(err, redislock.ErrGuarded) && !errors.Is(err, redislock.ErrNoQuorum) {
			t.Fatalf("b: %v", err)
		}
	}
	var down time.Time
	select {
	case down = <-steppedDown:
	case <-time.After(time.Second):
		t.Fatal("a still believes it holds the lock a second after b was granted it")
	}
	if !down.Before(granted) {
		t.Fatalf("a stepped down at %v, after b was granted the lock at %v", down.Sub(restarted), granted.Sub(restarted))
	}
	if err := context.Cause(held); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost from the renewal", err)
	}
	if g := granted.Sub(restarted); g < ttl {
		t.Fatalf("b was granted the lock %v after the restart, less than the ttl %v", g, ttl)
	}
	// The node lost its fencing counter too; it restarts from its clock,
	// above every token it handed out before (S3).
	if lb.Fence() <= l.Fence() {
		t.Errorf("fence after the restart %d, not above the fence before it %d", lb.Fence(), l.Fence())
	}
	t.Logf("after the restart: a stepped down by %v, b was granted at %v (ttl %v)",
		down.Sub(restarted).Round(time.Millisecond), granted.Sub(restarted).Round(time.Millisecond), ttl)
}

// The guard costs nothing on a node that has been up for a ttl, even for a
// lock it has never seen, nor on a Redlock whose restarted node is a
// minority.
func TestRestartGuardSparesLongRunningNodesAndMinorities(t *testing.T) {
	servers := redistest.StartN(t, 3)
	const ttl = time.Second
	c, err := redislock.New(redistest.Clients(t, servers...), &redislock.Options{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	redistest.WaitUp(t, ttl, servers...)
	l, err := c.Obtain(context.Background(), "never-seen", ttl)
	if err != nil {
		t.Fatalf("new lock on nodes up for a ttl: %v", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(context.Background(), "never-seen", ttl); err != nil {
		t.Fatalf("with one of three nodes just restarted: %v, want the lock from the other two", err)
	}
}
