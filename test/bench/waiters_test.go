package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/benchresult"
	"github.com/redislock/redislock/pkg/redislock"
)

// waitersHeld is how long every lock is held: past the end of the run, so
// that no expiry wakes a waiter.
const waitersHeld = 10 * time.Minute

// waitersScenario is one way of waiting in TestWaiters: what it measured,
// and the waiters that it runs.
type waitersScenario struct {
	benchresult.WaitersScenario

	client  *redislock.Client
	names   []string
	next    int             // names: the next name to hand over
	held    *redislock.Lock // herd: the last winner's lock
	waiting int             // herd: the waiters still waiting
	grants  chan grant
}

// grant is a waiter's ObtainWait returning.
type grant struct {
	at   time.Time
	lock *redislock.Lock
	err  error
}

// TestWaiters measures ObtainWait with many waiters on one Client against
// one redis-server, in three scenarios whose handovers interleave (one of
// each per round, in an order that starts one further each round):
//   - single: one waiter on one name, the reference;
//   - names: WAITERS_NAMES waiters, each on a name of its own;
//   - herd: WAITERS_HERD waiters on one name.
//
// Another Client holds every name. A handover is a release, timed until a
// waiter's ObtainWait returns the lock; in herd the winner holds it until
// the next handover, its own release. It records each waiting Client's
// connections, what its waiters cost in memory, and the server's CPU and
// script calls per handover. The verdicts are cmd/benchreport's.
//
//	WAITERS_HANDOVERS  handovers per scenario (200)
//	WAITERS_NAMES      waiters of names (10000)
//	WAITERS_HERD       waiters of herd (1000)
//	WAITERS_JSON       a file to write the results to (optional)
func TestWaiters(t *testing.T) {
	handovers := envInt(t, "WAITERS_HANDOVERS", 200)
	addr := startRedis(t, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = admin.Close() }()
	holder, _ := waitersClient(t, addr, "holder")
	held := map[string]*redislock.Lock{}
	hold := func(name string) {
		t.Helper()
		l, err := holder.Obtain(ctx, name, waitersHeld)
		if err != nil {
			t.Fatalf("hold %s: %v", name, err)
		}
		held[name] = l
	}

	single := &waitersScenario{WaitersScenario: benchresult.WaitersScenario{Name: "single", Waiters: 1}, names: []string{"single"}}
	many := &waitersScenario{WaitersScenario: benchresult.WaitersScenario{Name: "names", Waiters: envInt(t, "WAITERS_NAMES", 10000)}}
	for i := range many.Waiters {
		many.names = append(many.names, fmt.Sprintf("names-%05d", i))
	}
	herd := &waitersScenario{WaitersScenario: benchresult.WaitersScenario{Name: "herd", Waiters: envInt(t, "WAITERS_HERD", 1000)}, names: []string{"herd"}}
	scenarios := []*waitersScenario{single, many, herd}
	channels := 0 // subscribed on the server, once every waiter waits
	for _, sc := range scenarios {
		var rc *redis.Client
		sc.client, rc = waitersClient(t, addr, sc.Name)
		sc.Names, sc.PoolSize, sc.grants = len(sc.names), rc.Options().PoolSize, make(chan grant, sc.Waiters)
		for _, name := range sc.names {
			hold(name)
		}
		before := inUse()
		calls := scriptCalls(t, admin)
		for i := range sc.Waiters {
			go sc.wait(ctx, sc.names[i%len(sc.names)])
		}
		// Each waiter tries, subscribes and tries again before it waits.
		waitScripts(t, admin, calls+int64(2*sc.Waiters), fmt.Sprintf("%d waiters of %s to wait", sc.Waiters, sc.Name))
		channels += len(sc.names)
		waitChannels(t, admin, channels, sc.Name)
		sc.ClientBytes = int64(inUse() - before)
		sc.waiting = sc.Waiters
	}
	for _, sc := range scenarios {
		sc.Connections, sc.PubSubConnections = connections(t, admin, sc.Name)
	}

	for round := range handovers {
		for k := range scenarios {
			sc := scenarios[(round+k)%len(scenarios)]
			var release *redislock.Lock
			switch {
			case sc == many:
				release = held[sc.names[sc.next]]
				sc.next++
			case sc == herd && sc.held != nil:
				release = sc.held
			default:
				release = held[sc.names[0]]
			}
			// The scripts a handover runs: the release, then the try of
			// the waiter it wakes (the waiters of one Client for one
			// name take turns), the winner.
			const want = 2
			calls, cpu := scriptCalls(t, admin), redisCPU(t, admin)
			start := time.Now()
			if err := release.Release(ctx); err != nil {
				t.Fatalf("%s: release: %v", sc.Name, err)
			}
			var g grant
			select {
			case g = <-sc.grants:
			case <-time.After(time.Minute):
				t.Fatalf("%s: no waiter obtained the lock within a minute of its release", sc.Name)
			}
			if g.err != nil {
				t.Fatalf("%s: ObtainWait: %v", sc.Name, g.err)
			}
			took := g.at.Sub(start)
			got := waitScripts(t, admin, calls+want, sc.Name+": the woken waiters to try") - calls
			sc.HandoverSeconds = append(sc.HandoverSeconds, took.Seconds())
			sc.RedisCPUSeconds = append(sc.RedisCPUSeconds, redisCPU(t, admin)-cpu)
			sc.Scripts = append(sc.Scripts, got)
			switch sc {
			case herd:
				sc.held = g.lock
				sc.waiting--
			case single:
				// Back as it was: held, and its waiter waiting.
				if err := g.lock.Release(ctx); err != nil {
					t.Fatal(err)
				}
				hold(sc.names[0])
				calls := scriptCalls(t, admin)
				go sc.wait(ctx, sc.names[0])
				waitScripts(t, admin, calls+2, "the single waiter to wait again")
			}
			if sc == herd && sc.waiting == 0 {
				t.Fatalf("herd: %d waiters are too few for %d handovers", sc.Waiters, handovers)
			}
		}
	}
	printWaiters(scenarios)
	if path := os.Getenv("WAITERS_JSON"); path != "" {
		out := benchresult.Waiters{Handovers: handovers}
		for _, sc := range scenarios {
			out.Scenarios = append(out.Scenarios, &sc.WaitersScenario)
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// wait is one waiter: it reports its ObtainWait's outcome on sc.grants.
func (sc *waitersScenario) wait(ctx context.Context, name string) {
	l, err := sc.client.ObtainWait(ctx, name, waitersHeld, nil)
	sc.grants <- grant{at: time.Now(), lock: l, err: err}
}

// printWaiters prints a table of the scenarios, p99 also as a ratio to
// the single waiter's.
func printWaiters(scenarios []*waitersScenario) {
	ref := quantile(scenarios[0].HandoverSeconds, 0.99)
	fmt.Println("\n| waiters | names | connections (pool) | pub/sub | client memory | handover p50 | p99 | p99 ÷ single | Redis CPU/handover | scripts/handover |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, sc := range scenarios {
		p99 := quantile(sc.HandoverSeconds, 0.99)
		fmt.Printf("| %d | %d | %d (%d) | %d | %.1f MiB | %.0f µs | %.0f µs | %.2f | %.0f µs | %.0f |\n", sc.Waiters, sc.Names, sc.Connections, sc.PoolSize, sc.PubSubConnections,
			float64(sc.ClientBytes)/(1<<20), quantile(sc.HandoverSeconds, 0.5)*1e6, p99*1e6, p99/ref,
			quantile(sc.RedisCPUSeconds, 0.5)*1e6, quantile(int64s(sc.Scripts), 0.5))
	}
}

// waitersClient is a lock Client on addr whose connections carry the
// client name redislock-bench-<name>, and its go-redis client. It assumes
// a durable node: the restart guard would hold every fresh name back for
// waitersHeld after the server's start.
func waitersClient(t *testing.T, addr, name string) (*redislock.Client, *redis.Client) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr, ClientName: "redislock-bench-" + name})
	t.Cleanup(func() { _ = rc.Close() })
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: name, AssumeDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	return c, rc
}

