package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/hostile"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// shardLedger records every candidate's shard terms, from OnStarted to the
// return of OnStopped, and notes at once a shard started while another
// candidate's term of it runs (S1) or with a token not above the shard's
// last (S3).
type shardLedger struct {
	// drain is how long each shard's work takes to stop (OnStopped).
	drain  time.Duration
	mu     sync.Mutex
	active map[int]string
	fence  map[int]int64
	held   map[string]int
	starts int
	errs   []string
}

func newShardLedger() *shardLedger {
	return &shardLedger{active: map[int]string{}, fence: map[int]int64{}, held: map[string]int{}}
}

func (g *shardLedger) started(who string, s redislock.Shard) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if other := g.active[s.Index]; other != "" {
		g.errs = append(g.errs, fmt.Sprintf("shard %d started by %s while %s's term runs", s.Index, who, other))
	}
	if s.Fence <= g.fence[s.Index] {
		g.errs = append(g.errs, fmt.Sprintf("shard %d started by %s with fence %d, not above the last %d", s.Index, who, s.Fence, g.fence[s.Index]))
	}
	g.active[s.Index], g.fence[s.Index] = who, s.Fence
	g.held[who]++
	g.starts++
}

func (g *shardLedger) stopped(who string, s redislock.Shard) {
	time.Sleep(g.drain) // the shard's work winding down
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active[s.Index] != who {
		g.errs = append(g.errs, fmt.Sprintf("shard %d stopped by %s, whose term it was not (%q's)", s.Index, who, g.active[s.Index]))
	}
	delete(g.active, s.Index)
	g.held[who]--
}

// counts returns how many shards each candidate's terms hold, and how many
// shards are held in all.
func (g *shardLedger) counts() (map[string]int, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := map[string]int{}
	for who, n := range g.held {
		if n != 0 {
			c[who] = n
		}
	}
	return c, len(g.active)
}

func (g *shardLedger) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.errs {
		t.Error(e)
	}
}

// balanced says the ledger shows all n shards held, by exactly the
// candidates who, each with ⌊n/R⌋ or ⌈n/R⌉, and each candidate's State
// agrees.
func (g *shardLedger) balanced(n int, who map[string]*shardRunner) func() bool {
	return func() bool {
		c, total := g.counts()
		if total != n || len(c) != len(who) {
			return false
		}
		for name, r := range who {
			held := c[name]
			if held < n/len(who) || held > (n+len(who)-1)/len(who) || len(r.s.State().Held) != held {
				return false
			}
		}
		return true
	}
}

// shardRunner is one candidate's Run.
type shardRunner struct {
	s    *redislock.Sharded
	stop func()
}

