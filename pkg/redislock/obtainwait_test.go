package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// modes are the deployments every test of issue 19's additions runs in.
var modes = []struct {
	name  string
	nodes int
}{{"single", 1}, {"redlock3", 3}}

// attemptCounter counts acquisition attempts (Metrics.Acquire is called
// once per attempt) and keeps the waits recorded.
type attemptCounter struct {
	n     atomic.Int64
	mu    sync.Mutex
	waits []waitRecord
}

// waitRecord is one Metrics.Wait call.
type waitRecord struct {
	took time.Duration
	err  error
}

func (a *attemptCounter) Acquire(string, time.Duration, error) { a.n.Add(1) }
func (a *attemptCounter) Renew(string, time.Duration, error)   {}
func (a *attemptCounter) Lost(string)                          {}
func (a *attemptCounter) Transition(string)                    {}
func (a *attemptCounter) Wait(_ string, took time.Duration, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waits = append(a.waits, waitRecord{took, err})
}

// recorded returns the waits recorded so far.
func (a *attemptCounter) recorded() []waitRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.waits)
}

// clientWith returns a Client over servers with o, defaulting Identity
// and NodeTimeout as newClient does.
func clientWith(t testing.TB, o redislock.Options, servers ...*redisproc.Server) *redislock.Client {
	t.Helper()
	if o.Identity == "" {
		o.Identity = "c"
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 100 * time.Millisecond
	}
	c, err := redislock.New(redistest.Clients(t, servers...), &o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitSubscribed waits until every server has n subscribers to the lock
// called name.
func waitSubscribed(t testing.TB, servers []*redisproc.Server, name string, n int64) {
	t.Helper()
	for _, s := range servers {
		c := s.Client()
		waitFor(t, 10*time.Second, fmt.Sprintf("%d subscribers of %s on %s", n, name, s.Addr), func() bool {
			m, err := c.PubSubNumSub(context.Background(), redislock.EventsChannel(name)).Result()
			return err == nil && m[redislock.EventsChannel(name)] >= n
		})
		_ = c.Close()
	}
}

type result struct {
	l   *redislock.Lock
	err error
}

func obtainWaitAsync(ctx context.Context, c *redislock.Client, name string, ttl time.Duration, o *redislock.ObtainOptions) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := c.ObtainWait(ctx, name, ttl, o)
		ch <- result{l, err}
	}()
	return ch
}

// A waiter is granted the lock as soon as its holder releases, long before
// the holder's minute-long ttl: it wakes on the release message.
func TestObtainWaitIsGrantedOnRelease(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			a, b := newClient(t, "a", servers...), newClient(t, "b", servers...)
			ctx := context.Background()
			held, err := a.Obtain(ctx, "handover", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			got := obtainWaitAsync(waitCtx, b, "handover", time.Minute, nil)
			waitSubscribed(t, servers, "handover", 1)
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil {
				t.Fatalf("ObtainWait after a release: %v; want the lock, within the 20s its ctx allows of the holder's 1m ttl", r.err)
			}
			if r.l.Fence() <= held.Fence() || !r.l.Valid() {
				t.Fatalf("waiter's fence %d (valid %v), want above the released holder's %d", r.l.Fence(), r.l.Valid(), held.Fence())
			}
		})
	}
}

// A waiter whose holder crashed (its key vanished without a release
// message) sleeps until the holder's key would expire by the injected
// clock, and tries exactly then: one attempt at first, one right after it
// subscribed, one at the expiry.
func TestObtainWaitWakesAtTheHolderExpiry(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			a := newClient(t, "a", servers...)
			clk := testingclock.NewFakeClock(time.Now())
			var tries attemptCounter
			b := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "b", Clock: clk, Metrics: &tries}, servers...)
			ctx := context.Background()
			const ttl = 20 * time.Second
			if _, err := a.Obtain(ctx, "crash", ttl); err != nil {
				t.Fatal(err)
			}
			waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			got := obtainWaitAsync(waitCtx, b, "crash", ttl, nil)
			waitFor(t, 10*time.Second, "two refused attempts", func() bool { return tries.n.Load() == 2 })
			waitFor(t, 10*time.Second, "the waiter's timer", clk.HasWaiters)
			// Most of the ttl passes: the holder still holds, and the
			// waiter does not try.
			clk.Step(ttl - 2*time.Second)
			// The holder dies and its key goes silently (no message).
			for _, s := range servers {
				c := s.Client()
				if err := c.Del(ctx, lockKey("crash"), lockKey("crash")+":until").Err(); err != nil {
					t.Fatal(err)
				}
				_ = c.Close()
			}
			clk.Step(3 * time.Second)
			r := <-got
			if r.err != nil {
				t.Fatalf("ObtainWait once the holder's ttl passed on the injected clock: %v", r.err)
			}
			if n := tries.n.Load(); n != 3 {
				t.Fatalf("%d attempts, want 3: the first, one after subscribing, one at the holder's expiry", n)
			}
			// The wait is the injected clock's time from the first
			// attempt to the grant, exactly.
			if w := tries.recorded(); len(w) != 1 || w[0].err != nil || w[0].took != ttl+time.Second {
				t.Fatalf("waits recorded %+v, want one of %v with no error", w, ttl+time.Second)
			}
		})
	}
}

