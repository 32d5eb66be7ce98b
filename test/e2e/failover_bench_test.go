package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/redislock/redislock/internal/testing/benchresult"
)

// TestFailoverBenchmark compares the sample operator's failover with a
// RedisLock against controller-runtime's Lease election, with the same
// durations: FAILOVER_TRIALS crashes (SIGKILL the leader) and as many
// graceful handovers (SIGTERM the leader), each timed to the next LEADING
// line, then the election's API-server writes over an idle window. It
// prints a markdown table, and writes every trial as JSON when asked.
// `make bench-failover` runs it, and `make bench` with a shorter setup.
//
//	FAILOVER_TRIALS      trials of each kind per method (required; 20 in make)
//	FAILOVER_DURATIONS   LeaseDuration,RenewDeadline,RetryPeriod (default
//	                     15s,10s,2s, controller-runtime's defaults); for
//	                     Redis the RedisLock's ttl,renewDeadline,renewInterval
//	FAILOVER_IDLE_WINDOW how long to count writes (default 60s)
//	FAILOVER_JSON        a file to write the results to, for
//	                     test/bench/cmd/benchreport (optional)
func TestFailoverBenchmark(t *testing.T) {
	trialsEnv := os.Getenv("FAILOVER_TRIALS")
	if trialsEnv == "" {
		t.Skip("FAILOVER_TRIALS is unset: the failover benchmark takes minutes; run `make bench-failover` or set FAILOVER_TRIALS=N")
	}
	trials, err := strconv.Atoi(trialsEnv)
	if err != nil || trials < 1 {
		t.Fatalf("FAILOVER_TRIALS=%q: want a positive number", trialsEnv)
	}
	d := parseDurations(t, "FAILOVER_DURATIONS", "15s,10s,2s")
	window, err := time.ParseDuration(envOr("FAILOVER_IDLE_WINDOW", "60s"))
	if err != nil || window <= 0 {
		t.Fatalf("FAILOVER_IDLE_WINDOW=%q: want a positive duration", os.Getenv("FAILOVER_IDLE_WINDOW"))
	}
	t.Logf("%d trials of each kind per method; LeaseDuration/ttl %v, RenewDeadline %v, RetryPeriod/renewInterval %v; settle %v; idle window %v",
		trials, d.lease, d.renew, d.retry, d.settle(), window)

	bin := goBuild(t, "./test/e2e/sampleoperator")
	var results []benchResult
	for _, method := range []string{"redis", "lease"} {
		t.Run(method, func(t *testing.T) {
			f, ns := methodFleet(t, bin, method, d)
			r := runBench(t, f, d, trials)
			r.method = method
			r.writesPerMin = electionWrites(t, ns, window)
			t.Logf("%s: election API writes over %v idle: %.1f/min", method, window, r.writesPerMin)
			results = append(results, r)
		})
	}
	if len(results) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nFailover, %d trials each; LeaseDuration %v, RenewDeadline %v, RetryPeriod %v (for Redis: ttl, renewDeadline, renewInterval)\n\n", trials, d.lease, d.renew, d.retry)
	b.WriteString("| method | trials | crash p50 | crash p99 (max when n<100) | graceful p50 | graceful p99 (max when n<100) | election API writes/min |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %v | %v | %v | %v | %.1f |\n", r.method, len(r.crash),
			pct(r.crash, 0.5), pct(r.crash, 0.99), pct(r.graceful, 0.5), pct(r.graceful, 0.99), r.writesPerMin)
	}
	fmt.Print(b.String())
	if path := os.Getenv("FAILOVER_JSON"); path != "" {
		writeFailoverJSON(t, path, trials, d, window, results)
	}
}

// timing is d as the benchmarks' JSON has it.
func (d durations) timing() benchresult.Timing {
	return benchresult.Timing{LeaseDuration: d.lease.String(), RenewDeadline: d.renew.String(), RetryPeriod: d.retry.String()}
}

// writeFailoverJSON writes every trial of results to path.
func writeFailoverJSON(t *testing.T, path string, trials int, d durations, window time.Duration, results []benchResult) {
	t.Helper()
	out := benchresult.Failover{Trials: trials, Timing: d.timing(), IdleWindow: window.String()}
	for _, r := range results {
		out.Methods = append(out.Methods, benchresult.FailoverMethod{Method: r.method, CrashSeconds: secondsOf(r.crash),
			GracefulSeconds: secondsOf(r.graceful), APIWritesPerMinute: r.writesPerMin})
	}
	writeJSON(t, path, out)
}

// writeJSON writes v, indented, to path.
func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("results written to %s", path)
}

