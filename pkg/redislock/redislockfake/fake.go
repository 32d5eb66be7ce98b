// Package redislockfake runs package redislock over in-memory Redis nodes
// (miniredis), for the unit tests of code that uses locks: no redis-server
// process, and a time that moves only when the test says so.
//
// The fake gives a real *redislock.Client, so the code under test needs no
// interface of its own: the same scripts run, the same errors come back.
// What it does not give is what only a real server can: restarts (the
// restart guard is off, as with Options.AssumeDurable), replication
// (Options.WaitReplicas is not supported), Cluster and Sentinel, and
// timing under load. Test the lock engine itself against real Redis, as
// package redislock's own tests do.
package redislockfake

import (
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/pkg/redislock"
)

// Fake is a redislock.Client over in-memory nodes whose time is a fake
// clock.
type Fake struct {
	// Client is the Client under test's locks; its Options.Clock is Clock.
	Client *redislock.Client
	// Clock is the time of the Client and of the nodes: Advance moves it.
	Clock *testingclock.FakeClock

	nodes   []*miniredis.Miniredis
	clients []*redis.Client
}

// New starts nodes in-memory nodes (1 for a single-instance lock, an odd
// number for Redlock) and returns a Fake over them, with the time at the
// current wall-clock instant. opts is as for redislock.New (nil for the
// defaults), except that its Clock must be nil (the fake's Clock takes its
// place) and its WaitReplicas 0; AssumeDurable is set, as in-memory nodes
// never restart. Invalid options give an error wrapping
// redislock.ErrInvalidOptions. Close the Fake when done.
func New(nodes int, opts *redislock.Options) (*Fake, error) {
	var o redislock.Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Clock != nil:
		return nil, fmt.Errorf("redislockfake: %w: Options.Clock must be nil: the fake's Clock is the time", redislock.ErrInvalidOptions)
	case o.WaitReplicas != 0:
		return nil, fmt.Errorf("redislockfake: %w: Options.WaitReplicas is not supported: in-memory nodes have no replicas", redislock.ErrInvalidOptions)
	}
	f := &Fake{Clock: testingclock.NewFakeClock(time.Now())}
	o.Clock, o.AssumeDurable = f.Clock, true
	clients := make([]redis.UniversalClient, nodes)
	for i := range clients {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			f.Close()
			return nil, fmt.Errorf("redislockfake: start node %d: %w", i, err)
		}
		m.SetTime(f.Clock.Now())
		f.nodes = append(f.nodes, m)
		// RESP2: miniredis does not push pub/sub messages in RESP3.
		rc := redis.NewClient(&redis.Options{Addr: m.Addr(), Protocol: 2, ContextTimeoutEnabled: true})
		f.clients = append(f.clients, rc)
		clients[i] = rc
	}
	c, err := redislock.New(clients, &o)
	if err != nil {
		f.Close()
		return nil, err
	}
	f.Client = c
	return f, nil
}

// Close closes the node clients and stops the nodes. Stop what uses
// Client (Watchdogs, Electors, WatchReleases) first.
func (f *Fake) Close() {
	for _, rc := range f.clients {
		_ = rc.Close()
	}
	for _, m := range f.nodes {
		m.Close()
	}
}

// Advance moves time forward by d, on the nodes first (keys whose ttl runs
// out within d expire) and then on Clock (locks' local deadlines pass,
// and the timers of waiting ObtainWait calls, Watchdogs and Electors fire).
// What the timers start runs after Advance returns, on their own
// goroutines: a test waits for its outcome. A Watchdog renews once per
// Advance at most, so advance by less than its renew interval to keep a
// lock renewed.
func (f *Fake) Advance(d time.Duration) {
	now := f.Clock.Now().Add(d)
	for _, m := range f.nodes {
		m.SetTime(now)
		m.FastForward(d)
	}
	f.Clock.Step(d)
}

// Keys returns the names of the keys on node i, for tests that check
// what a lock leaves behind.
func (f *Fake) Keys(i int) []string { return f.nodes[i].Keys() }
