package redislock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// journal records leadership intervals as the candidates report them:
// started after the lock is obtained, stopped before it is released. Real
// leadership intervals contain the recorded ones, and since a lock is
// obtained only after the previous holder released it, recorded intervals
// of one lock must never overlap.
type journal struct {
	mu     sync.Mutex
	events []event
}

type event struct {
	who     string
	started bool
	at      time.Time
	fence   int64
}

func (j *journal) add(e event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e.at = time.Now()
	j.events = append(j.events, e)
}

// check fails t if two recorded intervals overlap or fences do not
// increase from one leader to the next; it returns how many leaderships it
// saw.
func (j *journal) check(t *testing.T) int {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	open := map[string]event{}
	var lastFence int64
	terms := 0
	for _, e := range j.events {
		if e.started {
			for who := range open {
				t.Fatalf("%s started leading at %v while %s led", e.who, e.at, who)
			}
			if e.fence <= lastFence {
				t.Fatalf("%s led with fence %d after fence %d", e.who, e.fence, lastFence)
			}
			lastFence = e.fence
			open[e.who] = e
			terms++
			continue
		}
		delete(open, e.who)
	}
	return terms
}

// terms returns how many leaderships have started.
func (j *journal) terms() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.events {
		if e.started {
			n++
		}
	}
	return n
}

func (j *journal) elector(t *testing.T, c *redislock.Client, name string, timing redislock.Timing) *redislock.Elector {
	t.Helper()
	return j.electorWith(t, c, redislock.ElectorOptions{Name: name, Timing: timing})
}

