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
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/benchresult"
	"github.com/redislock/redislock/pkg/redislock"
)

// The interleaved measurement: the implementations run in alternating
// rounds (A B C D, B C D A, ...), each for one slot, so that a change in
// the machine's load between rounds reaches every implementation alike and
// cancels in per-round ratios. Each slot also reads, from every server, the
// CPU it spent (INFO cpu: used_cpu_user + used_cpu_sys) and what each
// command cost (INFO commandstats), per acquire+release: the server's work,
// which the client machine's noise does not move.
//
// INTERLEAVED_ROUNDS (default 3), INTERLEAVED_SLOT (default 200ms) and
// INTERLEAVED_JSON (a file for the samples, which cmd/benchreport reads)
// set it; run.sh runs 10 rounds of 500ms.

// setup is how TestInterleaved runs an entry: what its JSON leaves out.
type setup struct {
	open  newLocker
	addrs []string
}

// TestInterleaved measures every implementation on one server, serial and
// parallel, and Redlock over 1, 3, 5 and 7 servers, in interleaved rounds.
// It checks only that every slot did work and the servers' counters moved;
// the verdicts are cmd/benchreport's.
func TestInterleaved(t *testing.T) {
	rounds := envInt(t, "INTERLEAVED_ROUNDS", 3)
	slot := envDuration(t, "INTERLEAVED_SLOT", 200*time.Millisecond)
	addrs := startRedis(t, 7)
	singles := []struct {
		name string
		open newLocker
	}{{"redislock", newOurs}, {"redislock-durable", newOursDurable}, {"redislock-watched", newWatched}, {"bsm", newBSM}, {"redsync", newRedsync}, {"rueidis", newRueidis}, {"raw", newRaw}}
	out := benchresult.Interleaved{Rounds: rounds, Slot: slot.String()}
	setups := map[*benchresult.InterleavedEntry]setup{}
	add := func(sc *benchresult.InterleavedScenario, name string, nl newLocker, servers []string) {
		e := &benchresult.InterleavedEntry{Name: name, Nodes: len(servers)}
		sc.Entries = append(sc.Entries, e)
		setups[e] = setup{nl, servers}
	}
	for _, parallel := range []bool{false, true} {
		sc := &benchresult.InterleavedScenario{Name: "single/serial", Parallel: parallel, Reference: "bsm"}
		if parallel {
			sc.Name = "single/parallel"
		}
		for _, s := range singles {
			add(sc, s.name, s.open, addrs[:1])
		}
		out.Scenarios = append(out.Scenarios, sc)
	}
	rl := &benchresult.InterleavedScenario{Name: "redlock/serial", Reference: "redislock nodes=1"}
	for _, n := range redlockNodes {
		for _, im := range []struct {
			name string
			open newLocker
		}{{"redislock", newOurs}, {"redsync", newRedsync}} {
			add(rl, im.name+" nodes="+strconv.Itoa(n), im.open, addrs[:n])
		}
	}
	out.Scenarios = append(out.Scenarios, rl)
	// What waiting for the replicas costs a grant: a master with two
	// replicas, as the Sentinel and Cluster default waits for them all.
	replicated := &benchresult.InterleavedScenario{Name: "replicated/serial", Reference: "redislock wait=0"}
	master := []string{startReplicated(t, 2)}
	for _, w := range []struct {
		name string
		wait int
	}{{"0", 0}, {"1", 1}, {"all", redislock.WaitAllReplicas}} {
		add(replicated, "redislock wait="+w.name, newOursWaiting(w.wait), master)
	}
	out.Scenarios = append(out.Scenarios, replicated)

	for _, sc := range out.Scenarios {
		lockers := make([]locker, len(sc.Entries))
		for i, e := range sc.Entries {
			lockers[i] = open(t, setups[e].open, setups[e].addrs)
		}
		for r := range rounds {
			for k := range sc.Entries {
				i := (r + k) % len(sc.Entries) // each round starts one further on
				s, err := measure(lockers[i], setups[sc.Entries[i]].addrs, slot, sc.Parallel)
				if err != nil {
					t.Fatalf("%s %s round %d: %v", sc.Name, sc.Entries[i].Name, r, err)
				}
				if s.Ops == 0 || s.CPUUsPerOp <= 0 || s.ClientCPUUsPerOp <= 0 || len(s.Commands) == 0 {
					t.Fatalf("%s %s round %d: no work measured: %+v", sc.Name, sc.Entries[i].Name, r, s)
				}
				sc.Entries[i].Samples = append(sc.Entries[i].Samples, s)
			}
		}
	}
	for _, sc := range out.Scenarios {
		t.Logf("%s (median of %d rounds of %v):", sc.Name, rounds, slot)
		for _, e := range sc.Entries {
			t.Logf("  %-22s %9.0f ns/op %7.1f µs Redis CPU/op %7.1f µs client CPU/op", e.Name, median(e.Samples, func(s benchresult.InterleavedSample) float64 { return s.NsPerOp }),
				median(e.Samples, func(s benchresult.InterleavedSample) float64 { return s.CPUUsPerOp }), median(e.Samples, func(s benchresult.InterleavedSample) float64 { return s.ClientCPUUsPerOp }))
		}
	}
	if path := os.Getenv("INTERLEAVED_JSON"); path != "" {
		b, err := json.MarshalIndent(out, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// measure runs acquire+release on fresh keys for one slot and returns
// what it cost, per op.
func measure(l locker, addrs []string, slot time.Duration, parallel bool) (benchresult.InterleavedSample, error) {
	ctx := context.Background()
	before, err := serverCounters(ctx, addrs)
	if err != nil {
		return benchresult.InterleavedSample{}, err
	}
	var (
		ops      atomic.Int64
		firstErr error
		once     sync.Once
		mem      runtime.MemStats
	)
	runtime.ReadMemStats(&mem)
	mallocs := mem.Mallocs
	cpuBefore, err := processCPU()
	if err != nil {
		return benchresult.InterleavedSample{}, err
	}
	start := time.Now()
	deadline := start.Add(slot)
	work := func() {
		for time.Now().Before(deadline) {
			if err := l.acquireRelease(ctx, nextKey()); err != nil {
				once.Do(func() { firstErr = err })
				return
			}
			ops.Add(1)
		}
	}
	if parallel {
		var wg sync.WaitGroup
		for range 8 * runtime.GOMAXPROCS(0) {
			wg.Go(work)
		}
		wg.Wait()
	} else {
		work()
	}
	elapsed := time.Since(start)
	cpuAfter, err := processCPU()
	if err != nil {
		return benchresult.InterleavedSample{}, err
	}
	runtime.ReadMemStats(&mem)
	if firstErr != nil {
		return benchresult.InterleavedSample{}, firstErr
	}
	after, err := serverCounters(ctx, addrs)
	if err != nil {
		return benchresult.InterleavedSample{}, err
	}
	n := float64(ops.Load())
	s := benchresult.InterleavedSample{Ops: int(n), NsPerOp: float64(elapsed.Nanoseconds()) / n, CPUUsPerOp: (after.cpuUs - before.cpuUs) / n, ClientCPUUsPerOp: float64(cpuAfter-cpuBefore) / 1e3 / n, Commands: map[string]benchresult.CommandCost{}}
	if !parallel {
		s.AllocsPerOp = float64(mem.Mallocs-mallocs) / n
	}
	for cmd, a := range after.commands {
		b := before.commands[cmd]
		calls, usec := a.calls-b.calls, a.usec-b.usec
		if cmd == "info" && calls > 0 {
			// The first reading's INFO, one per node, is the
			// measurement's own (the second's is not counted yet):
			// take it out at the average cost of the slot's calls.
			own := min(int64(len(addrs)), calls)
			usec -= usec * own / calls
			calls -= own
		}
		if calls == 0 {
			continue
		}
		s.Commands[cmd] = benchresult.CommandCost{CallsPerOp: float64(calls) / n, UsPerOp: float64(usec) / n}
	}
	return s, nil
}

// processCPU is the CPU this process has used, user and system, every
// thread.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// counters are the servers' CPU and command counters, summed over nodes.
type counters struct {
	cpuUs    float64
	commands map[string]struct{ calls, usec int64 }
}

// serverCounters reads INFO cpu and INFO commandstats from every address.
func serverCounters(ctx context.Context, addrs []string) (counters, error) {
	c := counters{commands: map[string]struct{ calls, usec int64 }{}}
	for _, a := range addrs {
		rc := redis.NewClient(&redis.Options{Addr: a})
		info, err := rc.Info(ctx, "cpu", "commandstats").Result()
		_ = rc.Close()
		if err != nil {
			return c, fmt.Errorf("INFO on %s: %w", a, err)
		}
		if err := c.add(info); err != nil {
			return c, fmt.Errorf("INFO on %s: %w", a, err)
		}
	}
	return c, nil
}

// add adds the figures of an INFO reply with the cpu and commandstats
// sections to c.
func (c *counters) add(info string) error {
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%s: %w", line, err)
			}
			c.cpuUs += f * 1e6
		case strings.HasPrefix(k, "cmdstat_"):
			var calls, usec int64
			for _, f := range strings.Split(v, ",") {
				name, val, _ := strings.Cut(f, "=")
				switch name {
				case "calls":
					calls, _ = strconv.ParseInt(val, 10, 64)
				case "usec":
					usec, _ = strconv.ParseInt(val, 10, 64)
				}
			}
			cmd := strings.TrimPrefix(k, "cmdstat_")
			sum := c.commands[cmd]
			sum.calls += calls
			sum.usec += usec
			c.commands[cmd] = sum
		}
	}
	return nil
}

// median returns the median of f over samples.
func median(samples []benchresult.InterleavedSample, f func(benchresult.InterleavedSample) float64) float64 {
	vs := make([]float64, len(samples))
	for i, s := range samples {
		vs[i] = f(s)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a whole number of at least 1", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 500ms", name, v)
	}
	return d
}
