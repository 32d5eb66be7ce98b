package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/redislock/redislock/internal/testing/benchresult"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// shardBook records which replica's term of each shard runs, from its
// start to its stop, and the starts' times; it notes a shard started while
// another replica's term of it runs.
type shardBook struct {
	mu      sync.Mutex
	holder  map[int]string
	started map[int]time.Time
	errs    []string
}

func newShardBook() *shardBook {
	return &shardBook{holder: map[int]string{}, started: map[int]time.Time{}}
}

func (b *shardBook) start(who string, shard int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.holder[shard]; h != "" {
		b.errs = append(b.errs, fmt.Sprintf("shard %d started by %s while %s's term runs", shard, who, h))
	}
	b.holder[shard], b.started[shard] = who, time.Now()
}

func (b *shardBook) stop(who string, shard int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holder[shard] == who {
		delete(b.holder, shard)
	}
}

// snapshot returns each shard's holder.
func (b *shardBook) snapshot() map[int]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.holder)
}

// counts returns how many shards each replica holds, and the number held.
func (b *shardBook) counts() (map[string]int, int) {
	c := map[string]int{}
	h := b.snapshot()
	for _, who := range h {
		c[who]++
	}
	return c, len(h)
}

// moves returns, for each shard whose holder changed from before, how
// many seconds after since its new holder started it.
func (b *shardBook) moves(before map[int]string, since time.Time) []float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []float64
	for shard, who := range b.holder {
		if before[shard] != who {
			out = append(out, b.started[shard].Sub(since).Seconds())
		}
	}
	return out
}

// replicaSet is one side of the comparison: replicas that join, leave
// gracefully and crash.
type replicaSet interface {
	join(t *testing.T, who string)
	leave(who string)
	crash(who string)
	// cost returns what the side sent since the last call: Redis scripts
	// and API server writes.
	cost(t *testing.T) (scripts, apiWrites int64)
}

// TestShardingAgainstLeaseBuckets compares our sharded lock with a
// Lease-per-bucket election built with client-go's leaderelection (the
// knative model: every replica campaigns for every bucket's Lease), on
// the same shard count and timing, one side after the other: 3 replicas
// settle, a 4th joins (scale up), leaves gracefully (scale down), and one
// of the 3 crashes (its connection fails, so nothing is released). It
// prints each side's move times (from the change to the new holder's
// start, per moved shard), the spread of shards per replica (max minus
// min) after the join, the writes to the API server and the Redis scripts
// per minute while idle, and fails if a shard ever had two terms at once.
//
//	SHARDING_BENCH  set to run it (it takes about a minute)
//	SHARDING_JSON   a file to write the results to, for
//	                test/bench/cmd/benchreport (optional)
func TestShardingAgainstLeaseBuckets(t *testing.T) {
	if os.Getenv("SHARDING_BENCH") == "" {
		t.Skip("SHARDING_BENCH is unset: set it to compare sharding with Lease buckets (about a minute)")
	}
	const shards, ours = 64, "redislock sharded"
	timing := redislock.Timing{TTL: 6 * time.Second, RenewDeadline: 4 * time.Second, RenewInterval: time.Second}
	res := benchresult.Sharding{Shards: shards, Timing: benchresult.Timing{
		LeaseDuration: timing.TTL.String(), RenewDeadline: timing.RenewDeadline.String(), RetryPeriod: timing.RenewInterval.String(),
	}}
	for _, side := range []struct {
		name string
		set  func(t *testing.T, b *shardBook) replicaSet
	}{
		{ours, func(t *testing.T, b *shardBook) replicaSet { return newRedisShards(t, b, shards, timing) }},
		{"Lease per bucket", func(t *testing.T, b *shardBook) replicaSet { return newLeaseBuckets(t, b, shards, timing) }},
	} {
		t.Run(side.name, func(t *testing.T) {
			b := newShardBook()
			set := side.set(t, b)
			r := benchresult.ShardingSide{Name: side.name, Replicas: 3}
			for _, who := range []string{"r0", "r1", "r2"} {
				set.join(t, who)
			}
			waitUntil(t, 4*timing.TTL, "every shard held by 3 replicas", func() bool {
				c, n := b.counts()
				return n == shards && len(c) == 3
			})
			// Idle cost, over 10 renewals.
			set.cost(t)
			idle := 10 * timing.RenewInterval
			start := time.Now()
			time.Sleep(idle) // a window to count over, not a wait for a condition
			scripts, writes := set.cost(t)
			r.RedisScriptsPerMinute = float64(scripts) / time.Since(start).Minutes()
			r.APIWritesPerMinute = float64(writes) / time.Since(start).Minutes()

			settle := func(what string, cond func(map[string]int, int) bool) {
				t.Helper()
				waitUntil(t, 3*timing.TTL, what, func() bool { c, n := b.counts(); return cond(c, n) })
			}
			spread := func(live ...string) int {
				c, _ := b.counts()
				lo, hi := shards, 0
				for _, who := range live {
					lo, hi = min(lo, c[who]), max(hi, c[who])
				}
				return hi - lo
			}
			// Scale up: a 4th replica. Lease buckets may give it none.
			before, at := b.snapshot(), time.Now()
			set.join(t, "r3")
			settle("the shards settled after the join", func(c map[string]int, n int) bool {
				return n == shards && (c["r3"] >= shards/4 || time.Since(at) > 2*timing.TTL)
			})
			r.UpSeconds, r.SpreadUp = b.moves(before, at), spread("r0", "r1", "r2", "r3")
			// Scale down: the 4th leaves, giving its shards back.
			before, at = b.snapshot(), time.Now()
			set.leave("r3")
			settle("the 4th's shards taken after it left", func(c map[string]int, n int) bool { return n == shards && c["r3"] == 0 })
			r.DownSeconds = b.moves(before, at)
			// A crash: r2 stops answering; its shards run out.
			before, at = b.snapshot(), time.Now()
			set.crash("r2")
			settle("r2's shards taken after its crash", func(c map[string]int, n int) bool { return n == shards && c["r2"] == 0 })
			r.CrashSeconds, r.SpreadCrash = b.moves(before, at), spread("r0", "r1")
			b.mu.Lock()
			r.Overlaps = len(b.errs)
			if side.name == ours {
				for _, e := range b.errs {
					t.Error(e)
				}
			}
			b.mu.Unlock()
			res.Sides = append(res.Sides, r)
		})
	}
	q := func(ds []float64) string {
		if len(ds) == 0 {
			return "none moved"
		}
		ds = slices.Sorted(slices.Values(ds))
		p := func(f float64) time.Duration {
			return time.Duration(ds[int(f*float64(len(ds)-1))] * float64(time.Second)).Round(time.Millisecond)
		}
		return fmt.Sprintf("%d: %v / %v", len(ds), p(0.5), p(0.99))
	}
	var md strings.Builder
	fmt.Fprintf(&md, "%d shards, %s\n\n", shards, res.Timing)
	md.WriteString("| | scale up: moved, p50 / p99 | spread after | scale down | crash | spread after | API writes/min idle | Redis scripts/min idle | overlaps |\n|---|---|---:|---|---|---:|---:|---:|---:|\n")
	for _, r := range res.Sides {
		fmt.Fprintf(&md, "| %s | %s | %d | %s | %s | %d | %.0f | %.0f | %d |\n", r.Name, q(r.UpSeconds), r.SpreadUp, q(r.DownSeconds), q(r.CrashSeconds), r.SpreadCrash, r.APIWritesPerMinute, r.RedisScriptsPerMinute, r.Overlaps)
	}
	t.Log("\n" + md.String())
	if path := os.Getenv("SHARDING_JSON"); path != "" {
		writeJSON(t, path, res)
	}
}