// electorWith returns an Elector with o whose terms j records.
func (j *journal) electorWith(t *testing.T, c *redislock.Client, o redislock.ElectorOptions) *redislock.Elector {
	t.Helper()
	who := c.Identity()
	o.OnStartedLeading = func(_ context.Context, l *redislock.Lock) {
		j.add(event{who: who, started: true, fence: l.Fence()})
	}
	o.OnStoppedLeading = func() { j.add(event{who: who}) }
	e, err := c.NewElector(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// candidate is an Elector running in the background.
type candidate struct {
	e      *redislock.Elector
	cancel context.CancelFunc
	done   chan struct{}
}

func start(e *redislock.Elector) *candidate {
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{e: e, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		_ = e.Run(ctx)
	}()
	return c
}

func (c *candidate) stop() {
	c.cancel()
	<-c.done
}

func leaderOf(cs []*candidate) int {
	for i, c := range cs {
		if c.e.State().Leading {
			return i
		}
	}
	return -1
}

func TestElectorsHandOverGracefullyOneAtATime(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	var j journal
	// A long ttl: a handover that waited for expiry instead of the
	// release message would take seconds.
	timing := redislock.Timing{TTL: 5 * time.Second, RenewInterval: 500 * time.Millisecond, RenewDeadline: 3 * time.Second}
	names := []string{"c0", "c1", "c2", "c3", "c4"}
	cands := make([]*candidate, len(names))
	for i, n := range names {
		cands[i] = start(j.elector(t, newClient(t, n, s), "election", timing))
	}
	defer func() {
		for _, c := range cands {
			c.stop()
		}
	}()
	var handovers []time.Duration
	for round := 0; round < 10; round++ {
		leader := -1
		waitFor(t, 3*time.Second, "a leader", func() bool { leader = leaderOf(cands); return leader >= 0 })
		stopped := time.Now()
		cands[leader].stop()
		next := -1
		waitFor(t, 3*time.Second, "the next leader", func() bool { next = leaderOf(cands); return next >= 0 })
		handovers = append(handovers, time.Since(stopped))
		if next == leader {
			t.Fatalf("round %d: stopped candidate %d still leads", round, leader)
		}
		// The standbys learn who leads from their failed attempts.
		for i, c := range cands {
			if i == leader || i == next {
				continue
			}
			waitFor(t, 3*time.Second, "standbys to see the new leader", func() bool { return c.e.State().Leader == names[next] })
		}
		cands[leader] = start(j.elector(t, newClient(t, names[leader], s), "election", timing))
	}
	waitFor(t, 5*time.Second, "the last term recorded", recordedTerms(&j, 11))
	if terms := j.check(t); terms < 11 {
		t.Fatalf("%d leaderships recorded, want at least 11", terms)
	}
	slices.Sort(handovers)
	t.Logf("graceful handover over %d rounds: median %v, max %v", len(handovers), handovers[len(handovers)/2], handovers[len(handovers)-1])
	// Waiting for expiry would take the 5s ttl: a release must wake the
	// standbys.
	if worst := handovers[len(handovers)-1]; worst > timing.TTL/2 {
		t.Fatalf("slowest handover %v: standbys waited for expiry instead of the release message", worst)
	}
}

// A leader whose work runs in OnStartedLeading itself keeps the lock until
// that work returns: after its Run is cancelled, while OnStartedLeading
// winds down, the lock is still its own, OnStoppedLeading has not run,
// and Run has not returned; once the work returns, OnStoppedLeading runs
// and the lock is released.
func TestElectorReleasesOnlyOnceItsWorkReturned(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ctx := context.Background()
	timing := redislock.Timing{TTL: time.Minute, RenewInterval: 20 * time.Second, RenewDeadline: 40 * time.Second}
	windingDown, finish := make(chan struct{}), make(chan struct{})
	var returned, stoppedAfterReturn atomic.Bool
	stoppedRan := make(chan struct{})
	a := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "a", NodeTimeout: 5 * time.Second}, s)
	e, err := a.NewElector(redislock.ElectorOptions{
		Name: "work", Timing: timing,
		OnStartedLeading: func(leading context.Context, _ *redislock.Lock) {
			<-leading.Done()
			close(windingDown)
			<-finish
			returned.Store(true)
		},
		OnStoppedLeading: func() {
			stoppedAfterReturn.Store(returned.Load())
			close(stoppedRan)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := start(e)
	defer func() {
		select {
		case <-finish:
		default:
			close(finish) // a failed assertion lets the work return
		}
	}()
	within := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out after 10s waiting for %s", what)
		}
	}
	waitFor(t, 10*time.Second, "a to lead", func() bool { return e.State().Leading })
	c.cancel()
	within(windingDown, "a's work to wind down")
	if h, err := a.Inspect(ctx, "work"); err != nil || h.Identity != "a" {
		t.Fatalf("while a's work winds down the lock is held by %q (error %v); want a", h.Identity, err)
	}
	select {
	case <-stoppedRan:
		t.Fatal("OnStoppedLeading ran while OnStartedLeading's work was still running")
	case <-c.done:
		t.Fatal("Run returned while OnStartedLeading's work was still running")
	default:
	}
	close(finish)
	within(c.done, "a's Run to return once its work returned")
	if !stoppedAfterReturn.Load() {
		t.Error("OnStoppedLeading ran before OnStartedLeading returned")
	}
	if h, err := a.Inspect(ctx, "work"); err != nil || h.Identity != "" {
		t.Fatalf("after Run returned the lock is held by %q (error %v); want free", h.Identity, err)
	}
}

func TestElectorStepsDownWhileRedisIsDownAndComesBack(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	var j journal
	timing := redislock.Timing{TTL: time.Second, RenewInterval: 100 * time.Millisecond, RenewDeadline: 600 * time.Millisecond}
	c := start(j.elector(t, newClient(t, "solo", s), "outage", timing))
	defer c.stop()
	waitFor(t, 3*time.Second, "leadership", leading(c.e))
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	waitFor(t, 3*time.Second, "stepping down", func() bool { return !c.e.State().Leading })
	if took := time.Since(paused); took > timing.TTL {
		t.Fatalf("stepped down %v after Redis went away; the key could have expired after %v", took, timing.TTL)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "leadership after Redis is back", leading(c.e))
	// State leads before OnStartedLeading, on its own goroutine, records.
	waitFor(t, 5*time.Second, "the second term recorded", recordedTerms(&j, 2))
	if terms := j.check(t); terms != 2 {
		t.Fatalf("%d leaderships, want 2", terms)
	}
}

// D1: a standby that cannot campaign says why in its State: a key this
// package did not write, the restart guard, Redis down. A healthy standby,
// which only found a holder, reports no error.
func TestElectorStateSaysWhyItCannotCampaign(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	timing := redislock.Timing{TTL: 2 * time.Second, RenewInterval: 200 * time.Millisecond, RenewDeadline: 1200 * time.Millisecond}
	var j journal
	guarded, err := redislock.New(redistest.Clients(t, s), &redislock.Options{Identity: "guarded", NodeTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := start(j.elector(t, guarded, "why", timing))
	defer c.stop()
	stateErr := func(target error) func() bool {
		return func() bool { return errors.Is(c.e.State().Err, target) }
	}
	// The node just started: the guard holds the lock back for a ttl.
	waitFor(t, 5*time.Second, "ErrGuarded in the state", stateErr(redislock.ErrGuarded))
	waitFor(t, 3*timing.TTL, "leadership once the guard lifts", leading(c.e))
	if err := c.e.State().Err; err != nil {
		t.Fatalf("leading with Err %v", err)
	}

	standby := start(j.elector(t, newClient(t, "standby", s), "why", timing))
	defer standby.stop()
	waitFor(t, 5*time.Second, "the standby to see the leader", func() bool { return standby.e.State().Leader == "guarded" })
	if err := standby.e.State().Err; err != nil {
		t.Fatalf("a healthy standby reports %v", err)
	}
	c.stop()
	waitFor(t, 5*time.Second, "the standby to lead", leading(standby.e))
	standby.stop()

	set(t, s, lockKey("why"), "not ours")
	foreign := start(j.elector(t, newClient(t, "foreign", s), "why", timing))
	defer foreign.stop()
	waitFor(t, 5*time.Second, "ErrMalformedValue in the state", func() bool { return errors.Is(foreign.e.State().Err, redislock.ErrMalformedValue) })

	s.Kill()
	waitFor(t, 5*time.Second, "ErrNoQuorum in the state", func() bool { return errors.Is(foreign.e.State().Err, redislock.ErrNoQuorum) })
}

// recordedTerms is a condition for waitFor: j has recorded at least n
// starts of leadership.
func recordedTerms(j *journal, n int) func() bool {
	return func() bool { return j.terms() >= n }
}

// leading is a condition for waitFor: e leads now.
func leading(e *redislock.Elector) func() bool {
	return func() bool { return e.State().Leading }
}

// An elector records the time it waited for leadership, on its own clock:
// from its campaign's first attempt to the grant.
func TestElectorRecordsItsWait(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ctx := context.Background()
	held, err := newClient(t, "a", s).Obtain(ctx, "waited", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Now())
	var tries attemptCounter
	b := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "b", Clock: clk, Metrics: &tries}, s)
	var j journal
	cand := start(j.elector(t, b, "waited", redislock.Timing{TTL: time.Minute, RenewInterval: 10 * time.Second, RenewDeadline: 40 * time.Second}))
	defer cand.stop()
	// Its first attempt is due at once: at a step of the fake clock.
	waitFor(t, 10*time.Second, "the elector's first timer", clk.HasWaiters)
	clk.Step(0)
	waitFor(t, 10*time.Second, "a refused attempt", func() bool { return tries.n.Load() >= 1 })
	waitFor(t, 10*time.Second, "the elector's timer", clk.HasWaiters)
	waitSubscribed(t, []*redisproc.Server{s}, "waited", 1)
	if w := tries.recorded(); len(w) != 0 {
		t.Fatalf("waits recorded before any grant: %+v", w)
	}
	// Time passes on the elector's clock, short of the holder's expiry;
	// then the holder releases, which wakes it.
	const waited = 7 * time.Second
	clk.Step(waited)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "b leading", func() bool { return cand.e.State().Leading })
	if w := tries.recorded(); len(w) != 1 || w[0].err != nil || w[0].took != waited {
		t.Fatalf("waits recorded %+v, want one of %v with no error", w, waited)
	}
}