// inUse is the heap and the stacks in use, after a GC.
func inUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// readCounters reads the server's CPU and command counters through rc.
func readCounters(t *testing.T, rc *redis.Client) counters {
	t.Helper()
	c := counters{commands: map[string]struct{ calls, usec int64 }{}}
	info, err := rc.Info(context.Background(), "cpu", "commandstats").Result()
	if err == nil {
		err = c.add(info)
	}
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	return c
}

// scriptCalls is how many scripts the server has run (EVALSHA and EVAL).
func scriptCalls(t *testing.T, rc *redis.Client) int64 {
	t.Helper()
	c := readCounters(t, rc)
	return c.commands["evalsha"].calls + c.commands["eval"].calls
}

// redisCPU is the server's used_cpu_user + used_cpu_sys, in seconds.
func redisCPU(t *testing.T, rc *redis.Client) float64 {
	t.Helper()
	return readCounters(t, rc).cpuUs / 1e6
}

// waitScripts waits until the server has run at least want scripts and
// returns how many; it fails t after a minute.
func waitScripts(t *testing.T, rc *redis.Client, want int64, what string) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n := scriptCalls(t, rc)
		if n >= want {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d script calls within a minute, want %d", what, n, want)
		}
		time.Sleep(2 * time.Millisecond) // a poll of the counters, each an INFO
	}
}

// waitChannels waits until the server has want channels subscribed
// (INFO stats' pubsub_channels); it fails t after a minute.
func waitChannels(t *testing.T, rc *redis.Client, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := rc.Info(context.Background(), "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		n := -1
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "pubsub_channels:"); ok {
				if n, err = strconv.Atoi(v); err != nil {
					t.Fatalf("INFO stats: %q: %v", line, err)
				}
			}
		}
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d channels subscribed after a minute, want %d", what, n, want)
		}
		time.Sleep(10 * time.Millisecond) // a poll of INFO
	}
}

// connections counts the connections of the Client called name (CLIENT
// LIST), and those in pub/sub among them.
func connections(t *testing.T, rc *redis.Client, name string) (all, pubsub int) {
	t.Helper()
	list, err := rc.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(list) {
		if !strings.Contains(line, " name=redislock-bench-"+name+" ") {
			continue
		}
		all++
		for f := range strings.FieldsSeq(line) {
			if flags, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(flags, "P") {
				pubsub++
			}
		}
	}
	return all, pubsub
}

// quantile returns the p-quantile of vs by nearest rank.
func quantile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func int64s(vs []int64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = float64(v)
	}
	return out
}
