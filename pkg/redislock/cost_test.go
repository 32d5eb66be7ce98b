package redislock_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/rung"
	"github.com/redislock/redislock/pkg/redislock"
)

// costDeployment is one way of running Redis for the cost test.
type costDeployment struct {
	name string
	// serverPings is how many PINGs a second the deployment sends its
	// own nodes (a Sentinel pings the master it monitors every second).
	serverPings float64
	// start starts the servers and returns a factory of one candidate's
	// node clients (each candidate has connections of its own, as a
	// process would) and one client per node for counting and tampering.
	start func(t *testing.T) (candidate func() []redis.UniversalClient, nodes []redis.UniversalClient)
}

func redlockDeployment(n int) costDeployment {
	name := "single"
	if n > 1 {
		name = fmt.Sprintf("redlock%d", n)
	}
	return costDeployment{name, 0, func(t *testing.T) (func() []redis.UniversalClient, []redis.UniversalClient) {
		servers := redistest.StartN(t, n)
		return func() []redis.UniversalClient { return redistest.Clients(t, servers...) }, redistest.Clients(t, servers...)
	}}
}

var costDeployments = []costDeployment{
	redlockDeployment(1), redlockDeployment(3), redlockDeployment(5),
	{"sentinel", 1, func(t *testing.T) (func() []redis.UniversalClient, []redis.UniversalClient) {
		master := redistest.Start(t, redisproc.Options{})
		sentinel := redistest.Start(t, redisproc.Options{SentinelFor: "mymaster " + master.Addr})
		return func() []redis.UniversalClient {
			fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{sentinel.Addr}, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = fc.Close() })
			return []redis.UniversalClient{fc}
		}, redistest.Clients(t, master)
	}},
	{"cluster", 0, func(t *testing.T) (func() []redis.UniversalClient, []redis.UniversalClient) {
		addrs := redistest.StartCluster(t, 3)
		cluster := func() []redis.UniversalClient {
			cc := redistest.ClusterClient(t, addrs)
			return []redis.UniversalClient{cc}
		}
		return cluster, cluster()
	}},
}

// costTiming is the election's timing in the cost test: budgets scale with
// it, so it need not be short.
var costTiming = redislock.Timing{TTL: 3 * time.Second, RenewInterval: 500 * time.Millisecond, RenewDeadline: 2 * time.Second}

// costRenewals is how many renewals by a leader each counting window
// lasts: it ends on that condition, not on the clock, so a window holds
// the same work on a loaded machine as on a quiet one (about 10 s here,
// a little over three ttls, so each standby attempts about three times).
const costRenewals = 20

// renewals is a redislock.Metrics that counts the successful renewals of
// every Client given it: the windows' clock.
type renewals struct{ n atomic.Int64 }

func (r *renewals) Renew(_ string, _ time.Duration, err error) {
	if err == nil {
		r.n.Add(1)
	}
}
func (*renewals) Acquire(string, time.Duration, error) {}
func (*renewals) Lost(string)                          {}
func (*renewals) Transition(string)                    {}
func (*renewals) Wait(string, time.Duration, error)    {}

// waitRenewals waits until each counter has counted costRenewals more than
// it had at from: each state has settled and a leader (or holder) has
// renewed that many times since. A counter that stops counting (no leader
// emerged) fails t after the restart guard, a ttl and the renewals, three
// times over.
func waitRenewals(t *testing.T, rs []*renewals, from []int64) {
	t.Helper()
	deadline := 3 * (costTiming.TTL + time.Second + costRenewals*costTiming.RenewInterval)
	waitFor(t, deadline, fmt.Sprintf("%d renewals", costRenewals), func() bool {
		for i, r := range rs {
			if r.n.Load()-from[i] < costRenewals {
				return false
			}
		}
		return true
	})
}

