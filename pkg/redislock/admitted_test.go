package redislock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// An Elector with Admitted holds the lock but does not lead until Admitted
// returns nil: meanwhile State says why and OnStartedLeading has not run.
// A refusal releases the lock at once (a rival takes it) and the elector
// waits for its next attempt, RenewInterval later, woken by no release;
// when admitted, it leads. The elector's clock
// is a fake one, so no renewal or retry falls due on its own.
func TestAdmittedGatesLeadership(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ctx := context.Background()
	timing := redislock.Timing{TTL: time.Minute, RenewInterval: 30 * time.Second, RenewDeadline: 40 * time.Second}
	const name = "admitted"
	var j journal
	var calls atomic.Int32
	verdicts := make(chan error)
	clk := testingclock.NewFakeClock(time.Now())
	a := start(j.electorWith(t, clientWith(t, redislock.Options{AssumeDurable: true, Identity: "a", Clock: clk, NodeTimeout: 5 * time.Second}, s),
		redislock.ElectorOptions{Name: name, Timing: timing, Admitted: func(ctx context.Context) error {
			calls.Add(1)
			select {
			case err := <-verdicts:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}}))
	defer a.stop()
	waitFor(t, 10*time.Second, "a's first timer", clk.HasWaiters)
	clk.Step(0)

	waiting := func(n int32) func() bool {
		return func() bool { return calls.Load() == n && errors.Is(a.e.State().Err, redislock.ErrNotAdmitted) }
	}
	waitFor(t, 10*time.Second, "a to hold the lock and wait for admission", waiting(1))
	rival := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "rival", NodeTimeout: 5 * time.Second}, s)
	if _, err := rival.Obtain(ctx, name, time.Minute); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("a rival's Obtain while a waits for admission: %v; want ErrNotObtained (a holds the lock)", err)
	}
	if st := a.e.State(); st.Leading || st.Fence != 0 || j.terms() != 0 {
		t.Fatalf("a, not admitted, reports %+v after %d terms; want not leading, no term started", st, j.terms())
	}

	errRefused := errors.New("the API server shows another holder")
	verdicts <- errRefused
	waitFor(t, 10*time.Second, "a to say it was refused, and why", func() bool {
		err := a.e.State().Err
		return errors.Is(err, redislock.ErrNotAdmitted) && errors.Is(err, errRefused)
	})
	// Refused, a gave the lock back: the rival takes it.
	var l *redislock.Lock
	waitFor(t, 10*time.Second, "the rival to take the lock a was refused", func() bool {
		var err error
		l, err = rival.Obtain(ctx, name, time.Minute)
		return err == nil
	})
	// Refused, a backs off for RenewInterval (jittered), deaf to
	// releases meanwhile, its own among them: the rival's release, which
	// a watch of the rival's sees, does not wake it.
	seen, unwatch := rival.WatchReleases(ctx, name)
	defer unwatch()
	srv := redistest.Clients(t, s)[0]
	waitFor(t, 10*time.Second, "the rival's watch subscribed beside a's", func() bool {
		n, err := srv.PubSubNumSub(ctx, redislock.EventsChannel(name)).Result()
		return err == nil && n[redislock.EventsChannel(name)] == 2
	})
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the rival's release reached no watch")
	}
	if n := calls.Load(); n != 1 || !errors.Is(a.e.State().Err, errRefused) {
		t.Fatalf("a, backing off, made %d waits for admission (state %+v); want 1, no attempt before its timer", n, a.e.State())
	}
	clk.Step(timing.RenewInterval * 3 / 2)
	waitFor(t, 10*time.Second, "a's second wait for admission", waiting(2))
	verdicts <- nil
	waitFor(t, 10*time.Second, "a leading once admitted", leading(a.e))
	if st := a.e.State(); st.Err != nil || st.Fence <= l.Fence() {
		t.Fatalf("a, admitted, reports %+v; want no error and a fence above the rival's %d", st, l.Fence())
	}
	a.stop()
	if terms := j.check(t); terms != 1 {
		t.Fatalf("%d leaderships; want 1, a's once admitted", terms)
	}
}
