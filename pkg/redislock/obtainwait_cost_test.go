package redislock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/rung"
	"github.com/redislock/redislock/pkg/redislock"
)

// E1 for ObtainWait: four waiters cost each node about one attempt per
// ttl each while another holds the lock and renews (they sleep until the
// holder's keys would expire), and the same after a release that all of
// them race for, of which exactly one wins, counted with INFO
// commandstats against the cost test's budget (redisstats.Budget) until
// the holder has renewed costRenewals times. A waiter that polls, or wakes
// itself, fails at once.
func TestObtainWaitCostStaysWithinBudget(t *testing.T) {
	rung.SoakTest(t)
	type waitElection struct {
		name    string
		nodes   []redis.UniversalClient
		release func()
		wins    atomic.Int64
		renewed renewals // by the holder and the waiters
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var es []*waitElection
	for _, d := range []costDeployment{redlockDeployment(1), redlockDeployment(3)} {
		candidate, nodes := d.start(t)
		e := &waitElection{name: d.name, nodes: nodes}
		newLocks := func(identity string) *redislock.Client {
			c, err := redislock.New(candidate(), &redislock.Options{Identity: identity, NodeTimeout: 200 * time.Millisecond, Metrics: &e.renewed})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		// The holder waits out the restart guard of the fresh nodes.
		first, cancelFirst := context.WithTimeout(ctx, 3*costTiming.TTL)
		l, err := newLocks("holder").ObtainWait(first, "wcost", costTiming.TTL, nil)
		cancelFirst()
		if err != nil {
			t.Fatal(err)
		}
		_, stop, err := l.Watchdog(ctx, costTiming.RenewInterval, costTiming.RenewDeadline)
		if err != nil {
			t.Fatal(err)
		}
		e.release = func() {
			if err := stop(); err != nil {
				t.Errorf("%s: holder's watchdog: %v", d.name, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("%s: release: %v", d.name, err)
			}
		}
		for i := range 4 {
			c := newLocks(fmt.Sprintf("w%d", i))
			go func() {
				l, err := c.ObtainWait(ctx, "wcost", costTiming.TTL, nil)
				if err != nil {
					return // the test ended
				}
				e.wins.Add(1)
				held, stop, err := l.Watchdog(ctx, costTiming.RenewInterval, costTiming.RenewDeadline)
				if err != nil {
					t.Error(err)
					return
				}
				<-held.Done()
				_ = stop()
			}()
		}
		es = append(es, e)
	}
	measure := func(state string, act func(*waitElection), standbys, wins int) {
		ws := make([]*redisstats.Window, len(es))
		rs, from := make([]*renewals, len(es)), make([]int64, len(es))
		for i, e := range es {
			rs[i], from[i] = &e.renewed, e.renewed.n.Load()
			w, err := redisstats.Begin(context.Background(), e.nodes...)
			if err != nil {
				t.Fatal(err)
			}
			ws[i] = w
			act(e)
		}
		waitRenewals(t, rs, from)
		for i, e := range es {
			counts, took, err := ws[i].End(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			budget := redisstats.Budget(took, costTiming.TTL, costTiming.RenewInterval, standbys, wins)
			for n, d := range counts {
				t.Logf("%-8s %-22s node %d: %4.1f scripts/s (%d in %v; budget %d), %d commands in all",
					e.name, state, n, float64(d.Scripts())/took.Seconds(), d.Scripts(), took.Round(time.Millisecond), budget, d.Total())
				if d.Scripts() > budget {
					t.Errorf("%s, %s: node %d ran %d scripts in %v, over the budget of %d", e.name, state, n, d.Scripts(), took, budget)
				}
			}
			if got := e.wins.Load(); got != int64(wins) {
				t.Errorf("%s, %s: %d waiters obtained the lock, want %d", e.name, state, got, wins)
			}
		}
	}
	measure("idle while held", func(*waitElection) {}, 4, 0)
	measure("after a race", func(e *waitElection) { e.release() }, 3, 1)
}