// When ctx ends first the error says both why (ctx) and what the last
// attempt found (a holder).
func TestObtainWaitGivesUpWhenCtxEnds(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			var tries attemptCounter
			a, b := newClient(t, "a", servers...), clientWith(t, redislock.Options{Identity: "b", Metrics: &tries}, servers...)
			if _, err := a.Obtain(context.Background(), "busy", time.Minute); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := b.ObtainWait(ctx, "busy", time.Minute, nil)
			if !errors.Is(err, redislock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ObtainWait past its deadline: %v; want ErrNotObtained and context.DeadlineExceeded", err)
			}
			// The wait that ended so is recorded with that error.
			if w := tries.recorded(); len(w) != 1 || !errors.Is(w[0].err, context.DeadlineExceeded) || w[0].took <= 0 {
				t.Fatalf("waits recorded %+v, want one that took time and ended with context.DeadlineExceeded", w)
			}
		})
	}
}

// The restart guard's wait is honoured: on nodes that just started, a
// waiter whose ctx ends before the guard lifts gets ErrGuarded at once,
// and one with time to spare is granted the lock once the guard lifts.
func TestObtainWaitHonoursTheRestartGuard(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			var tries attemptCounter
			c := clientWith(t, redislock.Options{Identity: "g", Metrics: &tries}, servers...)
			const ttl = 5 * time.Second
			short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err := c.ObtainWait(short, "guarded", ttl, nil)
			var g *redislock.GuardedError
			if !errors.As(err, &g) || !errors.Is(err, context.DeadlineExceeded) || short.Err() != nil {
				t.Fatalf("ObtainWait with a deadline before the guard lifts: %v (ctx %v); want a GuardedError and DeadlineExceeded before the deadline", err, short.Err())
			}
			long, cancel2 := context.WithTimeout(context.Background(), 3*ttl)
			defer cancel2()
			tries.n.Store(0)
			l, err := c.ObtainWait(long, "guarded", ttl, nil)
			if err != nil {
				t.Fatalf("ObtainWait with time to spare: %v", err)
			}
			defer func() { _ = l.Release(context.Background()) }()
			// The guard reports its wait, rounded to whole seconds of
			// uptime: at most a second more of it before the grant.
			if n := tries.n.Load(); n > 3 {
				t.Fatalf("%d attempts to wait out the guard, want at most 3", n)
			}
		})
	}
}

// Retry bounds the attempts: Steps 1 tries once; after faults the
// attempts stop at Steps.
func TestObtainWaitRetryBoundsAttempts(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			var tries attemptCounter
			a := newClient(t, "a", servers...)
			b := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "b", Metrics: &tries}, servers...)
			ctx := context.Background()
			if _, err := a.Obtain(ctx, "bounded", time.Minute); err != nil {
				t.Fatal(err)
			}
			_, err := b.ObtainWait(ctx, "bounded", time.Minute, &redislock.ObtainOptions{Retry: &wait.Backoff{Steps: 1, Duration: time.Millisecond}})
			if !errors.Is(err, redislock.ErrNotObtained) || tries.n.Load() != 1 {
				t.Fatalf("Steps 1: %v after %d attempts; want ErrNotObtained after 1", err, tries.n.Load())
			}
			for _, s := range servers {
				s.Kill()
			}
			tries.n.Store(0)
			retry := &wait.Backoff{Steps: 3, Duration: 10 * time.Millisecond, Factor: 2}
			_, err = b.ObtainWait(ctx, "bounded", time.Minute, &redislock.ObtainOptions{Retry: retry})
			if !errors.Is(err, redislock.ErrNoQuorum) || tries.n.Load() != 3 {
				t.Fatalf("Steps 3, Redis down: %v after %d attempts; want ErrNoQuorum after 3", err, tries.n.Load())
			}
			if retry.Steps != 3 || retry.Duration != 10*time.Millisecond {
				t.Fatalf("ObtainWait changed the caller's Retry to %+v", *retry)
			}
		})
	}
}