// redisShards is our side: each replica a Sharded candidate with a client
// of its own.
type redisShards struct {
	b       *shardBook
	srv     *redisproc.Server
	admin   redis.UniversalClient
	shards  int
	timing  redislock.Timing
	stops   map[string]func()
	clients map[string]redis.UniversalClient
	last    redisstats.Counts
}

func newRedisShards(t *testing.T, b *shardBook, shards int, timing redislock.Timing) *redisShards {
	srv := redistest.Start(t, redisproc.Options{})
	return &redisShards{b: b, srv: srv, admin: redistest.Clients(t, srv)[0], shards: shards, timing: timing, stops: map[string]func(){}, clients: map[string]redis.UniversalClient{}}
}

func (s *redisShards) join(t *testing.T, who string) {
	rc := redis.NewClient(&redis.Options{Addr: s.srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rc.Close() })
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: who, AssumeDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := c.NewSharded(redislock.ShardedOptions{
		Name: "bench", Shards: s.shards, Timing: s.timing,
		OnStarted: func(_ context.Context, x redislock.Shard) { s.b.start(who, x.Index) },
		OnStopped: func(x redislock.Shard) { s.b.stop(who, x.Index) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sh.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	s.stops[who], s.clients[who] = stop, rc
}

func (s *redisShards) leave(who string) { s.stops[who]() }

func (s *redisShards) crash(who string) { _ = s.clients[who].Close() }

func (s *redisShards) cost(t *testing.T) (int64, int64) {
	c, err := redisstats.Read(context.Background(), s.admin)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Sub(s.last)
	s.last = c
	return d.Scripts(), 0
}

// leaseBuckets is the anchor: each replica runs one client-go
// LeaderElector per bucket, each on a Lease of its own.
type leaseBuckets struct {
	b      *shardBook
	ns     string
	shards int
	timing redislock.Timing
	writes atomic.Int64
	// dead are the replicas whose requests fail (crashed).
	dead  sync.Map
	stops map[string]func()
}

func newLeaseBuckets(t *testing.T, b *shardBook, shards int, timing redislock.Timing) *leaseBuckets {
	return &leaseBuckets{b: b, ns: newNamespace(t), shards: shards, timing: timing, stops: map[string]func(){}}
}

// roundTrip counts the writes of a replica's requests, and fails them all
// once the replica crashed.
type roundTrip struct {
	l    *leaseBuckets
	who  string
	next http.RoundTripper
}

func (r roundTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, dead := r.l.dead.Load(r.who); dead {
		return nil, fmt.Errorf("%s crashed", r.who)
	}
	if req.Method != http.MethodGet {
		r.l.writes.Add(1)
	}
	return r.next.RoundTrip(req)
}

func (l *leaseBuckets) join(t *testing.T, who string) {
	cfg := rest.CopyConfig(apiServer(t))
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return roundTrip{l: l, who: who, next: rt} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range l.shards {
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: l.ns, Name: fmt.Sprintf("bucket-%d", i)},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: who},
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: l.timing.TTL, RenewDeadline: l.timing.RenewDeadline, RetryPeriod: l.timing.RenewInterval,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { l.b.start(who, i) },
				OnStoppedLeading: func() { l.b.stop(who, i) },
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Campaign again after losing a bucket, as knative's
			// buckets do, until the replica stops.
			for ctx.Err() == nil {
				le.Run(ctx)
			}
		}()
	}
	stop := func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	l.stops[who] = stop
}

func (l *leaseBuckets) leave(who string) { l.stops[who]() }

func (l *leaseBuckets) crash(who string) {
	l.dead.Store(who, true)
	go l.stops[who]()
}

func (l *leaseBuckets) cost(*testing.T) (int64, int64) {
	return 0, l.writes.Swap(0)
}
