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
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "a", NodeTimeout: 150 * time.Millisecond})
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

// A Redis restart without persistence forgets the lock. The holder cannot
// be told; it finds out at its next renewal, which finds the key gone and
// never re-creates it. Until then S1 can break (see the package doc); this
// pins down that the window is one renew interval.
func TestHolderNoticesRedisRestartAtNextRenewal(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	c := newClient(t, "a", s)
	l, err := c.Obtain(context.Background(), "amnesia", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held, stop, err := l.Watchdog(context.Background(), 100*time.Millisecond, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	restarted := time.Now()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("holder still believes 3s after Redis forgot its lock")
	}
	took := time.Since(restarted)
	if err := context.Cause(held); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost from the renewal", err)
	}
	t.Logf("holder stepped down %v after the restart began (renew interval 100ms)", took)
	if got := get(t, s, lockKey("amnesia")); got != "" {
		t.Fatalf("renewal re-created the key: %q", got)
	}
}
