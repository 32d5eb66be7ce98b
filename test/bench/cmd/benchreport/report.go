package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// report is everything REPORT.md shows; failover, outage, steady,
// controller, hostile, waiters, events and fencing are nil when that part was not run, and elapsed is 0 when
// it is not known (a report of parts run separately).
type report struct {
	bench      results
	il         *interleaved
	failover   *failover
	outage     *outage
	steady     *steadyState
	controller *controllerScale
	hostile    *hostileTenants
	waiters    *waiters
	events     *clusterEvents
	fencing    *fencing
	sharding   *sharding
	chaos      *shardedChaos
	machine    machine
	source     string
	command    string
	elapsed    time.Duration
	date       time.Time
}

// plotFile is one PNG of the report.
type plotFile struct {
	name string
	draw func(path string) error
}

// write writes REPORT.md and its plots into dir.
func (rp report) write(dir string) error {
	plots := map[string]plotFile{
		"throughput": {"throughput.png", func(p string) error { return plotThroughput(p, rp.bench) }},
		"redlock":    {"redlock.png", func(p string) error { return plotRedlock(p, rp.bench) }},
	}
	if f := rp.failover; f != nil {
		plots["failover"] = plotFile{"failover.png", func(p string) error { return plotFailover(p, *f) }}
		plots["apiwrites"] = plotFile{"api-writes.png", func(p string) error { return plotAPIWrites(p, *f) }}
	}
	if o := rp.outage; o != nil {
		plots["outage"] = plotFile{"outage.png", func(p string) error { return plotOutage(p, *o) }}
	}
	if c := rp.controller; c != nil && len(c.Runs) > 0 {
		plots["scale"] = plotFile{"controller-scale.png", func(p string) error { return plotScale(p, *c) }}
	}
	if sh := rp.sharding; sh != nil && len(sh.Sides) > 0 {
		plots["sharding"] = plotFile{"shard-moves.png", func(p string) error { return plotSharding(p, *sh) }}
	}
	for _, pf := range plots {
		if err := pf.draw(filepath.Join(dir, pf.name)); err != nil {
			return fmt.Errorf("plot %s: %w", pf.name, err)
		}
	}
	var md strings.Builder
	rp.markdown(&md, plots)
	return os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(md.String()), 0o644)
}