// E1: one leader and four standbys cost each node about one renewal per
// RenewInterval and one attempt per TTL per standby, counted with INFO
// commandstats, in every deployment: while the leader is stable, after a
// split vote (Redlock) or a handover (one node), and after the holder's key
// is deleted on one node. A loop that wakes itself (a give-back that
// publishes "released", a retry without backoff) costs thousands of calls a
// second and fails at once. The deployments run side by side, each state
// counted until each has seen costRenewals renewals by its leader.
func TestElectionCostStaysWithinBudget(t *testing.T) {
	rung.SoakTest(t)
	var es []*costElection
	for _, d := range costDeployments {
		candidate, nodes := d.start(t)
		e := &costElection{t: t, name: d.name, serverPings: d.serverPings, newClients: candidate, nodes: nodes}
		for _, n := range nodes {
			e.events = append(e.events, countEvents(t, n, "cost"))
		}
		for i := range 5 {
			e.cands = append(e.cands, e.start(fmt.Sprintf("c%d", i)))
		}
		defer e.stopAll()
		es = append(es, e)
	}
	for _, e := range es {
		e.waitForLeader()
	}
	measureAll(es, "idle", func(*costElection) int { return 0 })
	measureAll(es, "after split vote or handover", func(e *costElection) int {
		if len(e.nodes) > 1 {
			e.splitVote()
		} else {
			e.handover()
		}
		return -1
	})
	leaders := map[*costElection]string{}
	// A single node's deleted key is a lost lock, not a cost (see the S1
	// tests of deleted keys): those deployments stay idle meanwhile.
	measureAll(es, "after key deleted on one node", func(e *costElection) int {
		leaders[e] = e.waitForLeader()
		if len(e.nodes) == 1 {
			return 0
		}
		if err := e.nodes[0].Del(context.Background(), "redislock:{cost}").Err(); err != nil {
			t.Fatal(err)
		}
		// The holder puts its key back at its next renewal and keeps
		// leading: a standby's attempt there fails meanwhile.
		return 0
	})
	for _, e := range es {
		if len(e.nodes) > 1 {
			raw, _ := e.nodes[0].Get(context.Background(), "redislock:{cost}").Result()
			if v, err := redislock.ParseValue(raw); err != nil || v.Identity != leaders[e] {
				t.Errorf("%s: node 0 holds %q (%v) a window after its key was deleted; want the leader %s's key restored", e.name, raw, err, leaders[e])
			}
		}
		if terms := e.j.check(t); terms < 2 {
			t.Errorf("%s: %d leaderships recorded, want at least 2", e.name, terms)
		}
	}
}

// measureAll counts each election's commands from just before act brings
// it into state until every election's leader has renewed costRenewals
// times since, and checks them: act returns how many leadership changes
// the state must have (-1 for any).
func measureAll(es []*costElection, state string, act func(*costElection) int) {
	ms := make([]costWindowStart, len(es))
	rs, from := make([]*renewals, len(es)), make([]int64, len(es))
	for i, e := range es {
		ms[i] = e.begin()
		rs[i], from[i] = &e.renewals, e.renewals.n.Load()
		ms[i].want = act(e)
	}
	waitRenewals(es[0].t, rs, from)
	for i, e := range es {
		e.end(state, ms[i])
	}
}

// costElection is the cost test's election: its candidates and what it
// counted.
type costElection struct {
	t           *testing.T
	name        string
	serverPings float64
	events      []*eventCounter // per node
	newClients  func() []redis.UniversalClient
	nodes       []redis.UniversalClient
	j           journal
	renewals    renewals // of all its candidates
	cands       []*candidate
}

func (e *costElection) start(identity string) *candidate {
	c, err := redislock.New(e.newClients(), &redislock.Options{Identity: identity, NodeTimeout: 200 * time.Millisecond, Metrics: &e.renewals})
	if err != nil {
		e.t.Fatal(err)
	}
	return start(e.j.elector(e.t, c, "cost", costTiming))
}

func (e *costElection) stopAll() {
	for _, c := range e.cands {
		c.stop()
	}
}

// waitForLeader waits for a candidate to lead and returns its identity.
func (e *costElection) waitForLeader() string {
	i := -1
	// The restart guard holds a fresh node back for a ttl and a second.
	waitFor(e.t, 3*costTiming.TTL+2*time.Second, "a leader", func() bool { i = leaderOf(e.cands); return i >= 0 })
	return fmt.Sprintf("c%d", i)
}

// handover stops the leader, which releases, and starts a new standby in
// its place.
func (e *costElection) handover() {
	i := -1
	waitFor(e.t, 3*costTiming.TTL, "a leader", func() bool { i = leaderOf(e.cands); return i >= 0 })
	e.cands[i].stop()
	e.cands[i] = e.start(fmt.Sprintf("c%d", i))
}

// splitVote leaves every node held by another candidate and no majority
// for anyone, as when candidates race for a released lock and each wins a
// share, and when they die before giving it back (so the split lasts a
// whole ttl); then a new set of candidates starts, all at once.
func (e *costElection) splitVote() {
	e.stopAll()
	ctx := context.Background()
	for i, n := range e.nodes {
		ghost := redislock.Value{Token: strings.Repeat(fmt.Sprint(i%10), 32), Identity: fmt.Sprintf("ghost%d", i)}
		if err := n.Set(ctx, "redislock:{cost}", ghost.String(), costTiming.TTL).Err(); err != nil {
			e.t.Fatal(err)
		}
	}
	for i := range e.cands {
		e.cands[i] = e.start(fmt.Sprintf("c%d", i))
	}
}

