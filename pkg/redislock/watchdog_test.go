package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// The watchdog keeps a lock for as long as it runs: across ten ttls, each
// renewal moves the local deadline on by a renewal interval and resets the
// key's expiry in Redis. Time is the injected clock's, moved on one
// renewal interval at a time once the watchdog waits for its next tick, so
// the verdict does not depend on how fast the machine is.
func TestWatchdogKeepsLockForTenTTLs(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	clock := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	c := patientClient(t, s, clock)
	const ttl, interval = redislock.DefaultTTL, 2 * time.Second
	l, err := c.Obtain(context.Background(), "kept", ttl)
	if err != nil {
		t.Fatal(err)
	}
	value := get(t, s, lockKey("kept"))
	held, stop, err := l.Watchdog(context.Background(), interval, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for elapsed := time.Duration(0); elapsed < 10*ttl; elapsed += interval {
		deadline := l.Deadline()
		renew(t, clock, interval)
		if got := l.Deadline().Sub(deadline); got != interval {
			t.Fatalf("after %v: the renewal moved the deadline by %v, want %v", elapsed+interval, got, interval)
		}
		checkKept(t, s, "kept", value, ttl, held, l)
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

// The same in real time, with a renew deadline that no loaded machine
// misses: the watchdog steps down only after 8 renewal intervals in a
// row without a renewal.
func TestWatchdogKeepsLockInRealTime(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	c := patientClient(t, s, clock.RealClock{})
	const ttl = 2 * time.Second
	l, err := c.Obtain(context.Background(), "kept", ttl)
	if err != nil {
		t.Fatal(err)
	}
	value := get(t, s, lockKey("kept"))
	held, stop, err := l.Watchdog(context.Background(), 200*time.Millisecond, 1600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		checkKept(t, s, "kept", value, 0, held, l)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// checkKept fails t unless the watchdog's context is live, l is valid and
// the key of lock name still holds value, with more than half of ttl left
// in Redis (with ttl not zero).
func checkKept(t *testing.T, s *redisproc.Server, name, value string, ttl time.Duration, held context.Context, l *redislock.Lock) {
	t.Helper()
	if held.Err() != nil || !l.Valid() {
		t.Fatalf("the holder stopped believing: held %v, valid %v", context.Cause(held), l.Valid())
	}
	if got := get(t, s, lockKey(name)); got != value {
		t.Fatalf("key %q, want %q", got, value)
	}
	if ttl == 0 {
		return
	}
	rc := s.Client()
	defer func() { _ = rc.Close() }()
	if left, err := rc.PTTL(context.Background(), lockKey(name)).Result(); err != nil || left < ttl/2 {
		t.Fatalf("key expires in %v (%v), want more than %v: the renewal did not reach Redis", left, err, ttl/2)
	}
}

// patientClient returns a Client over s on clock whose calls to Redis
// time out, in real time, after a second, which no loaded machine reaches
// (newClient's 100ms it can).
func patientClient(t *testing.T, s *redisproc.Server, clk clock.WithDelayedExecution) *redislock.Client {
	t.Helper()
	c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "a", Clock: clk, NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// renew moves clock on by interval once the watchdog waits for its next
// renewal, and waits until that renewal is done, however long it takes
// in real time (up to 10s): the fake clock stands still meanwhile.
func renew(t *testing.T, clock *testingclock.FakeClock, interval time.Duration) {
	t.Helper()
	waitFor(t, 10*time.Second, "the watchdog to wait for its next renewal", renewalDue(clock))
	clock.Step(interval)
	waitFor(t, 10*time.Second, "the renewal to be done", renewalDue(clock))
}

// renewalDue reports whether the watchdog waits for its next renewal: both
// its timers, the step-down and the renewal tick, are armed on clock.
func renewalDue(clock *testingclock.FakeClock) func() bool {
	return func() bool { return clock.Waiters() == 2 }
}

// S1: a holder that cannot reach Redis stops believing by its local
// deadline, even though its renewal is stuck until the node timeout, past
// the renew deadline. In real time (the renewal is stuck in a real call),
// with the step-down a second before the S1 deadline, a margin no loaded
// machine eats.
func TestHolderCutOffFromRedisStepsDownByDeadline(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	rc := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true, Identity: "a", NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	l, err := c.Obtain(context.Background(), "cut", ttl)
	if err != nil {
		t.Fatal(err)
	}
	held, stop, err := l.Watchdog(context.Background(), 200*time.Millisecond, time.Second)
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
	waitFor(t, time.Until(l.Deadline())+5*time.Second, "the lock to turn invalid at its deadline", func() bool { return !l.Valid() })
}

// A renewal that finds another token on the key ends the watchdog's
// context with ErrLockLost. On the injected clock, moved on by one
// renewal interval, well short of the renew deadline, only that renewal
// can have ended it.
func TestWatchdogReportsLostLock(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	clock := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	c := patientClient(t, s, clock)
	const interval = 2 * time.Second
	l, err := c.Obtain(context.Background(), "stolen", redislock.DefaultTTL)
	if err != nil {
		t.Fatal(err)
	}
	held, stop, err := l.Watchdog(context.Background(), interval, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The key passes to another holder behind the lock's back (an admin
	// writes it by hand).
	set(t, s, lockKey("stolen"), redislock.Value{Token: strings.Repeat("b", 32), Identity: "b"}.String())
	waitFor(t, 10*time.Second, "the watchdog to wait for its next renewal", renewalDue(clock))
	clock.Step(interval)
	select {
	case <-held.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("watchdog did not notice the lost lock at its renewal")
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
	const ttl = 2 * time.Second
	l, err := patientClient(t, s, clock.RealClock{}).Obtain(context.Background(), "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Watchdog(context.Background(), ttl, 2*ttl); !errors.Is(err, redislock.ErrInvalidOptions) {
		t.Fatalf("renew interval = ttl: %v, want ErrInvalidOptions", err)
	}
}

// A Redis restart without persistence forgets the lock. The holder steps
// down at its next renewal (which does not re-create the key), and the
// restart guard grants the lock to nobody until the node has been up for a
// ttl, by which time the old holder's belief has ended (S1); and the
// next fencing token is still larger (S3).
func TestRedisRestartHolderStepsDownAndNobodyIsGrantedForATTL(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	const ttl = 2 * time.Second
	guarded := func(identity string) *redislock.Client {
		c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{Identity: identity, NodeTimeout: time.Second})
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
	waitFor(t, guard.Wait+5*time.Second, "the fresh node's guard to lift", func() bool {
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
	t.Parallel()
	servers := redistest.StartN(t, 3)
	const ttl = time.Second
	c, err := redislock.New(redistest.Clients(t, servers...), &redislock.Options{Identity: "a", NodeTimeout: ttl / 2})
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