// Retry.Steps counts attempts that waited: the attempt made again at once
// after subscribing (so that a release in between is heard) is not one, so
// with two steps a waiter still waits for the release. (In Redlock mode each
// node publishes its own release, and the first can wake the waiter before
// the others have released: such an attempt counts, so there it has four.)
func TestObtainWaitRetryStepsWaitBetweenAttempts(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			var tries attemptCounter
			a := newClient(t, "a", servers...)
			b := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "b", Metrics: &tries}, servers...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			held, err := a.Obtain(ctx, "steps", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				steps := 2
				if m.nodes > 1 {
					steps = 4
				}
				l, err := b.ObtainWait(ctx, "steps", time.Minute, &redislock.ObtainOptions{Retry: &wait.Backoff{Steps: steps, Duration: time.Millisecond}})
				if err == nil {
					err = l.Release(context.Background())
				}
				got <- err
			}()
			// The first attempt and the one made at once after subscribing.
			waitFor(t, 10*time.Second, "two attempts", func() bool { return tries.n.Load() >= 2 })
			select {
			case err := <-got:
				t.Fatalf("ObtainWait with Steps 2 returned after %d attempts without waiting: %v", tries.n.Load(), err)
			default:
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("ObtainWait with Steps 2 after the release: %v; want the lock", err)
			}
		})
	}
}

// The waiters of one Client are woken one per release, in turn, instead
// of all racing for the lock: twenty waiters on one name cost one
// attempt per handover and node (the woken one's; on Redlock each node's
// message may wake another), not twenty, and on one node each is granted
// the lock in the order it started to wait.
func TestObtainWaitWakesTheWaitersOfAClientInTurn(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			opts := redislock.Options{AssumeDurable: true, NodeTimeout: 5 * time.Second}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			holder := clientWith(t, opts, servers...)
			l, err := holder.Obtain(ctx, "turns", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			attempts := &attemptCounter{}
			opts.Metrics, opts.Identity = attempts, "waiters"
			waiters := clientWith(t, opts, servers...)
			const n = 20
			type grant struct {
				i int
				result
			}
			got := make(chan grant, n)
			for i := range n {
				go func() { r := <-obtainWaitAsync(ctx, waiters, "turns", time.Minute, nil); got <- grant{i, r} }()
				// Each waits (two refused attempts: before and after it
				// subscribed) before the next starts, so their turns
				// follow i.
				waitFor(t, 10*time.Second, fmt.Sprintf("waiter %d to wait", i), func() bool { return attempts.n.Load() >= int64(2*(i+1)) })
			}
			before := attempts.n.Load()
			for i := range n {
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case g := <-got:
					if g.err != nil {
						t.Fatalf("waiter %d: %v", g.i, g.err)
					}
					if m.nodes == 1 && g.i != i {
						t.Errorf("handover %d went to waiter %d; want %d, whose turn it was", i, g.i, i)
					}
					l = g.l
				case <-time.After(10 * time.Second):
					t.Fatalf("handover %d: no waiter granted within 10s", i)
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if a := attempts.n.Load() - before; a > int64(n*m.nodes+2) {
				t.Errorf("%d attempts for %d handovers on %d nodes; want at most about one per handover and node", a, n, m.nodes)
			}
		})
	}
}

// A waiter woken in its turn that leaves without trying (its context
// ended) hands the wake-up on to the next, so that no release is lost on
// a waiter that left; one that acted on its wake-up hands nothing on.
func TestATurnIsPassedOnByAWaiterThatLeaves(t *testing.T) {
	servers := redistest.StartN(t, 1)
	ctx := context.Background()
	c := clientWith(t, redislock.Options{AssumeDurable: true, NodeTimeout: 5 * time.Second}, servers...)
	first, stopFirst := redislock.WatchTurn(c, ctx, "turn")
	second, stopSecond := redislock.WatchTurn(c, ctx, "turn")
	defer stopSecond(false)
	waitSubscribed(t, servers, "turn", 1)
	l, err := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "h"}, servers...).Obtain(ctx, "turn", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the release woke not the first waiter")
	}
	select {
	case <-second:
		t.Fatal("the release woke the second waiter too, out of its turn")
	default:
	}
	stopFirst(true)
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the first waiter left without trying, and its turn did not pass to the second")
	}
}
