package main

import (
	"fmt"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// The goals of issue 32 for the controller at goalLocks RedisLocks, and
// for a Client's waiters.
const (
	goalLocks          = 10000
	goalReadySeconds   = 60
	goalRSSBytes       = 150 << 20
	goalLagP99Seconds  = 0.100
	goalIdleAPIPerMin  = 1000
	goalHandoverFactor = 2 // a waiter's handover p99 against a single waiter's
)

// verdict is PASS when ok, else MISS.
func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// writeController writes the controller's table, and its goals at
// goalLocks for each backend that ran that many, with what bounds the time
// to Ready on this machine's cores.
func writeController(w *strings.Builder, c *controllerScale, cores int) {
	fmt.Fprintf(w, "The `redislock controller` binary (`-resync` %s) with each count of RedisLocks in %d namespaces, on one redis-server (single) and on a Redis Cluster of 3 masters with a replica each (cluster: Cluster mode, waiting for the replica), with a controller of its own for each count. Every lock names a password Secret. Ready is from the controller's start, the locks already there, to every lock Ready=True. Memory is read at the end: RSS and peak RSS (VmRSS, VmHWM) from /proc, the Go heap from `go_memstats_heap_inuse_bytes`. API: kube-apiserver's own `apiserver_request_total` on RedisLocks, RedisConnections, ClusterRedisConnections, Secrets and Events, every verb, over %s idle (the sample locks held), then over as long again with %d handovers a minute. Lag: for each of those handovers, from the start of the holder's release to a watch on RedisLocks showing the next holder, which obtained the lock as the release returned.\n\n",
		c.Resync, c.Namespaces, c.Window, c.HandoversPerMinute)
	fmt.Fprintln(w, "| backend | RedisLocks | Ready after start | RSS | peak RSS | Go heap | API/min idle | API/min, handovers | lag p50 | lag p99 | lag max |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range c.Runs {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %.0f | %.0f | %s | %s | %s |\n", r.Backend, r.Locks, seconds(r.ReadySeconds),
			mib(r.RSSBytes), mib(r.PeakRSSBytes), mib(r.HeapInuseBytes), r.IdleAPIPerMinute, r.HandoverAPIPerMinute,
			seconds(quantile(r.LagSeconds, 0.5)), seconds(quantile(r.LagSeconds, 0.99)), seconds(quantile(r.LagSeconds, 1)))
	}
	fmt.Fprintf(w, "\n### Goals at %d RedisLocks\n\n", goalLocks)
	fmt.Fprintln(w, "| backend | goal | measured | verdict | what bounds it, in the same run |")
	fmt.Fprintln(w, "|---|---|---:|---|---|")
	found := false
	for _, r := range c.Runs {
		if r.Locks != goalLocks {
			continue
		}
		found = true
		p99 := quantile(r.LagSeconds, 0.99)
		fmt.Fprintf(w, "| %s | Ready ≤ %ds after a start | %s | %s | %s |\n", r.Backend, goalReadySeconds, seconds(r.ReadySeconds), verdict(r.ReadySeconds <= goalReadySeconds), readyBound(r, cores))
		fmt.Fprintf(w, "| %s | peak RSS ≤ %s | %s | %s | – |\n", r.Backend, mib(goalRSSBytes), mib(r.PeakRSSBytes), verdict(r.PeakRSSBytes <= goalRSSBytes))
		fmt.Fprintf(w, "| %s | lag p99 ≤ %s | %s | %s | – |\n", r.Backend, seconds(goalLagP99Seconds), seconds(p99), verdict(p99 <= goalLagP99Seconds))
		fmt.Fprintf(w, "| %s | idle API requests ≤ %d a minute | %.0f | %s | – |\n", r.Backend, goalIdleAPIPerMin, r.IdleAPIPerMinute, verdict(r.IdleAPIPerMinute <= goalIdleAPIPerMin))
	}
	if !found {
		fmt.Fprintf(w, "| – | no run with %d RedisLocks | – | n/a | – |\n", goalLocks)
	}
}

// readyBound says what the time to Ready cost the API server (each lock
// needs its first status written) and the machine: the CPU of
// kube-apiserver, etcd and the controller together, over its cores.
func readyBound(r controllerRun, cores int) string {
	if r.ReadyAPIWrites == 0 {
		return "– (not measured)"
	}
	all := r.ReadyAPIServerCPUSeconds + r.ReadyEtcdCPUSeconds + r.ReadyControllerCPUSeconds
	return fmt.Sprintf("%.0f API writes for %d locks; kube-apiserver ran %.1fs of CPU meanwhile, %.1fms a write, etcd %.1fs, the controller %.1fs: together %.1fs, %.1fs over %d cores",
		r.ReadyAPIWrites, r.Locks, r.ReadyAPIServerCPUSeconds, 1e3*r.ReadyAPIServerCPUSeconds/r.ReadyAPIWrites, r.ReadyEtcdCPUSeconds, r.ReadyControllerCPUSeconds, all, all/float64(cores), cores)
}