// runShards starts a candidate called who for the sharded lock name of n
// shards on c, recording its terms in g.
func (g *shardLedger) run(t *testing.T, c *redislock.Client, who, name string, n int, timing redislock.Timing) *shardRunner {
	t.Helper()
	s, err := c.NewSharded(redislock.ShardedOptions{
		Name: name, Shards: n, Timing: timing,
		OnStarted: func(_ context.Context, s redislock.Shard) { g.started(who, s) },
		OnStopped: func(s redislock.Shard) { g.stopped(who, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", who, err)
		}
	}()
	var once sync.Once
	r := &shardRunner{s: s, stop: func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}}
	t.Cleanup(r.stop)
	return r
}

// shardDeployments are the Redis deployments the sharded tests run on:
// each returns a node client factory, one client per candidate.
var shardDeployments = []struct {
	name  string
	start func(t *testing.T) func() redis.UniversalClient
}{
	{"single", func(t *testing.T) func() redis.UniversalClient {
		s := redistest.Start(t, redisproc.Options{})
		return func() redis.UniversalClient { return redistest.Clients(t, s)[0] }
	}},
	{"cluster", func(t *testing.T) func() redis.UniversalClient {
		addrs := redistest.StartCluster(t, 3)
		return func() redis.UniversalClient { return redistest.ClusterClient(t, addrs) }
	}},
}

// shardedClient returns a Client of the candidate who over rc. Its calls
// may take up to 2s, so that a loaded machine fails none of them: a call
// that fails is tried again after a RenewInterval, which a fake clock
// never brings by itself.
func shardedClient(t *testing.T, rc redis.UniversalClient, who string, clk clock.WithDelayedExecution, durable bool) *redislock.Client {
	t.Helper()
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: who, NodeTimeout: 2 * time.Second, Clock: clk, AssumeDurable: durable})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Candidates that join and leave move shards among themselves by events
// alone: the RenewInterval is longer than each wait, so no renewal timer
// does it. Each shard's work takes 20ms to stop, and a shard is granted
// to the next candidate only once it has. After each change the shards are balanced (⌊64/R⌋ or ⌈64/R⌉
// each), and no shard ever has two terms at once or a token that did not
// grow.
func TestShardedMovesOnJoinAndLeave(t *testing.T) {
	timing := redislock.Timing{TTL: time.Minute, RenewInterval: 20 * time.Second, RenewDeadline: 40 * time.Second}
	const n, within = 64, 10 * time.Second
	for _, d := range shardDeployments {
		t.Run(d.name, func(t *testing.T) {
			node := d.start(t)
			g := newShardLedger()
			g.drain = 20 * time.Millisecond
			runners := map[string]*shardRunner{}
			join := func(who string) {
				runners[who] = g.run(t, shardedClient(t, node(), who, clock.RealClock{}, true), who, "fleet", n, timing)
			}
			settle := func(what string) {
				t.Helper()
				start := time.Now()
				waitFor(t, within, what, g.balanced(n, runners))
				c, _ := g.counts()
				t.Logf("%s: balanced as %v in %v", what, c, time.Since(start).Round(time.Millisecond))
				// An observer reads the same from Redis.
				view, err := shardedClient(t, node(), "observer", clock.RealClock{}, true).InspectShards(context.Background(), "fleet", n)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]int{}
				for _, h := range view.Shards {
					seen[h.Identity]++
				}
				if view.Held() != n || !maps.Equal(seen, c) || len(view.Members) != len(runners) {
					t.Errorf("InspectShards: %d held, by %v, members %v; want %d, by %v, %d members", view.Held(), seen, view.Members, n, c, len(runners))
				}
			}
			join("a")
			settle("a alone")
			join("b")
			settle("b joining a")
			join("c")
			settle("c joining a and b")
			runners["b"].stop()
			delete(runners, "b")
			settle("b leaving")
			g.check(t)
			if st := runners["a"].s.State(); st.Members != 2 || st.Err != nil {
				t.Errorf("a's state after b left: %d members, error %v; want 2, none", st.Members, st.Err)
			}
		})
	}
}

