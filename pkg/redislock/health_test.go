package redislock_test

import (
	"errors"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// A leader whose app stays unhealthy for StepDownAfter steps down and
// releases, so the healthy standby leads at once; unhealthy spells shorter
// than that, however many, leave it leading; and an unhealthy candidate
// makes no attempt until it is healthy. The leader's clock is a fake one:
// StepDownAfter is a logical bound, not a race with the machine's load.
func TestHealthGatesLeadership(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	// No renewal falls due on a's clock during the test (it steps 25s), so
	// its timers are the watchdog's two and, while unhealthy, the
	// step-down's.
	timing := redislock.Timing{TTL: time.Minute, RenewInterval: 30 * time.Second, RenewDeadline: 40 * time.Second}
	const stepDownAfter = 10 * time.Second
	var j journal

	clk := testingclock.NewFakeClock(time.Now())
	aHealth := redislock.NewHealth(nil, clk)
	a := start(j.healthElector(t, clientWith(t, redislock.Options{AssumeDurable: true, Identity: "a", Clock: clk}, s), timing, aHealth, stepDownAfter))
	defer a.stop()
	waitFor(t, 10*time.Second, "a's first timer", clk.HasWaiters)
	clk.Step(0)
	waitFor(t, 10*time.Second, "a leading", leading(a.e))
	fence := a.e.State().Fence

	var bTries attemptCounter
	bHealth := redislock.NewHealth(errNotReady, nil)
	b := start(j.healthElector(t, clientWith(t, redislock.Options{AssumeDurable: true, Identity: "b", Metrics: &bTries}, s), timing, bHealth, stepDownAfter))
	defer b.stop()
	waitFor(t, 10*time.Second, "b to say it is unhealthy, and why", func() bool {
		err := b.e.State().Err
		return errors.Is(err, redislock.ErrUnhealthy) && errors.Is(err, errNotReady)
	})
	if n := bTries.n.Load(); n != 0 {
		t.Fatalf("unhealthy b made %d attempts; want none", n)
	}
	bHealth.Set(nil)
	waitFor(t, 10*time.Second, "b, healthy, to find a leading", func() bool { return b.e.State().Leader == "a" })

	// Spells of 4s unhealthy, 12s in all: none reaches StepDownAfter.
	// Each is seen (a's step-down timer set) before the clock moves.
	waiters := func(n int) func() bool { return func() bool { return clk.Waiters() == n } }
	waitFor(t, 10*time.Second, "a's watchdog timers", waiters(2))
	for range 3 {
		aHealth.Set(errNotReady)
		waitFor(t, 10*time.Second, "a's step-down timer", waiters(3))
		clk.Step(4 * time.Second)
		// A step fires due timers at once: a's is not due yet.
		if n := clk.Waiters(); n != 3 {
			t.Fatalf("%d timers on a's clock after 4s unhealthy; want 3: the step-down's fired early", n)
		}
		aHealth.Set(nil)
		waitFor(t, 10*time.Second, "a's step-down timer stopped", waiters(2))
		clk.Step(time.Second)
	}
	if st := a.e.State(); !st.Leading || st.Fence != fence {
		t.Fatalf("after short unhealthy spells a's state is %+v; want leading with fence %d", st, fence)
	}

	aHealth.Set(errNotReady)
	clk.Step(stepDownAfter)
	waitFor(t, 10*time.Second, "b leading once a stepped down", leading(b.e))
	if a.e.State().Leading {
		t.Fatal("a still leads after b took over")
	}
	// a campaigns no more while unhealthy: its next look comes with its
	// own release's message, or at a step of its clock, and finds it
	// unhealthy.
	unhealthy := func() bool { return errors.Is(a.e.State().Err, redislock.ErrUnhealthy) }
	waitFor(t, 10*time.Second, "a's next look", func() bool { return unhealthy() || clk.HasWaiters() })
	clk.Step(0)
	waitFor(t, 10*time.Second, "a to say it is unhealthy", unhealthy)
	b.stop() // releases: a, woken, is unhealthy still
	aHealth.Set(nil)
	waitFor(t, 10*time.Second, "a leading again once healthy", leading(a.e))
	waitFor(t, 10*time.Second, "the third term recorded", recordedTerms(&j, 3))
	if terms := j.check(t); terms != 3 {
		t.Fatalf("%d leaderships, want 3 (a, b, a)", terms)
	}
}

// errNotReady is an app's reason to be unhealthy.
var errNotReady = errors.New("readiness probe failed")

// healthElector is j.elector gated on health.
func (j *journal) healthElector(t *testing.T, c *redislock.Client, timing redislock.Timing, h *redislock.Health, after time.Duration) *redislock.Elector {
	t.Helper()
	return j.electorWith(t, c, redislock.ElectorOptions{Name: "healthy", Timing: timing, Health: h, StepDownAfter: after})
}