// secondsOf returns ds in seconds.
func secondsOf(ds []time.Duration) []float64 {
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = d.Seconds()
	}
	return s
}

type benchResult struct {
	method          string
	crash, graceful []time.Duration
	writesPerMin    float64
}

// runBench starts three replicas on f, then runs trials crashes and trials
// graceful handovers, alternating; after each it starts a replacement and
// lets the fleet settle.
func runBench(t *testing.T, f *fleet, d durations, trials int) benchResult {
	for i := 1; i <= 3; i++ {
		f.start(fmt.Sprintf("replica-%d", i))
	}
	f.waitLeading(0, "", 30*time.Second)
	f.waitStarted(3, 30*time.Second)
	f.settle(d.settle())

	var r benchResult
	within := d.lease + 3*d.retry + 5*time.Second // only to fail, not to judge
	next := 4
	for i := 1; i <= trials; i++ {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
			took, e := f.trial(sig, within)
			kind := "crash"
			if sig == syscall.SIGKILL {
				r.crash = append(r.crash, took)
			} else {
				kind = "graceful"
				r.graceful = append(r.graceful, took)
			}
			t.Logf("trial %d %s: %s leads after %v", i, kind, e.id, took.Round(time.Millisecond))

			id := fmt.Sprintf("replica-%d", next)
			next++
			from := f.mark()
			f.start(id)
			f.waitEvent(from, 30*time.Second, "STARTED from "+id, func(e event) bool { return e.kind == "STARTED" && e.id == id })
			f.settle(d.settle())
		}
	}
	f.checkOneLeader()
	return r
}

// electionWrites counts, over window, the writes to Lease and RedisLock
// objects in ns (what leader election writes to the API server), per
// minute. The fleet keeps running meanwhile, with no failover.
func electionWrites(t *testing.T, ns string, window time.Duration) float64 {
	t.Helper()
	stop := countElectionWrites(t, ns)
	pause(window)
	n, took := stop()
	return float64(n) * float64(time.Minute) / float64(took)
}

// countElectionWrites starts counting the writes to Lease and RedisLock
// objects in ns; stop ends it and returns the count and how long it ran.
func countElectionWrites(t *testing.T, ns string) (stop func() (int, time.Duration)) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gvrs := []schema.GroupVersionResource{
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
		{Group: "redislock.io", Version: "v1alpha1", Resource: "redislocks"},
	}
	counts := make(chan int, len(gvrs))
	for _, gvr := range gvrs {
		list, err := dc.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			cancel()
			t.Fatalf("list %s in %s: %v", gvr.Resource, ns, err)
		}
		rv := list.GetResourceVersion()
		go func() {
			n := 0
			defer func() { counts <- n }()
			for ctx.Err() == nil {
				w, err := dc.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("watch %s in %s: %v", gvr.Resource, ns, err)
					}
					return
				}
				for ev := range w.ResultChan() {
					switch ev.Type {
					case watch.Added, watch.Modified, watch.Deleted:
						n++
						if m, err := meta.Accessor(ev.Object); err == nil {
							rv = m.GetResourceVersion()
						}
					case watch.Error:
						if ctx.Err() != nil {
							return // stopped: the stream ends with the cancellation
						}
						t.Errorf("watch %s in %s: %v", gvr.Resource, ns, ev.Object)
						w.Stop()
						return
					}
				}
				w.Stop()
			}
		}()
	}
	started := time.Now()
	return func() (int, time.Duration) {
		took := time.Since(started)
		cancel()
		total := 0
		for range gvrs {
			total += <-counts
		}
		return total, took
	}
}

// parseDurations reads LeaseDuration,RenewDeadline,RetryPeriod from the
// environment variable key, def when it is unset.
func parseDurations(t *testing.T, key, def string) durations {
	t.Helper()
	s := envOr(key, def)
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		t.Fatalf("%s=%q: want LeaseDuration,RenewDeadline,RetryPeriod", key, s)
	}
	var ds [3]time.Duration
	for i, p := range parts {
		v, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || v <= 0 {
			t.Fatalf("%s=%q: %q is no positive duration", key, s, p)
		}
		ds[i] = v
	}
	d := durations{lease: ds[0], renew: ds[1], retry: ds[2]}
	if d.retry >= d.renew || d.renew >= d.lease {
		t.Fatalf("%s=%q: want RetryPeriod < RenewDeadline < LeaseDuration", key, s)
	}
	return d
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// pct returns the p-quantile of ds by nearest rank (the maximum when
// len(ds) < 1/(1-p)).
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))].Round(time.Millisecond)
}