// A shard goes back only once its work has stopped, whether the work
// stops in OnStopped or in OnStarted itself: while either blocks, the
// shards to move to b stay a's, however often a is woken (here by release
// messages published by hand), OnStopped runs only after OnStarted has
// returned, and b gains the shards at once when the work stops.
func TestShardedGivesBackOnlyOnceTheWorkStopped(t *testing.T) {
	timing := redislock.Timing{TTL: time.Minute, RenewInterval: 20 * time.Second, RenewDeadline: 40 * time.Second}
	const n = 8
	for _, in := range []string{"OnStopped", "OnStarted"} {
		t.Run("work stops in "+in, func(t *testing.T) {
			srv := redistest.Start(t, redisproc.Options{})
			ctx := context.Background()
			admin := redistest.Clients(t, srv)[0]
			g := newShardLedger()
			stopping := make(chan struct{})
			var blocked atomic.Int32
			windDown := func(place string) {
				if in == place {
					blocked.Add(1)
					<-stopping
				}
			}
			var mu sync.Mutex
			returned := map[redislock.Shard]bool{}
			a, err := shardedClient(t, redistest.Clients(t, srv)[0], "a", clock.RealClock{}, true).NewSharded(redislock.ShardedOptions{
				Name: "fleet", Shards: n, Timing: timing,
				OnStarted: func(ctx context.Context, s redislock.Shard) {
					g.started("a", s)
					<-ctx.Done()
					windDown("OnStarted")
					mu.Lock()
					defer mu.Unlock()
					returned[s] = true
				},
				OnStopped: func(s redislock.Shard) {
					mu.Lock()
					if !returned[s] {
						t.Errorf("OnStopped of shard %d ran before its OnStarted returned", s.Index)
					}
					mu.Unlock()
					windDown("OnStopped")
					g.stopped("a", s)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = a.Run(runCtx) }()
			defer func() { cancel(); <-done }()
			waitFor(t, 10*time.Second, "a holding every shard", func() bool { _, total := g.counts(); return total == n })
			b := g.run(t, shardedClient(t, redistest.Clients(t, srv)[0], "b", clock.RealClock{}, true), "b", "fleet", n, timing)
			waitFor(t, 10*time.Second, "a's work on b's shards to be stopping", func() bool { return blocked.Load() == n/2 })
			for i := range 3 {
				before, err := redisstats.Read(ctx, admin)
				if err != nil {
					t.Fatal(err)
				}
				if err := admin.Publish(ctx, redislock.EventsChannel("fleet"), "released").Err(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 10*time.Second, fmt.Sprintf("wake %d's calls", i), func() bool {
					now, err := redisstats.Read(ctx, admin)
					return err == nil && now.Sub(before).Scripts() >= 2
				})
			}
			if held := b.s.State().Held; len(held) != 0 {
				t.Fatalf("b holds %v while a's work on them is still stopping", held)
			}
			close(stopping)
			waitFor(t, 10*time.Second, "b to gain its shards once a's work stopped", g.balanced(n, map[string]*shardRunner{"a": {s: a}, "b": b}))
			g.check(t)
		})
	}
}

// A candidate that crashes (its connection to Redis closes) stops
// believing it holds its shards at its RenewDeadline, and the others take
// them once their ttl has run out, within the ttl of its last renewal and
// a bound, without a shard ever having two terms at once.
func TestShardedCrashedCandidatesShardsMoveAfterTheTTL(t *testing.T) {
	timing := redislock.Timing{TTL: 3 * time.Second}.WithDefaults()
	const n = 64
	s := redistest.Start(t, redisproc.Options{})
	g := newShardLedger()
	runners := map[string]*shardRunner{}
	var crashed redis.UniversalClient
	for _, who := range []string{"a", "b", "c"} {
		rc := redistest.Clients(t, s)[0]
		crashed = rc
		runners[who] = g.run(t, shardedClient(t, rc, who, clock.RealClock{}, true), who, "fleet", n, timing)
	}
	waitFor(t, 10*time.Second, "three candidates balanced", g.balanced(n, runners))
	before, _ := g.counts()
	crash := time.Now()
	_ = crashed.Close()
	c := runners["c"]
	delete(runners, "c")
	waitFor(t, timing.TTL+5*time.Second, "a and b to take c's shards", g.balanced(n, runners))
	moved := time.Since(crash)
	if held := c.s.State().Held; len(held) != 0 {
		t.Errorf("c, cut off for %v, still reports %d shards held", moved, len(held))
	}
	t.Logf("c crashed holding %d shards; a and b hold all %d after %v (ttl %v)", before["c"], n, moved.Round(time.Millisecond), timing.TTL)
	g.check(t)
}

// Counted on a fake clock, so that only the candidates' own timers and
// events make calls: a settled fleet sends exactly one call per candidate
// per RenewInterval, whatever number of shards each holds, and a
// candidate's joining costs a bounded number of calls: its own, one per
// candidate it wakes, one give-back per other candidate, and the calls
// those give-backs wake.
func TestShardedCostsOneCallPerCandidatePerRenewInterval(t *testing.T) {
	timing := redislock.Timing{TTL: time.Minute}.WithDefaults()
	const n = 64
	srv := redistest.Start(t, redisproc.Options{})
	ctx := context.Background()
	counter := redistest.Clients(t, srv)[0]
	scripts := func() int64 {
		c, err := redisstats.Read(ctx, counter)
		if err != nil {
			t.Fatal(err)
		}
		return c.Scripts()
	}
	clk := testingclock.NewFakeClock(time.Now())
	g := newShardLedger()
	runners := map[string]*shardRunner{}
	join := func(who string) int64 {
		before, timers := scripts(), clk.Waiters()
		runners[who] = g.run(t, shardedClient(t, redistest.Clients(t, srv)[0], who, clk, true), who, "fleet", n, timing)
		// Its first call is due at once, on the fake clock. The timer
		// seen first may be another of its own (a loaded machine orders
		// them as it will), so each look fires whatever is due now;
		// nothing due later fires.
		waitFor(t, 10*time.Second, who+"'s first timer", func() bool { return clk.Waiters() > timers })
		balanced := g.balanced(n, runners)
		if !waitUntil(10*time.Second, func() bool { clk.Step(0); return balanced() }) {
			for name, r := range runners {
				t.Logf("%s: %+v", name, r.s.State())
			}
			t.Fatalf("%s joining: not balanced after 10s: %v", who, fmt.Sprint(g.counts()))
		}
		return scripts() - before
	}
	join("a")
	join("b")
	r := int64(len(runners) + 1)
	bound := 1 + r + (r-1)*(1+r)
	if calls := join("c"); calls > bound {
		t.Errorf("c's joining took %d calls; want at most %d", calls, bound)
	} else {
		t.Logf("c's joining took %d calls (bound %d)", calls, bound)
	}
	// Every candidate renews once per step, and nothing else calls.
	const steps = 5
	var total int64
	for i := range steps {
		before := scripts()
		clk.Step(timing.RenewInterval)
		waitFor(t, 10*time.Second, fmt.Sprintf("step %d's renewals", i), func() bool { return scripts()-before >= r })
		total += scripts() - before
	}
	if total != steps*r {
		t.Errorf("%d calls over %d RenewIntervals of %d settled candidates; want %d", total, steps, r, steps*r)
	}
	g.check(t)
}

// A candidate that asks for another shard count than the live candidates
// is refused with a reason, and costs the others nothing: they keep every
// shard with the same tokens.
func TestShardedRefusesAnotherShardCount(t *testing.T) {
	timing := redislock.Timing{TTL: 3 * time.Second}.WithDefaults()
	srv := redistest.Start(t, redisproc.Options{})
	g := newShardLedger()
	a := g.run(t, shardedClient(t, redistest.Clients(t, srv)[0], "a", clock.RealClock{}, true), "a", "fleet", 64, timing)
	waitFor(t, 10*time.Second, "a holding every shard", g.balanced(64, map[string]*shardRunner{"a": a}))
	held := a.s.State().Held
	odd := g.run(t, shardedClient(t, redistest.Clients(t, srv)[0], "odd", clock.RealClock{}, true), "odd", "fleet", 32, timing)
	waitFor(t, 10*time.Second, "the odd candidate to say why it is refused", func() bool {
		return errors.Is(odd.s.State().Err, redislock.ErrInvalidOptions)
	})
	t.Logf("refused: %v", odd.s.State().Err)
	// Over a few of a's renewals, nothing of a's changes.
	time0 := time.Now()
	waitFor(t, 10*time.Second, "three of a's renewals", func() bool {
		st := a.s.State()
		return len(st.Held) == 64 && st.Held[0].ValidUntil.After(time0.Add(timing.RenewDeadline+2*timing.RenewInterval))
	})
	now := a.s.State()
	for i, h := range now.Held {
		if h.Shard != held[i].Shard {
			t.Errorf("a's shard %d went from %+v to %+v while the odd candidate was refused", i, held[i].Shard, h.Shard)
		}
	}
	if now.Members != 1 || now.Err != nil {
		t.Errorf("a counts %d members, error %v; want 1 (the odd one is not one), none", now.Members, now.Err)
	}
	g.check(t)
}

// The shards' state vanishing (a DEL of its hash, a FLUSHALL) frees no
// shard before the holders' beliefs have ended: the floor holds the shards
// back after a DEL until the last validity, and the restart guard a ttl
// after the flush. Each candidate has a fake clock of its own, so that a
// alone calls first after the fault: it counts itself the only member, so
// every shard is assigned to it, while b's terms run on, and it must
// take none of them. The holders find their shards gone at their next
// call and step down; the shards are granted again afterwards, with
// higher tokens.
func TestShardedStateVanishingFreesNoShardEarly(t *testing.T) {
	timing := redislock.Timing{TTL: 3 * time.Second}.WithDefaults()
	const n = 16
	for _, fault := range []struct {
		name string
		do   func(context.Context, redis.UniversalClient) error
	}{
		{"DEL", func(ctx context.Context, c redis.UniversalClient) error {
			return c.Del(ctx, "redislock:{fleet}:shards").Err()
		}},
		{"FLUSHALL", func(ctx context.Context, c redis.UniversalClient) error { return c.FlushAll(ctx).Err() }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			srv := redistest.Start(t, redisproc.Options{})
			g := newShardLedger()
			runners := map[string]*shardRunner{}
			clocks := map[string]*testingclock.FakeClock{}
			for _, who := range []string{"a", "b"} {
				clocks[who] = testingclock.NewFakeClock(time.Now())
				runners[who] = g.run(t, shardedClient(t, redistest.Clients(t, srv)[0], who, clocks[who], false), who, "fleet", n, timing)
			}
			// drive moves both clocks a quarter RenewInterval every 5ms
			// of real time until cond holds; the validity in Redis runs
			// on real time.
			drive := func(what string, cond func() bool) {
				t.Helper()
				ok := waitUntil(3*timing.TTL, func() bool {
					for _, c := range clocks {
						c.Step(timing.RenewInterval / 4)
					}
					return cond()
				})
				if !ok {
					t.Fatalf("timed out waiting for %s: a %+v, b %+v", what, runners["a"].s.State(), runners["b"].s.State())
				}
			}
			// A new server: the guard holds the first grants back a ttl.
			drive("a and b balanced", g.balanced(n, runners))
			g.mu.Lock()
			starts := g.starts
			g.mu.Unlock()
			if err := fault.do(context.Background(), redistest.Clients(t, srv)[0]); err != nil {
				t.Fatal(err)
			}
			before := fmt.Sprint(runners["a"].s.State().Held)
			clocks["a"].Step(timing.RenewInterval)
			waitFor(t, 10*time.Second, "a's first call after the fault", func() bool { return fmt.Sprint(runners["a"].s.State().Held) != before })
			if held := runners["a"].s.State().Held; len(held) != 0 {
				t.Errorf("a holds %d shards right after the %s, while b's terms may run", len(held), fault.name)
			}
			drive("every shard to be granted again", func() bool {
				g.mu.Lock()
				again := g.starts >= starts+n
				g.mu.Unlock()
				return again && g.balanced(n, runners)()
			})
			g.check(t)
		})
	}
}

// Fields a tenant wrote into the shards' hash cost the holder the shards
// they touch and nothing else: a garbled holder field or a deleted fencing
// counter makes that shard go back and be granted again with a higher
// token; unknown fields and a garbled membership are ignored, and a
// garbled assignment is computed again.
func TestShardedSurvivesForeignFields(t *testing.T) {
	timing := redislock.Timing{TTL: 3 * time.Second}.WithDefaults()
	const n = 8
	srv := redistest.Start(t, redisproc.Options{})
	ctx := context.Background()
	admin := redistest.Clients(t, srv)[0]
	g := newShardLedger()
	a := g.run(t, shardedClient(t, redistest.Clients(t, srv)[0], "a", clock.RealClock{}, true), "a", "fleet", n, timing)
	all := map[string]*shardRunner{"a": a}
	waitFor(t, 10*time.Second, "a holding every shard", g.balanced(n, all))
	before := a.s.State().Held
	const key = "redislock:{fleet}:shards"
	cached, err := admin.HGet(ctx, key, "a").Result()
	if err != nil {
		t.Fatalf("the assignment a computed: %v", err)
	}
	// The cached assignment's last shard names a member that is not.
	garbled := cached[:len(cached)-1] + "\xff"
	if err := admin.HSet(ctx, key, "s3", "junk", "zz", "x", "mgarbage", "not a membership", "a", garbled).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.HDel(ctx, key, "f5").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a holding shards 3 and 5 again with new tokens", func() bool {
		now := a.s.State().Held
		return len(now) == n && now[3].Fence > before[3].Fence && now[5].Fence > before[5].Fence
	})
	for i, h := range a.s.State().Held {
		if i != 3 && i != 5 && h.Shard != before[i].Shard {
			t.Errorf("shard %d went from %+v to %+v; only 3 and 5 were tampered with", i, before[i].Shard, h.Shard)
		}
	}
	if st := a.s.State(); st.Err != nil || st.Members != 1 {
		t.Errorf("a's state: %d members, error %v; want 1, none", st.Members, st.Err)
	}
	g.check(t)
}