// The goals of issue 40 for the controller's other tenants while one
// tenant's locks point at hostile servers.
const (
	goalHostileNewReadySeconds = 2
	goalHostileLagFactor       = 2 // hostile lag p99 against quiet
)

// writeHostile writes the quiet and hostile phases of the controller, and
// their goals.
func writeHostile(w *strings.Builder, h *hostileTenants) {
	fmt.Fprintf(w, "The `redislock controller` binary at its defaults with %d RedisLocks of other tenants on one redis-server, in two phases: quiet, those locks alone; hostile, once one tenant has added %d locks on a server that accepts connections and never answers (nodeTimeout 4s to 5s, a connection config each, so a breaker each) and one lock on a server that answers every command with a 100 GB bulk header. In each phase %d of the other tenants' locks are handed over, one every %s, and the lag timed as in the table above; peak RSS is VmHWM at the end of the phase. New lock Ready: a lock of another namespace created in the hostile phase, from its create to a watch showing it Ready.\n\n",
		h.Healthy, h.BlackHoles, h.Handovers, h.Every)
	fmt.Fprintln(w, "| phase | peak RSS | lag p50 | lag p99 | lag max | new lock Ready |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| quiet | %s | %s | %s | %s | – |\n", mib(h.QuietPeakRSSBytes),
		seconds(quantile(h.QuietLagSeconds, 0.5)), seconds(quantile(h.QuietLagSeconds, 0.99)), seconds(quantile(h.QuietLagSeconds, 1)))
	fmt.Fprintf(w, "| hostile | %s | %s | %s | %s | %s |\n", mib(h.HostilePeakRSSBytes),
		seconds(quantile(h.HostileLagSeconds, 0.5)), seconds(quantile(h.HostileLagSeconds, 0.99)), seconds(quantile(h.HostileLagSeconds, 1)), seconds(h.NewLockReadySeconds))
	fmt.Fprintf(w, "\nBy the end, the black-hole server had accepted %d connections, and %d of the tenant's %d locks had a status (each of hers waits its turn among her own; she holds at most all workers but one).\n\n",
		h.BlackHoleConnections, h.BlackHolesShown, h.BlackHoles)
	quiet, hostileP99 := quantile(h.QuietLagSeconds, 0.99), quantile(h.HostileLagSeconds, 0.99)
	fmt.Fprintln(w, "| goal | measured | verdict |")
	fmt.Fprintln(w, "|---|---:|---|")
	fmt.Fprintf(w, "| another namespace's new lock Ready ≤ %ds | %s | %s |\n", goalHostileNewReadySeconds, seconds(h.NewLockReadySeconds), verdict(h.NewLockReadySeconds <= goalHostileNewReadySeconds))
	fmt.Fprintf(w, "| lag p99 ≤ %d× quiet | %.2f× | %s |\n", goalHostileLagFactor, hostileP99/quiet, verdict(hostileP99 <= goalHostileLagFactor*quiet))
}

// plotScale draws Ready time and peak RSS against the count of RedisLocks,
// a line per backend.
func plotScale(path string, c controllerScale) error {
	ready, rss := plot.New(), plot.New()
	ready.Title.Text, rss.Title.Text = "Ready after the controller's start", "Controller peak RSS"
	ready.Y.Label.Text, rss.Y.Label.Text = "s", "MiB"
	var readyLines, rssLines []any
	var counts []int
	for _, b := range backends(c) {
		var r, m plotter.XYs
		for _, run := range c.Runs {
			if run.Backend == b {
				r = append(r, plotter.XY{X: float64(run.Locks), Y: run.ReadySeconds})
				m = append(m, plotter.XY{X: float64(run.Locks), Y: float64(run.PeakRSSBytes) / (1 << 20)})
				counts = append(counts, run.Locks)
			}
		}
		readyLines, rssLines = append(readyLines, b, r), append(rssLines, b, m)
	}
	if err := plotutil.AddLinePoints(ready, readyLines...); err != nil {
		return err
	}
	if err := plotutil.AddLinePoints(rss, rssLines...); err != nil {
		return err
	}
	slices.Sort(counts)
	counts = slices.Compact(counts)
	for _, p := range []*plot.Plot{ready, rss} {
		p.X.Label.Text = "RedisLocks"
		p.X.Tick.Marker = nodeTicks(counts)
		p.Y.Min = 0
		p.Legend.Top, p.Legend.Left = true, true
	}
	return savePNG(path, ready, rss)
}

