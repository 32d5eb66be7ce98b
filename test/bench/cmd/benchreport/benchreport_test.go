package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const benchOut = `goos: linux
pkg: github.com/redislock/redislock/test/bench
BenchmarkAcquireRelease/redislock/serial-2   	    8000	    150000 ns/op	    1546 B/op	      24 allocs/op
BenchmarkAcquireRelease/redislock/serial-2   	    8000	    130000 ns/op	    1546 B/op	      24 allocs/op
BenchmarkAcquireRelease/redislock/serial-2   	    8000	    140000 ns/op	    1546 B/op	      24 allocs/op
BenchmarkAcquireRelease/bsm/serial-2         	    8000	    280000 ns/op	    1200 B/op	      20 allocs/op
BenchmarkRedlock/nodes=1/redislock/serial-2  	     300	    100000 ns/op	    1546 B/op	      24 allocs/op
BenchmarkRedlock/nodes=7/redislock/serial-2  	     300	    700000 ns/op	    7676 B/op	     134 allocs/op
BenchmarkRedlock/nodes=7/redsync/serial-2    	     300	    800000 ns/op	    7416 B/op	     199 allocs/op
PASS
`

func TestParseTakesTheMedianPerNameAndUnit(t *testing.T) {
	r, err := parse(strings.NewReader(benchOut))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.get(single+"redislock/serial", ns); v != 140000 {
		t.Errorf("median ns/op = %v, want 140000", v)
	}
	if v, _ := r.get(single+"redislock/serial", allocs); v != 24 {
		t.Errorf("allocs/op = %v, want 24", v)
	}
	if _, ok := r.get(single+"raw/serial", ns); ok {
		t.Error("a benchmark not in the output has a value")
	}
	if got := r.redlockNodes(); len(got) != 2 || got[0] != 1 || got[1] != 7 {
		t.Errorf("redlockNodes = %v, want [1 7]", got)
	}
	if got := ratioCell(r, single+"bsm/serial", single+"redislock/serial"); got != "2.00×" {
		t.Errorf("redislock ÷ bsm throughput = %s, want 2.00×", got)
	}
}

func TestParseRejectsOutputWithoutResults(t *testing.T) {
	if _, err := parse(strings.NewReader("FAIL\n")); err == nil {
		t.Error("parse accepted output with no benchmark results")
	}
}

func TestQuantileIsTheNearestRank(t *testing.T) {
	vs := []float64{5, 1, 4, 2, 3}
	tests := []struct {
		p    float64
		want float64
	}{{0.5, 3}, {0.9, 5}, {0.99, 5}, {1, 5}, {0.2, 1}}
	for _, tt := range tests {
		if got := quantile(vs, tt.p); got != tt.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", vs, tt.p, got, tt.want)
		}
	}
	if got := quantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
}