// NewSharded names the broken rule of its options.
func TestNewShardedRules(t *testing.T) {
	one := redistest.Start(t, redisproc.Options{})
	single := newClient(t, "a", one)
	redlock := newClient(t, "a", redistest.StartN(t, 3)...)
	ok := redislock.ShardedOptions{Name: "fleet", Shards: 8, OnStarted: func(context.Context, redislock.Shard) {}}
	for _, tc := range []struct {
		name   string
		client *redislock.Client
		change func(*redislock.ShardedOptions)
		want   string
	}{
		{"no name", single, func(o *redislock.ShardedOptions) { o.Name = "" }, "lock name is empty"},
		{"brace", single, func(o *redislock.ShardedOptions) { o.Name = "a{b" }, "brace"},
		{"no shards", single, func(o *redislock.ShardedOptions) { o.Shards = 0 }, "Shards 0 is not from 1 to 256"},
		{"too many", single, func(o *redislock.ShardedOptions) { o.Shards = redislock.MaxShards + 1 }, "Shards 257 is not from 1 to 256"},
		{"no OnStarted", single, func(o *redislock.ShardedOptions) { o.OnStarted = nil }, "OnStarted is nil"},
		{"timing", single, func(o *redislock.ShardedOptions) { o.RenewInterval = time.Minute }, "RenewInterval 1m0s is not shorter than TTL"},
		{"Redlock", redlock, func(*redislock.ShardedOptions) {}, "not Redlock's 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.change(&o)
			_, err := tc.client.NewSharded(o)
			if !errors.Is(err, redislock.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewSharded: %v; want ErrInvalidOptions naming %q", err, tc.want)
			}
		})
	}
	if _, err := single.NewSharded(ok); err != nil {
		t.Fatalf("NewSharded with valid options: %v", err)
	}
}