// backends lists the runs' backends in their order.
func backends(c controllerScale) []string {
	var bs []string
	for _, r := range c.Runs {
		if !slices.Contains(bs, r.Backend) {
			bs = append(bs, r.Backend)
		}
	}
	return bs
}

// writeWaiters writes the waiters' table and goals: the first scenario
// is the single waiter, the reference.
func writeWaiters(w *strings.Builder, wt *waiters) {
	fmt.Fprintf(w, "`ObtainWait` waiters on one `Client` against one redis-server (TestWaiters of `test/bench`); another Client holds every name. A handover is a release, timed until a waiter's `ObtainWait` returns the lock; %d handovers per scenario, one of each scenario per round, in an order that starts one further each round. Connections: the waiting Client's, by client name in `CLIENT LIST`, once every waiter waits (pool: its go-redis pool size). Client memory: what the waiters added to the heap and stacks in use. Redis CPU and scripts: per handover, until every waiter it woke had tried (medians).\n\n", wt.Handovers)
	fmt.Fprintln(w, "| scenario | waiters | names | connections (pool) | pub/sub | client memory | handover p50 | handover p99 | p99 ÷ single's | Redis CPU/handover | scripts/handover |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	if len(wt.Scenarios) == 0 {
		return
	}
	ref := quantile(wt.Scenarios[0].HandoverSeconds, 0.99)
	for _, sc := range wt.Scenarios {
		p99 := quantile(sc.HandoverSeconds, 0.99)
		scripts := make([]float64, len(sc.Scripts))
		for i, n := range sc.Scripts {
			scripts[i] = float64(n)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d (%d) | %d | %s | %s | %s | %.2f | %.0f µs | %.0f |\n", sc.Name, sc.Waiters, sc.Names,
			sc.Connections, sc.PoolSize, sc.PubSubConnections, mib(sc.ClientBytes),
			micros(quantile(sc.HandoverSeconds, 0.5)), micros(p99), p99/ref, quantile(sc.RedisCPUSeconds, 0.5)*1e6, quantile(scripts, 0.5))
	}
	fmt.Fprintln(w, "\n### Goals for the waiters")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | goal | measured | verdict |")
	fmt.Fprintln(w, "|---|---|---:|---|")
	for _, sc := range wt.Scenarios[1:] {
		p99 := quantile(sc.HandoverSeconds, 0.99)
		fmt.Fprintf(w, "| %s | connections ≤ pool size + 1 subscription | %d (pool %d) | %s |\n", sc.Name, sc.Connections, sc.PoolSize, verdict(sc.Connections <= sc.PoolSize+1))
		fmt.Fprintf(w, "| %s | handover p99 ≤ %d× the single waiter's (%s) | %s | %s |\n", sc.Name, goalHandoverFactor, micros(ref), micros(p99), verdict(p99 <= goalHandoverFactor*ref))
	}
}

// micros formats seconds as whole microseconds.
func micros(v float64) string { return fmt.Sprintf("%.0f µs", v*1e6) }

// writeClusterEvents writes the cluster-bus table and its goal: a lock's
// events reach only its own shard's replicas.
func writeClusterEvents(w *strings.Builder, ev *clusterEvents) {
	nodes := ev.Masters * (1 + ev.Replicas)
	fmt.Fprintf(w, "%d grants and releases of %d lock names on a Redis Cluster of %d masters with %d replica each (TestClusterEvents of `test/bench`): the pub/sub messages the nodes sent each other on the cluster bus (`cluster_stats_messages_publish*_sent` of `CLUSTER INFO`, summed over the nodes), and how many nodes received any. The broadcast case publishes the same messages on the same channels with `PUBLISH`, as the scripts did before they used `SPUBLISH` on a Cluster.\n\n", ev.Cycles, ev.Cycles, ev.Masters, ev.Replicas)
	fmt.Fprintln(w, "| how | events | bus messages | per event | nodes reached |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, c := range ev.Cases {
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %d of %d |\n", c.Name, c.Events, c.BusMessages, float64(c.BusMessages)/float64(c.Events), c.NodesReached, nodes)
	}
	if len(ev.Cases) == 0 {
		return
	}
	last := ev.Cases[len(ev.Cases)-1]
	per := float64(last.BusMessages) / float64(last.Events)
	fmt.Fprintln(w, "\n| goal | measured | verdict |")
	fmt.Fprintln(w, "|---|---:|---|")
	fmt.Fprintf(w, "| a grant or release reaches only its shard: ≤ %d bus message (its replicas) per event | %.2f | %s |\n", ev.Replicas, per, verdict(per <= float64(ev.Replicas)))
}