// markdown writes the report, linking the plots by key.
func (rp report) markdown(w *strings.Builder, plots map[string]plotFile) {
	img := func(key, alt string) {
		if pf, ok := plots[key]; ok {
			fmt.Fprintf(w, "\n![%s](%s)\n", alt, pf.name)
		}
	}
	m := rp.machine
	fmt.Fprintln(w, "# Benchmark report")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Written by `%s` on %s", rp.command, rp.date.UTC().Format("2006-01-02 15:04 MST"))
	if rp.elapsed > 0 {
		fmt.Fprintf(w, "; the run took %v", rp.elapsed.Round(time.Second))
	}
	fmt.Fprintln(w, ". The inputs are next to this file: `interleaved.json` (TestInterleaved of `test/bench`), `bench.txt` (`go test -bench` output of `test/bench`), `failover.json`, `outage.json`, `steady.json`, `controller.json`, `hostile.json`, `waiters.json`, `clusterevents.json`, `fencing.json`, `sharding.json`, `sharded-chaos.json`.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The numbers are from this one machine; they move with it, so compare ratios within a run.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| CPU | cores | kernel | Go | Redis | commit (`git describe --dirty`) |")
	fmt.Fprintln(w, "|---|---:|---|---|---|---|")
	fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", m.cpu, m.cores, m.kernel, m.goVersion, m.redis, rp.source)

	fmt.Fprintln(w, "\n## Lock cost, interleaved: wall time and Redis CPU per acquire+release")
	fmt.Fprintln(w)
	if rp.il != nil {
		writeInterleaved(w, rp.il)
		fmt.Fprintln(w, "\n### What the server runs per acquire+release (one node, serial)")
		fmt.Fprintln(w)
		writeCommands(w, rp.il)
		fmt.Fprintln(w, "\n## Targets")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "On the interleaved figures; PASS when the median meets the target.")
		fmt.Fprintln(w)
		writeTargets(w, rp.il, m.cores)
	} else {
		fmt.Fprintln(w, "Not run (no interleaved.json).")
	}

	fmt.Fprintln(w, "\n## Lock throughput: one redis-server (`go test -bench`)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Acquire+release of a fresh key; serial is one goroutine, parallel 8×GOMAXPROCS; medians of the `-count` runs. The last two columns are redislock's throughput as a multiple of each implementation's (above 1: redislock is faster).")
	fmt.Fprintln(w)
	writeThroughput(w, rp.bench)
	img("throughput", "throughput")

	fmt.Fprintln(w, "\n## Redlock latency against the number of nodes")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Acquire+release over N independent redis-servers, a majority granting; with one node it is a single-instance lock.")
	fmt.Fprintln(w)
	writeRedlock(w, rp.bench)
	img("redlock", "Redlock latency against nodes")

	fmt.Fprintln(w, "\n## One lock, every goroutine waiting for it")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "rueidislock's own benchmark (its README: `RunParallel`, GOMAXPROCS goroutines each taking and releasing the same lock): redislock's `ObtainWait`, woken by the holder's release; rueidislock's `WithContext`; bsm, which cannot wait, retried at once on `ErrNotObtained` as that README does. Medians of the `-count` runs.")
	fmt.Fprintln(w)
	writeOneLock(w, rp.bench)

	fmt.Fprintln(w, "\n### Ratios of the `go test -bench` figures")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Not noise-robust: each sub-benchmark runs at its own moment, and the machine's load moves in between; the Targets above are the verdict.")
	fmt.Fprintln(w)
	writeChecks(w, rp.bench)

	fmt.Fprintln(w, "\n## Failover and handover: Redis plugin against Lease")
	fmt.Fprintln(w)
	if f := rp.failover; f != nil {
		fmt.Fprintf(w, "Three replicas of `test/e2e/sampleoperator` against an envtest API server; %d trials each of kill -9 (crash) and SIGTERM (graceful) of the leader, timed to the next replica's LEADING line. Both methods with the same timing: %s. API writes are the election's writes to Leases and RedisLocks over %s of an idle fleet.\n",
			f.Trials, f.Timing, f.IdleWindow)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| method | crash p50 | crash p90 | crash max | graceful p50 | graceful p90 | graceful max | election API writes/min |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, mt := range f.Methods {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %.1f |\n", methodLabel(mt.Method),
				seconds(quantile(mt.CrashSeconds, 0.5)), seconds(quantile(mt.CrashSeconds, 0.9)), seconds(quantile(mt.CrashSeconds, 1)),
				seconds(quantile(mt.GracefulSeconds, 0.5)), seconds(quantile(mt.GracefulSeconds, 0.9)), seconds(quantile(mt.GracefulSeconds, 1)),
				mt.APIWritesPerMinute)
		}
		img("failover", "failover and handover times")
		img("apiwrites", "election API writes per minute")
	} else {
		fmt.Fprintln(w, "Not run (no failover.json).")
	}

	fmt.Fprintln(w, "\n## Through an API-server outage: Redis plugin against Lease")
	fmt.Fprintln(w)
	if o := rp.outage; o != nil {
		fmt.Fprintf(w, "%d replicas of `test/e2e/sampleoperator` per method against an envtest API server; kube-apiserver stopped (SIGSTOP) for %s, then resumed; exited replicas restarted as a kubelet would (after %s, doubling). \"Time with no leader\" is from the stop on, while no replica led; \"API back to first reconcile\" is from the resume to the leader's write for a ConfigMap changed once the API answered. Both methods with the same timing: %s. The run fails unless the RedisLock's leader led throughout and Lease's leader exited.\n",
			o.Replicas, o.Outage, o.RestartBackoff, o.Timing)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| method | leader kept leading | leadership changes | exits | restarts | time with no leader | API back to first reconcile |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
		for _, m := range o.Methods {
			fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %s | %s |\n", methodLabel(m.Method), yesNo(m.LeaderKeptLeading),
				m.LeaderChanges, m.Exits, m.Restarts, seconds(m.NoLeaderSeconds), seconds(m.FirstReconcileSeconds))
		}
		img("outage", "time with no leader and to the first reconcile, through the outage")
	} else {
		fmt.Fprintln(w, "Not run (no outage.json).")
	}

	fmt.Fprintln(w, "\n## Steady state: what an election costs, Redis agent and plugin against Lease")
	fmt.Fprintln(w)
	if st := rp.steady; st != nil {
		fmt.Fprintf(w, "N candidates of one election against an envtest API server, counted over %s once a leader settled (the rates use the measured time; the run fails if the leader changed). Redis agent: `redislock agent` processes, as the webhook injects them; Redis plugin: `test/e2e/sampleoperator` with `pkg/election`; Lease: the same operator with controller-runtime's Lease election. All three with the same timing: %s. ",
			st.Window, st.Timing)
		fmt.Fprintln(w, "Redis: every command the one redis-server ran (`INFO commandstats`, the commands scripts run counted too), the `redislock controller`'s (which shows the holder) included; scripts are the lock operations, against E1's natural rate (the leader's renewal per renewInterval, one attempt per ttl from each standby and from the controller). API: kube-apiserver's own `apiserver_request_total` on Leases, RedisLocks, Events, Pods and Secrets, the same count for every method: writes are create, update, patch and delete; reads are get, list and watch (a watch counts when it ends). The API server runs without its identity Lease, so it makes no requests of its own there; \"no election\" is the control: the same count with nothing running.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| method | candidates | Redis commands/s | Redis scripts/s | E1 natural scripts/s | API writes/min | API reads/min |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
		for _, c := range st.Cases {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %.1f | %.1f |\n", methodLabel(c.Method), c.Candidates,
				rate(c.RedisCommandsPerSecond), rate(c.RedisScriptsPerSecond), rate(c.NaturalScriptsPerSecond),
				c.APIWritesPerMinute, c.APIReadsPerMinute)
		}
	} else {
		fmt.Fprintln(w, "Not run (no steady.json).")
	}

	fmt.Fprintln(w, "\n## The controller at scale")
	fmt.Fprintln(w)
	if c := rp.controller; c != nil {
		writeController(w, c, m.cores)
		img("scale", "Ready time and RSS against the count of RedisLocks")
	} else {
		fmt.Fprintln(w, "Not run (no controller.json).")
	}

	fmt.Fprintln(w, "\n## The controller among hostile tenants")
	fmt.Fprintln(w)
	if h := rp.hostile; h != nil {
		writeHostile(w, h)
	} else {
		fmt.Fprintln(w, "Not run (no hostile.json).")
	}

	fmt.Fprintln(w, "\n## Many waiters on one Client")
	fmt.Fprintln(w)
	if wt := rp.waiters; wt != nil {
		writeWaiters(w, wt)
	} else {
		fmt.Fprintln(w, "Not run (no waiters.json).")
	}

	fmt.Fprintln(w, "\n## The API server refuses a deposed leader (fencing)")
	fmt.Fprintln(w)
	if f := rp.fencing; f != nil {
		writeFencing(w, f)
	} else {
		fmt.Fprintln(w, "Not run (no fencing.json).")
	}

	fmt.Fprintln(w, "\n## Sharded leadership against a Lease per bucket")
	fmt.Fprintln(w)
	if sh := rp.sharding; sh != nil {
		writeSharding(w, sh)
		img("sharding", "shards moved over time, on a scale up and a crash")
	} else {
		fmt.Fprintln(w, "Not run (no sharding.json).")
	}
	fmt.Fprintln(w, "\n### The sharded operator under faults")
	fmt.Fprintln(w)
	if c := rp.chaos; c != nil {
		writeShardedChaos(w, c)
	} else {
		fmt.Fprintln(w, "Not run (no sharded-chaos.json).")
	}

	fmt.Fprintln(w, "\n## Lock events on a Redis Cluster")
	fmt.Fprintln(w)
	if ev := rp.events; ev != nil {
		writeClusterEvents(w, ev)
	} else {
		fmt.Fprintln(w, "Not run (no clusterevents.json).")
	}
}