// waitUntil polls cond every 5ms until it holds or timeout passes, and
// says whether it held.
func waitUntil(timeout time.Duration, cond func() bool) bool {
	return wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }) == nil
}

// A server that answers a candidate's calls with replies shards.lua never
// gives (a shard out of range or twice, a negative token, another shape)
// starts no shard's work: the candidate says why (ErrNoQuorum), holds
// nothing, and tries again once per RenewInterval or so, not at once.
func TestShardedRefusesAServersMalformedReplies(t *testing.T) {
	for name, reply := range map[string]string{
		"a shard out of range": "*6\r\n:-1\r\n:1\r\n:0\r\n:999\r\n:5\r\n:1\r\n",
		"a shard twice":        "*9\r\n:-1\r\n:1\r\n:0\r\n:1\r\n:5\r\n:1\r\n:1\r\n:6\r\n:1\r\n",
		"a negative token":     "*6\r\n:-1\r\n:1\r\n:0\r\n:1\r\n:-5\r\n:1\r\n",
		"a string for a shard": "*6\r\n:-1\r\n:1\r\n:0\r\n$1\r\nx\r\n:5\r\n:1\r\n",
		"not an array":         "+OK\r\n",
		"a short array":        "*2\r\n:-1\r\n:1\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			s := hostile.Start(t, hostile.EachCommand(func(args []string) []byte {
				if strings.EqualFold(args[0], "evalsha") {
					calls.Add(1)
					return []byte(reply)
				}
				return []byte("-ERR not here\r\n")
			}))
			rc := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { _ = rc.Close() })
			timing := redislock.Timing{TTL: 3 * time.Second, RenewInterval: 100 * time.Millisecond, RenewDeadline: time.Second}
			g := newShardLedger()
			r := g.run(t, shardedClient(t, rc, "a", clock.RealClock{}, true), "a", "fleet", 8, timing)
			waitFor(t, 10*time.Second, "the candidate to say why", func() bool { return errors.Is(r.s.State().Err, redislock.ErrNoQuorum) })
			from, n0 := time.Now(), calls.Load()
			waitFor(t, 10*time.Second, "a few more calls", func() bool { return calls.Load() >= n0+5 })
			elapsed, n := time.Since(from), calls.Load()-n0
			if most := int32(elapsed/(timing.RenewInterval/2)) + 2; n > most {
				t.Errorf("%d calls in %v; want at most %d, one per half RenewInterval", n, elapsed, most)
			}
			if c, held := g.counts(); held != 0 || len(r.s.State().Held) != 0 {
				t.Errorf("shards started %v on a malformed reply; want none", c)
			}
			t.Logf("%v", r.s.State().Err)
		})
	}
}