// costWindowStart is what a counting window began with.
type costWindowStart struct {
	redis  *redisstats.Window
	events []eventTally
	terms  int
	want   int
}

func (e *costElection) begin() costWindowStart {
	w, err := redisstats.Begin(context.Background(), e.nodes...)
	if err != nil {
		e.t.Fatal(err)
	}
	m := costWindowStart{redis: w, terms: e.j.terms()}
	for _, c := range e.events {
		m.events = append(m.events, c.since(eventTally{}))
	}
	return m
}

// end fails the test if the window from m went over the budget for the
// leadership changes recorded in it.
func (e *costElection) end(state string, m costWindowStart) {
	t := e.t
	counts, took, err := m.redis.End(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	changes := e.j.terms() - m.terms
	if m.want >= 0 && changes != m.want {
		t.Errorf("%s, %s: %d leadership changes in %v, want %d", e.name, state, changes, took.Round(time.Second), m.want)
	}
	standbys := len(e.cands) - 1
	budget := redisstats.Budget(took, costTiming.TTL, costTiming.RenewInterval, standbys, changes)
	for i := range e.nodes {
		d := counts[i]
		t.Logf("%-8s %-30s node %d: %5.1f scripts/s (%d in %v; budget %d), %d commands in all, %d leadership changes",
			e.name, state, i, float64(d.Scripts())/took.Seconds(), d.Scripts(), took.Round(time.Millisecond), budget, d.Total(), changes)
		// Each subscriber (the candidates and the event counter) checks
		// a silent subscription with one PING per SubscriptionCheck.
		if limit := int64(len(e.cands)+1)*(int64(took/redislock.CheckEvery)+1) + int64(e.serverPings*took.Seconds()+1); d["ping"] > limit {
			t.Errorf("%s, %s: node %d got %d PINGs in %v; want at most %d, one per subscriber per %v", e.name, state, i, d["ping"], took, limit, redislock.CheckEvery)
		}
		if d.Scripts() > budget {
			t.Errorf("%s, %s: node %d ran %d scripts in %v, over the budget of %d", e.name, state, i, d.Scripts(), took, budget)
		}
		// Only a holder's release publishes "released": at most one
		// per node for each change. A failed attempt that took a node
		// announces it ("acquired", which wakes only observers), at most
		// once per standby per ttl; a stable election with nothing lost
		// sends neither.
		ev := e.events[i].since(m.events[i])
		limit := int64(changes)
		if state != "idle" {
			limit += int64(standbys) * int64(took/costTiming.TTL+1)
		}
		if ev.released > int64(changes) || ev.acquired > limit {
			t.Errorf("%s, %s: node %d published %d released and %d acquired for %d leadership changes; want at most %d and %d", e.name, state, i, ev.released, ev.acquired, changes, changes, limit)
		}
	}
}

// eventCounter counts the messages on one node's events channel of a lock.
type eventCounter struct {
	released, acquired atomic.Int64
}

// eventTally is a reading of an eventCounter.
type eventTally struct {
	released, acquired int64
}

// countEvents subscribes to lock's events on n and counts them until the
// test ends. It listens as the candidates do (redislock.KeepSubscription), so its
// own PINGs are counted with theirs.
func countEvents(t *testing.T, n redis.UniversalClient, lock string) *eventCounter {
	ctx, cancel := context.WithCancel(context.Background())
	sub := n.Subscribe(ctx, redislock.EventsChannel(lock))
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	c := &eventCounter{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		redislock.KeepSubscription(ctx, clock.RealClock{}, logr.Discard(), sub, func(ctx context.Context) error { return sub.Subscribe(ctx, redislock.EventsChannel(lock)) }, func(msg *redis.Message) {
			switch msg.Payload {
			case "released":
				c.released.Add(1)
			case "acquired":
				c.acquired.Add(1)
			}
		}, nil)
	}()
	t.Cleanup(func() { cancel(); _ = sub.Close(); <-done })
	return c
}

// since returns the counts less an earlier reading.
func (c *eventCounter) since(earlier eventTally) eventTally {
	return eventTally{released: c.released.Load() - earlier.released, acquired: c.acquired.Load() - earlier.acquired}
}
