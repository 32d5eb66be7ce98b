package redislock_test

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// S1's bound, exactly: a lock acquired at t0 is valid until t0 + ttl -
// drift (1% of ttl + 2ms) and not an instant longer, whatever Redis says.
func TestValidityEndsExactlyAtTTLLessDrift(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	clock := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
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
	clock.Step(want.Sub(t0) - time.Nanosecond)
	if !l.Valid() {
		t.Fatal("invalid 1ns before the deadline")
	}
	clock.Step(time.Nanosecond)
	if l.Valid() {
		t.Fatal("still valid at the deadline")
	}
}

// The watchdog steps down at RenewDeadline after the last successful
// renewal, by the injected clock, while renewals cannot reach Redis.
func TestWatchdogStepsDownByInjectedClock(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	clock := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
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
	clock.Step(6*time.Second - time.Millisecond)
	if held.Err() != nil {
		t.Fatal("stepped down before RenewDeadline")
	}
	clock.Step(time.Millisecond)
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("not stepped down at RenewDeadline")
	}
}