// InspectShards reads only what inspectshards.lua gives: a reply of
// another shape, a negative token or validity, a holder without a
// validity (or one the other way), a holder or member that is not a
// string or not a value of this package, is an error, and no view.
func TestInspectShardsRefusesMalformedReplies(t *testing.T) {
	holder := "$" + strconv.Itoa(len("v1:")+32+2) + "\r\nv1:" + strings.Repeat("a", 32) + ":x\r\n"
	for name, tc := range map[string]struct {
		reply string
		want  error // nil: a view of one held shard
	}{
		"inspectshards.lua's own":     {"*7\r\n:0\r\n" + holder + ":3\r\n:900\r\n$0\r\n\r\n:0\r\n:0\r\n", nil},
		"not an array":                {"+OK\r\n", redislock.ErrNoQuorum},
		"a count beyond the reply":    {"*7\r\n:1000000\r\n" + holder + ":3\r\n:900\r\n$0\r\n\r\n:0\r\n:0\r\n", redislock.ErrNoQuorum},
		"a negative token":            {"*7\r\n:0\r\n" + holder + ":-3\r\n:900\r\n$0\r\n\r\n:0\r\n:0\r\n", redislock.ErrNoQuorum},
		"a negative validity":         {"*7\r\n:0\r\n$0\r\n\r\n:3\r\n:-900\r\n$0\r\n\r\n:0\r\n:0\r\n", redislock.ErrNoQuorum},
		"a holder without validity":   {"*7\r\n:0\r\n" + holder + ":3\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n", redislock.ErrNoQuorum},
		"a validity without a holder": {"*7\r\n:0\r\n$0\r\n\r\n:3\r\n:900\r\n$0\r\n\r\n:0\r\n:0\r\n", redislock.ErrNoQuorum},
		"a number for a holder":       {"*7\r\n:0\r\n:5\r\n:3\r\n:900\r\n$0\r\n\r\n:0\r\n:0\r\n", redislock.ErrNoQuorum},
		"a number for a member":       {"*8\r\n:1\r\n:5\r\n$0\r\n\r\n:0\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n", redislock.ErrNoQuorum},
		"a foreign holder":            {"*7\r\n:0\r\n$3\r\nabc\r\n:3\r\n:900\r\n$0\r\n\r\n:0\r\n:0\r\n", redislock.ErrMalformedValue},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := hostile.Start(t, hostile.EachCommand(func(args []string) []byte {
				if strings.EqualFold(args[0], "evalsha") {
					return []byte(tc.reply)
				}
				return []byte("-ERR not here\r\n")
			}))
			rc := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { _ = rc.Close() })
			v, err := shardedClient(t, rc, "observer", clock.RealClock{}, true).InspectShards(context.Background(), "fleet", 2)
			switch {
			case tc.want == nil && (err != nil || v.Held() != 1 || v.Shards[0].Identity != "x" || v.Shards[0].Fence != 3):
				t.Fatalf("InspectShards of a well-formed reply: %+v, %v; want shard 0 held by x with token 3", v, err)
			case tc.want != nil && (!errors.Is(err, tc.want) || len(v.Shards) != 0):
				t.Fatalf("InspectShards: %+v, %v; want no view and an error wrapping %v", v, err, tc.want)
			}
		})
	}
}
