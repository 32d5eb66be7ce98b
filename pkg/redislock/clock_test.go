package redislock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/redisproc"
	"github.com/redislock/redislock/internal/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// fakeClock is a Clock whose time moves only when a test says so.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c     *fakeClock
	at    time.Time
	f     func()
	ch    chan time.Time
	armed bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) redislock.Timer { return c.add(d, f) }

func (c *fakeClock) NewTimer(d time.Duration) redislock.Timer { return c.add(d, nil) }

func (c *fakeClock) add(d time.Duration, f func()) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f, ch: make(chan time.Time, 1), armed: true}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves time on by d and fires the timers that fall due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	for _, t := range c.timers {
		if t.armed && !t.at.After(c.now) {
			t.armed = false
			due = append(due, t)
		}
	}
	now := c.now
	c.mu.Unlock()
	for _, t := range due {
		if t.f != nil {
			t.f()
		} else {
			t.ch <- now
		}
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.at, t.armed = t.c.now.Add(d), true
	return was
}

// S1's bound, exactly: a lock acquired at t0 is valid until t0 + ttl -
// drift (1% of ttl + 2ms) and not an instant longer, whatever Redis says.
func TestValidityEndsExactlyAtTTLLessDrift(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "a", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t0 := clock.Now()
	l, err := c.Obtain(context.Background(), "exact", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := t0.Add(10*time.Second - 100*time.Millisecond - 2*time.Millisecond)
	if got := l.Deadline(); !got.Equal(want) {
		t.Fatalf("deadline %v after t0, want %v", got.Sub(t0), want.Sub(t0))
	}
	clock.Advance(want.Sub(t0) - time.Nanosecond)
	if !l.Valid() {
		t.Fatal("invalid 1ns before the deadline")
	}
	clock.Advance(time.Nanosecond)
	if l.Valid() {
		t.Fatal("still valid at the deadline")
	}
}

// The watchdog steps down at RenewDeadline after the last successful
// renewal, by the injected clock, while renewals cannot reach Redis.
func TestWatchdogStepsDownByInjectedClock(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "a", Clock: clock, NodeTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Obtain(context.Background(), "wd", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held, stop, err := l.Watchdog(context.Background(), 2*time.Second, 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	s.Kill()
	clock.Advance(6*time.Second - time.Millisecond)
	if held.Err() != nil {
		t.Fatal("stepped down before RenewDeadline")
	}
	clock.Advance(time.Millisecond)
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("not stepped down at RenewDeadline")
	}
}