func TestReportHasEverySectionAndPlot(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.txt"), []byte(benchOut), 0o600); err != nil {
		t.Fatal(err)
	}
	write("failover.json", failover{Trials: 3, Timing: timing{LeaseDuration: "4s", RenewDeadline: "3s", RetryPeriod: "1s"}, IdleWindow: "30s", Methods: []failoverMethod{
		{Method: "redis", CrashSeconds: []float64{3.9, 4.0, 4.1}, GracefulSeconds: []float64{0.004, 0.003, 0}, APIWritesPerMinute: 0},
		{Method: "lease", CrashSeconds: []float64{5.1, 6.2, 7.3}, GracefulSeconds: []float64{1.1, 1.2, 2.1}, APIWritesPerMinute: 60},
	}})
	write("outage.json", outage{Outage: "30s", Replicas: 3, RestartBackoff: "10s", Timing: timing{LeaseDuration: "3s", RenewDeadline: "2s", RetryPeriod: "500ms"}, Methods: []outageMethod{
		{Method: "lease", LeaderChanges: 1, Exits: 1, Restarts: 1, NoLeaderSeconds: 27.638, FirstReconcileSeconds: 1.106},
		{Method: "redis", LeaderKeptLeading: true, FirstReconcileSeconds: 0.0798},
	}})
	f := func(v float64) *float64 { return &v }
	write("steady.json", steadyState{Window: "60s", Timing: timing{LeaseDuration: "15s", RenewDeadline: "10s", RetryPeriod: "2s"}, Cases: []steadyCase{
		{Method: "none", Seconds: 60.01},
		{Method: "agent", Candidates: 5, Seconds: 60.02, RedisCommandsPerSecond: f(1.234), RedisScriptsPerSecond: f(0.9), NaturalScriptsPerSecond: f(0.833), APIReadsPerMinute: 2},
		{Method: "plugin", Candidates: 20, Seconds: 60.03, RedisCommandsPerSecond: f(2.5), RedisScriptsPerSecond: f(1.8), NaturalScriptsPerSecond: f(1.833), APIReadsPerMinute: 2},
		{Method: "lease", Candidates: 20, Seconds: 60.04, APIWritesPerMinute: 30, APIReadsPerMinute: 600},
	}})
	write("controller.json", controllerScale{Namespaces: 10, Resync: "30s", Window: "60s", HandoversPerMinute: 100, Runs: []controllerRun{
		{Backend: "single", Locks: 1000, ReadySeconds: 12.5, RSSBytes: 80 << 20, PeakRSSBytes: 90 << 20, HeapInuseBytes: 30 << 20, IdleAPIPerMinute: 2, HandoverAPIPerMinute: 210, LagSeconds: []float64{0.01, 0.02, 0.2}},
		{Backend: "single", Locks: 10000, ReadySeconds: 50, ReadyAPIWrites: 10040, ReadyAPIServerCPUSeconds: 60, ReadyEtcdCPUSeconds: 8, ReadyControllerCPUSeconds: 12, RSSBytes: 140 << 20, PeakRSSBytes: 160 << 20, HeapInuseBytes: 60 << 20, IdleAPIPerMinute: 20, HandoverAPIPerMinute: 230, LagSeconds: []float64{0.01, 0.02, 0.05}},
	}})
	write("hostile.json", hostileTenants{Healthy: 100, BlackHoles: 1000, Handovers: 3, Every: "500ms",
		QuietLagSeconds: []float64{0.01, 0.02, 0.03}, QuietPeakRSSBytes: 40 << 20,
		HostileLagSeconds: []float64{0.01, 0.02, 0.09}, HostilePeakRSSBytes: 70 << 20,
		NewLockReadySeconds: 0.5, BlackHoleConnections: 12, BlackHolesShown: 40})
	write("waiters.json", waiters{Handovers: 2, Scenarios: []*waitersScenario{
		{Name: "single", Waiters: 1, Names: 1, Connections: 2, PubSubConnections: 1, PoolSize: 20, ClientBytes: 1 << 20, HandoverSeconds: []float64{0.0004, 0.0005}, RedisCPUSeconds: []float64{0.0002, 0.0003}, Scripts: []int64{2, 2}},
		{Name: "herd", Waiters: 1000, Names: 1, Connections: 22, PubSubConnections: 1, PoolSize: 20, ClientBytes: 8 << 20, HandoverSeconds: []float64{0.0004, 0.002}, RedisCPUSeconds: []float64{0.02, 0.03}, Scripts: []int64{1000, 999}},
	}})
	write("fencing.json", fencing{Timing: timing{LeaseDuration: "2s", RenewDeadline: "1.5s", RetryPeriod: "300ms"}, Handovers: 2,
		AdmitSeconds: []float64{0.05, 0.06}, RefuseSeconds: []float64{0.055, 0.07}, DeposedWrites: 30, DeposedAdmitted: 28, HolderWrites: 25, HolderRefused: 23,
		Candidates: []fencingCandidate{{Method: "agent", Handover: "SIGTERM to the leader's agent", WaitSeconds: []float64{0.2, 0.3, 1.4}}}})
	write("sharding.json", sharding{Shards: 64, Timing: timing{LeaseDuration: "6s", RenewDeadline: "4s", RetryPeriod: "1s"}, Sides: []shardingSide{
		{Name: "redislock sharded", UpSeconds: []float64{0.008, 0.009}, DownSeconds: []float64{0.003, 0.004}, CrashSeconds: []float64{5.9, 5.96}, Replicas: 3, RedisScriptsPerMinute: 180},
		{Name: "Lease per bucket", SpreadUp: 47, CrashSeconds: []float64{6.2, 6.6}, SpreadCrash: 40, Replicas: 3, APIWritesPerMinute: 3456},
	}})
	write("sharded-chaos.json", shardedChaos{Shards: 64, Window: "10m0s", Timing: timing{LeaseDuration: "2s", RenewDeadline: "1.5s", RetryPeriod: "300ms"}, Deployments: []chaosDeployment{
		{Name: "single", Faults: 200, Reconciles: 20000, UnownedSeconds: map[string]float64{"kill": 0.05, "restart": 3.06}},
		{Name: "cluster", Faults: 150, Reconciles: 15000, UnownedSeconds: map[string]float64{"stop": 0.16, "migrate": 0}},
	}})
	write("clusterevents.json", clusterEvents{Masters: 3, Replicas: 1, Cycles: 100, Cases: []clusterEventsCase{
		{Name: "PUBLISH", Events: 200, BusMessages: 1000, NodesReached: 6},
		{Name: "SPUBLISH", Events: 200, BusMessages: 200, NodesReached: 3},
	}})

	ser := func(ns ...float64) []interleavedSample {
		var out []interleavedSample
		for _, v := range ns {
			out = append(out, interleavedSample{Ops: 1000, NsPerOp: v, CPUUsPerOp: v / 1e4, ClientCPUUsPerOp: v / 2e4, AllocsPerOp: 20, Commands: map[string]commandCost{"evalsha": {CallsPerOp: 2, UsPerOp: v / 1e5}}})
		}
		return out
	}
	write("interleaved.json", interleaved{Rounds: 3, Slot: "500ms", Scenarios: []*interleavedScenario{{
		Name: "single/serial", Reference: "bsm", Entries: []*interleavedEntry{
			{Name: "redislock", Nodes: 1, Samples: ser(90000, 80000, 100000)},
			{Name: "redislock-durable", Nodes: 1, Samples: ser(90000, 80000, 98000)},
			{Name: "bsm", Nodes: 1, Samples: ser(100000, 100000, 100000)},
		},
	}, {
		Name: "redlock/serial", Reference: "redislock nodes=1", Entries: []*interleavedEntry{
			{Name: "redislock nodes=1", Nodes: 1, Samples: ser(100000, 100000, 100000)},
			{Name: "redislock nodes=5", Nodes: 5, Samples: ser(500000, 400000, 600000)},
			{Name: "redsync nodes=1", Nodes: 1, Samples: ser(80000, 80000, 80000)},
			{Name: "redsync nodes=5", Nodes: 5, Samples: ser(240000, 200000, 320000)},
		},
	}}})

	if err := run(io.Discard, dir, report{command: "make bench", source: "abc1234-dirty", elapsed: 12 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| redislock | 90.0 | 0.90 [0.80–1.00] | 9.0 | 0.90 [0.80–1.00] | 4.5 | 20 |",
		"| parallel wall time: redislock ÷ rueidislock | n/a | 1.10 | n/a |",
		"| Redlock 5 nodes, wall time ÷ 1 node's (redislock, serial) | 5.00 [4.00–6.00] | 2.00 | MISS |",
		"redsync, the leanest Redlock here (SET NX and a compare-and-delete on each node, no fencing, validity or restart guard), is 3.00 [2.50–4.00]× its own nodes=1 |",
		"| serial wall time: redislock ÷ bsm | 0.90 [0.80–1.00] | 1.00 | PASS | the CPU of an op (client + Redis, which mostly alternate) alone is 0.14 [0.12–0.15]× bsm's wall time; -1.0 µs/op: the scripts -0.1 (they run 0 commands per op, bsm's 0), the rest -0.9 |",
		"| Redis CPU per op: redislock ÷ bsm (serial) | 0.90 [0.80–1.00] | 1.00 | PASS | -1.0 µs/op: the scripts -0.1 (they run 0 commands per op, bsm's 0), the rest -0.9 |",
		"| restart guard, wall time: redislock ÷ redislock-durable (serial) | 1.00 [1.00–1.02] | 1.03 | PASS |",
		"| parallel wall time: redislock ÷ bsm | n/a | 1.00 | n/a |",
		"| redislock | 9.0 | EVALSHA 2.00 (0.90) |",
		"| redislock | 140000 |",
		"| 7 | 700.0 | 800.0 |",
		"| Redis plugin | 4s | 4.1s | 4.1s | 3ms | 4ms | 4ms | 0.0 |",
		"| Lease | 6.2s | 7.3s | 7.3s | 1.2s | 2.1s | 2.1s | 60.0 |",
		"| Lease | no | 1 | 1 | 1 | 27.638s | 1.106s |",
		"| Redis plugin | yes | 0 | 0 | 0 | 0s | 80ms |",
		"kube-apiserver stopped (SIGSTOP) for 30s, then resumed; exited replicas restarted as a kubelet would (after 10s, doubling)",
		"LeaseDuration (a RedisLock's ttl) 3s, RenewDeadline 2s, RetryPeriod (renewInterval) 500ms",
		"| no election | 0 | – | – | – | 0.0 | 0.0 |",
		"| Redis agent | 5 | 1.23 | 0.90 | 0.83 | 0.0 | 2.0 |",
		"| Redis plugin | 20 | 2.50 | 1.80 | 1.83 | 0.0 | 2.0 |",
		"| Lease | 20 | – | – | – | 30.0 | 600.0 |",
		"counted over 60s once a leader settled",
		"| single | 1000 | 12.5s | 80.0 MiB | 90.0 MiB | 30.0 MiB | 2 | 210 | 20ms | 200ms | 200ms |",
		"| single | Ready ≤ 60s after a start | 50s | PASS | 10040 API writes for 10000 locks; kube-apiserver ran 60.0s of CPU meanwhile, 6.0ms a write, etcd 8.0s, the controller 12.0s: together 80.0s, ",
		"| single | peak RSS ≤ 150.0 MiB | 160.0 MiB | MISS | – |",
		"| single | lag p99 ≤ 100ms | 50ms | PASS | – |",
		"| single | idle API requests ≤ 1000 a minute | 20 | PASS | – |",
		"| quiet | 40.0 MiB | 20ms | 30ms | 30ms | – |",
		"| hostile | 70.0 MiB | 20ms | 90ms | 90ms | 500ms |",
		"had accepted 12 connections, and 40 of the tenant's 1000 locks had a status",
		"| another namespace's new lock Ready ≤ 2s | 500ms | PASS |",
		"| lag p99 ≤ 2× quiet | 3.00× | MISS |",
		"| herd | 1000 | 1 | 22 (20) | 1 | 8.0 MiB | 400 µs | 2000 µs | 4.00 | 20000 µs | 999 |",
		"| herd | connections ≤ pool size + 1 subscription | 22 (pool 20) | MISS |",
		"| herd | handover p99 ≤ 2× the single waiter's (500 µs) | 2000 µs | MISS |",
		"| PUBLISH | 200 | 1000 | 5.00 | 6 of 6 |",
		"| redislock sharded | 2: 8ms / 9ms | 0 | 2: 3ms / 4ms | 2: 5.9s / 5.96s | 0 | 0 | 180 | 0 |",
		"| Lease per bucket | none moved | 47 | none moved | 2: 6.2s / 6.6s | 40 | 3456 | 0 | 0 |",
		"| graceful moves (scale up and down) p99 ≤ 50 ms | 9ms | PASS |",
		"| crash moves p99 ≤ ttl + 250 ms | 5.96s | PASS |",
		"| Redis scripts idle ≤ replicas ÷ renewInterval (180/min, +10% for the window's edges) | 180/min | PASS |",
		"| single | 200 | 20000 | 0 | 0 | kill 50ms, restart 3.06s |",
		"| 0 objects processed twice and 0 fence regressions, 10m0s chaos run per deployment | 0 in 10m0s per deployment | PASS |",
		"| no shard unowned longer than ttl + 1 s after a replica's fault (kill, stop, rolling, scale, cut) | 160ms | PASS |",
		"| SPUBLISH | 200 | 200 | 1.00 | 3 of 6 |",
		"| a grant or release reaches only its shard: ≤ 1 bus message (its replicas) per event | 1.00 | PASS |",
		"| the new holder's first write admitted | 50ms | 60ms | 23 of its 25 writes refused before |",
		"| the deposed holder's first write refused | 55ms | 70ms | 28 of its 30 writes admitted before |",
		"| Redis agent | 3 | SIGTERM to the leader's agent | 300ms | 1.4s |",
		"the run took 12m0s",
		"| abc1234-dirty |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("REPORT.md lacks %q:\n%s", want, md)
		}
	}
	for _, png := range []string{"throughput.png", "redlock.png", "failover.png", "api-writes.png", "outage.png", "controller-scale.png", "shard-moves.png"} {
		if !strings.Contains(string(md), "("+png+")") {
			t.Errorf("REPORT.md does not show %s", png)
		}
		if fi, err := os.Stat(filepath.Join(dir, png)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", png, err)
		}
	}
}

func TestReportSaysWhatWasNotRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bench.txt"), []byte(benchOut), 0o600); err != nil {
		t.Fatal(err)
	}
	// No elapsed time, as for a report of parts run separately: the header tells none.
	if err := run(io.Discard, dir, report{command: "make bench"}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Not run (no failover.json).", "Not run (no outage.json).", "Not run (no steady.json).", "Not run (no controller.json).", "Not run (no hostile.json).", "Not run (no waiters.json).", "Not run (no clusterevents.json).", "Not run (no fencing.json).", "Not run (no sharding.json).", "Not run (no sharded-chaos.json)."} {
		if !strings.Contains(string(md), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	if strings.Contains(string(md), "the run took") {
		t.Errorf("REPORT.md tells how long the run took without an elapsed time:\n%s", md)
	}
	for _, png := range []string{"failover.png", "api-writes.png", "outage.png", "controller-scale.png", "shard-moves.png"} {
		if _, err := os.Stat(filepath.Join(dir, png)); err == nil {
			t.Errorf("%s drawn without its input", png)
		}
	}
}
