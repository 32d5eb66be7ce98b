package redislockfake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/redislock/redislock/pkg/redislock"
	"github.com/redislock/redislock/pkg/redislock/redislockfake"
)

// waitUntil polls cond until it holds, failing t after 5s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestFakeGrantsRefusesAndExpiresByItsClock(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		f := newFake(t, nodes, &redislock.Options{Identity: "a"})
		ctx := context.Background()
		l, err := f.Client.ObtainWait(ctx, "job", 10*time.Second, &redislock.ObtainOptions{Metadata: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Client.Obtain(ctx, "job", 10*time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("%d nodes: second Obtain: %v, want ErrNotObtained", nodes, err)
		}
		if h, err := f.Client.Inspect(ctx, "job"); err != nil || h.Identity != "a" || h.Metadata != "m" {
			t.Fatalf("%d nodes: Inspect: %+v, %v", nodes, h, err)
		}
		f.Advance(9 * time.Second)
		if d, err := l.TTL(ctx); err != nil || d != time.Second {
			t.Fatalf("%d nodes: TTL after 9s of 10: %v, %v; want 1s", nodes, d, err)
		}
		f.Advance(time.Second)
		if l.Valid() {
			t.Fatalf("%d nodes: lock valid past its ttl", nodes)
		}
		l2, err := f.Client.Obtain(ctx, "job", 10*time.Second)
		if err != nil {
			t.Fatalf("%d nodes: Obtain after the ttl: %v", nodes, err)
		}
		if l2.Fence() <= l.Fence() {
			t.Fatalf("%d nodes: fence %d after %d", nodes, l2.Fence(), l.Fence())
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
		f.Advance(25 * time.Hour) // past the counter's lifetime, max(24h, 100 × ttl)
		for i := range nodes {
			if keys := f.Keys(i); len(keys) != 0 {
				t.Fatalf("%d nodes: node %d keeps %v after the counter's lifetime", nodes, i, keys)
			}
		}
	}
}

func TestFakeWakesWaitersOnReleaseAndAtExpiry(t *testing.T) {
	f := newFake(t, 1, nil)
	ctx := context.Background()
	held, err := f.Client.Obtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := f.Client.ObtainWait(ctx, "job", time.Minute, nil)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitUntil(t, "the waiter to sleep", f.Clock.HasWaiters)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, got); err != nil {
		t.Fatalf("waiter after a release: %v", err)
	}

	if _, err := f.Client.Obtain(ctx, "job", time.Minute); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := f.Client.ObtainWait(ctx, "job", time.Minute, nil)
		got <- err
	}()
	waitUntil(t, "the waiter to sleep", f.Clock.HasWaiters)
	f.Advance(time.Minute + time.Second)
	if err := receive(t, got); err != nil {
		t.Fatalf("waiter after the holder's ttl: %v", err)
	}
}

func TestFakeRejectsWhatItCannotFake(t *testing.T) {
	for _, o := range []redislock.Options{{WaitReplicas: 1}, {Clock: clock.RealClock{}}} {
		if f, err := redislockfake.New(1, &o); !errors.Is(err, redislock.ErrInvalidOptions) {
			if f != nil {
				f.Close()
			}
			t.Errorf("New with %+v: %v, want ErrInvalidOptions", o, err)
		}
	}
}

func newFake(t *testing.T, nodes int, o *redislock.Options) *redislockfake.Fake {
	t.Helper()
	f, err := redislockfake.New(nodes, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// receive waits up to 5s for an ObtainWait's outcome.
func receive(t *testing.T, got <-chan error) error {
	t.Helper()
	select {
	case err := <-got:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not granted the lock within 5s")
		return nil
	}
}

// A sharded lock runs over the fake too: a candidate takes every shard,
// an observer sees it hold them, and once it leaves, none is held.
func TestFakeRunsShardedLocks(t *testing.T) {
	f := newFake(t, 1, nil)
	s, err := f.Client.NewSharded(redislock.ShardedOptions{Name: "queues", Shards: 8, Timing: redislock.Timing{TTL: time.Minute}, OnStarted: func(context.Context, redislock.Shard) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	waitUntil(t, "the first call's timer", f.Clock.HasWaiters)
	f.Advance(0)
	waitUntil(t, "every shard held", func() bool { return len(s.State().Held) == 8 })
	view, err := f.Client.InspectShards(context.Background(), "queues", 8)
	if err != nil || view.Held() != 8 || len(view.Members) != 1 {
		t.Fatalf("InspectShards: %+v, %v; want 8 held, 1 member", view, err)
	}
	cancel()
	<-done
	view, err = f.Client.InspectShards(context.Background(), "queues", 8)
	if err != nil || view.Held() != 0 || len(view.Members) != 0 {
		t.Fatalf("InspectShards after the candidate left: %+v, %v; want none held, no member", view, err)
	}
}
