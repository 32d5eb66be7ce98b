package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/redislock/redislock/internal/testing/benchresult"
)

// The interleaved input, by the names this report uses.
type (
	interleaved         = benchresult.Interleaved
	interleavedScenario = benchresult.InterleavedScenario
	interleavedEntry    = benchresult.InterleavedEntry
	interleavedSample   = benchresult.InterleavedSample
	commandCost         = benchresult.CommandCost
)

// metric reads one figure of a sample.
type metric func(interleavedSample) float64

func wallNs(s interleavedSample) float64   { return s.NsPerOp }
func cpuUs(s interleavedSample) float64    { return s.CPUUsPerOp }
func clientUs(s interleavedSample) float64 { return s.ClientCPUUsPerOp }
func allocsN(s interleavedSample) float64  { return s.AllocsPerOp }

// spread is the median of some values with their least and greatest.
type spread struct{ median, lo, hi float64 }

func spreadOf(vs []float64) spread {
	if len(vs) == 0 {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	return spread{quantile(vs, 0.5), vs[0], vs[len(vs)-1]}
}

func (s spread) String() string {
	if math.IsNaN(s.median) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f [%.2f–%.2f]", s.median, s.lo, s.hi)
}

// findEntry returns the entry so named of the scenario so named.
func findEntry(il *interleaved, scenario, entry string) (*interleavedEntry, bool) {
	for _, sc := range il.Scenarios {
		if sc.Name != scenario {
			continue
		}
		for _, e := range sc.Entries {
			if e.Name == entry {
				return e, true
			}
		}
	}
	return nil, false
}

// perRound is f of num's and den's samples in each round, as a median and
// its range.
func perRound(il *interleaved, scenario, num, den string, f func(n, d interleavedSample) float64) spread {
	n, ok1 := findEntry(il, scenario, num)
	d, ok2 := findEntry(il, scenario, den)
	if !ok1 || !ok2 {
		return spreadOf(nil)
	}
	var rs []float64
	for i := range min(len(n.Samples), len(d.Samples)) {
		if v := f(n.Samples[i], d.Samples[i]); !math.IsNaN(v) && !math.IsInf(v, 0) {
			rs = append(rs, v)
		}
	}
	return spreadOf(rs)
}

// ratio is m of num over m of den in each round (the two ran one after the
// other in it), as a median and its range.
func ratio(il *interleaved, scenario, num, den string, m metric) spread {
	return perRound(il, scenario, num, den, func(n, d interleavedSample) float64 {
		if v := m(d); v > 0 {
			return m(n) / v
		}
		return math.NaN()
	})
}

// over is m over the rounds of one entry.
func over(il *interleaved, scenario, entry string, m metric) spread {
	e, ok := findEntry(il, scenario, entry)
	if !ok {
		return spreadOf(nil)
	}
	vs := make([]float64, len(e.Samples))
	for i, s := range e.Samples {
		vs[i] = m(s)
	}
	return spreadOf(vs)
}

// writeInterleaved writes one table per scenario: each entry's median
// wall time and Redis CPU per op, and both as per-round ratios to the
// scenario's reference.
func writeInterleaved(w *strings.Builder, il *interleaved) {
	fmt.Fprintf(w, "%d rounds; in each, every implementation ran for %s on fresh keys, in an order that starts one further on each round. Ratios are per round (the two ran within one round), as median [least–greatest]: a drift of the machine's load reaches both sides of a ratio. Redis CPU is the servers' `used_cpu_user + used_cpu_sys` per acquire+release, all nodes together; client CPU the benchmark process's (user and system, every thread). What the cores must run per op is their sum: a serial op cannot take less wall time than it (its client and server parts alternate), and a parallel one or a Redlock fan-out not less than the sum over the machine's cores.\n", il.Rounds, il.Slot)
	for _, sc := range il.Scenarios {
		fmt.Fprintf(w, "\n**%s** (reference: %s)\n\n", sc.Name, sc.Reference)
		fmt.Fprintf(w, "| impl | µs/op | wall ÷ %s | Redis CPU µs/op | Redis CPU ÷ %s | client CPU µs/op | allocs/op |\n", sc.Reference, sc.Reference)
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
		for _, e := range sc.Entries {
			a := "–"
			if !sc.Parallel {
				a = strconv.FormatFloat(over(il, sc.Name, e.Name, allocsN).median, 'f', 0, 64)
			}
			fmt.Fprintf(w, "| %s | %.1f | %s | %.1f | %s | %.1f | %s |\n", e.Name,
				over(il, sc.Name, e.Name, wallNs).median/1e3, ratio(il, sc.Name, e.Name, sc.Reference, wallNs),
				over(il, sc.Name, e.Name, cpuUs).median, ratio(il, sc.Name, e.Name, sc.Reference, cpuUs),
				over(il, sc.Name, e.Name, clientUs).median, a)
		}
	}
}

// writeCommands writes what each implementation had the server run per
// acquire+release on one node, serially: calls and µs of each command
// (those run inside scripts included), medians over the rounds.
func writeCommands(w *strings.Builder, il *interleaved) {
	for _, sc := range il.Scenarios {
		if sc.Name != "single/serial" {
			continue
		}
		fmt.Fprintln(w, "| impl | Redis CPU µs/op | commands per acquire+release: calls (µs) |")
		fmt.Fprintln(w, "|---|---:|---|")
		for _, e := range sc.Entries {
			names := map[string]bool{}
			for _, s := range e.Samples {
				for c := range s.Commands {
					names[c] = true
				}
			}
			var cells []string
			for _, c := range slices.Sorted(maps.Keys(names)) {
				calls := over(il, sc.Name, e.Name, func(s interleavedSample) float64 { return s.Commands[c].CallsPerOp }).median
				us := over(il, sc.Name, e.Name, func(s interleavedSample) float64 { return s.Commands[c].UsPerOp }).median
				if calls >= 0.005 {
					cells = append(cells, fmt.Sprintf("%s %.2f (%.2f)", strings.ToUpper(c), calls, us))
				}
			}
			fmt.Fprintf(w, "| %s | %.1f | %s |\n", e.Name, over(il, sc.Name, e.Name, cpuUs).median, strings.Join(cells, ", "))
		}
	}
}

// target is one goal on the interleaved figures: value at most limit.
// bound, where set, measures in the same rounds what limits the figure
// (the work each op must have run, and where that work is); robust says
// whether the figure holds on a noisy machine.
type target struct {
	what   string
	value  func(*interleaved) spread
	limit  float64
	bound  func(il *interleaved, cores int) string
	robust string
}

// cpuFloor is the CPU num's ops ran, client and servers together, over
// the cores they share, as a multiple of den's wall time in the same
// round: a floor of num's wall time over many cores, and about one for a
// serial op on one node, whose client and server parts mostly alternate
// (the client's runtime threads and the server's cron overlap a little).
func cpuFloor(scenario, num, den string, perCores bool) func(*interleaved, int) string {
	return func(il *interleaved, cores int) string {
		div, over := 1.0, "client + Redis, which mostly alternate"
		if perCores {
			div, over = float64(cores), fmt.Sprintf("client + Redis over %d cores", cores)
		}
		floor := perRound(il, scenario, num, den, func(n, d interleavedSample) float64 {
			return (n.CPUUsPerOp + n.ClientCPUUsPerOp) * 1e3 / div / d.NsPerOp
		})
		return fmt.Sprintf("the CPU of an op (%s) alone is %s× %s's wall time", over, floor, den)
	}
}

// innerCalls is the commands a sample's scripts ran per op: every command
// but the scripts themselves and the connections' handshakes.
func innerCalls(s interleavedSample) float64 {
	var n float64
	for c, cost := range s.Commands {
		switch c {
		case "evalsha", "eval", "hello", "ping":
		default:
			n += cost.CallsPerOp
		}
	}
	return n
}

// scriptShare splits num's Redis CPU above den's into the scripts'
// (EVALSHA's time includes the commands they call), with how many commands
// those run, and the rest (sockets, parsing, replies).
func scriptShare(scenario, num, den string) func(*interleaved, int) string {
	return func(il *interleaved, _ int) string {
		more := perRound(il, scenario, num, den, func(n, d interleavedSample) float64 { return n.CPUUsPerOp - d.CPUUsPerOp })
		scripts := perRound(il, scenario, num, den, func(n, d interleavedSample) float64 {
			return n.Commands["evalsha"].UsPerOp - d.Commands["evalsha"].UsPerOp
		})
		return fmt.Sprintf("%+.1f µs/op: the scripts %+.1f (they run %.0f commands per op, %s's %.0f), the rest %+.1f",
			more.median, scripts.median, over(il, scenario, num, innerCalls).median, den, over(il, scenario, den, innerCalls).median,
			more.median-scripts.median)
	}
}

// redlockServers says what the nodes=N servers each ran against the
// single node: the scripts per op beyond two per node (fencing raises),
// and each script's time as a multiple of the single node's.
func redlockServers(scenario, num, den string, nodes int) func(*interleaved, int) string {
	perScript := func(s interleavedSample) float64 {
		return s.Commands["evalsha"].UsPerOp / s.Commands["evalsha"].CallsPerOp
	}
	return func(il *interleaved, cores int) string {
		slower := perRound(il, scenario, num, den, func(n, d interleavedSample) float64 { return perScript(n) / perScript(d) })
		raises := over(il, scenario, num, func(s interleavedSample) float64 { return s.Commands["evalsha"].CallsPerOp - 2*float64(nodes) })
		return fmt.Sprintf("%d servers: %d.00× at least; each script took %s× the single server's time (%d servers and the client on %d cores), and %.2f fencing raises per op",
			nodes, nodes, slower, nodes, cores, raises.median)
	}
}

// and joins what bounds says, in order.
func and(bounds ...func(*interleaved, int) string) func(*interleaved, int) string {
	return func(il *interleaved, cores int) string {
		parts := make([]string, len(bounds))
		for i, b := range bounds {
			parts[i] = b(il, cores)
		}
		return strings.Join(parts, "; ")
	}
}

// redsyncLeanest is m of redsync's 5 nodes over its 1 node, in the same
// rounds: what this machine gives a Redlock that runs no more than SET NX
// and a compare-and-delete on each node.
func redsyncLeanest(m metric) func(*interleaved, int) string {
	return func(il *interleaved, _ int) string {
		return fmt.Sprintf("redsync, the leanest Redlock here (SET NX and a compare-and-delete on each node, no fencing, validity or restart guard), is %s× its own nodes=1",
			ratio(il, "redlock/serial", "redsync nodes=5", "redsync nodes=1", m))
	}
}

var targets = []target{
	{"serial wall time: redislock ÷ bsm", func(il *interleaved) spread { return ratio(il, "single/serial", "redislock", "bsm", wallNs) }, 1,
		and(cpuFloor("single/serial", "redislock", "bsm", false), scriptShare("single/serial", "redislock", "bsm")), "yes: a per-round ratio"},
	{"parallel wall time: redislock ÷ bsm", func(il *interleaved) spread { return ratio(il, "single/parallel", "redislock", "bsm", wallNs) }, 1,
		cpuFloor("single/parallel", "redislock", "bsm", true), "yes: a per-round ratio"},
	{"parallel wall time: redislock ÷ rueidislock", func(il *interleaved) spread { return ratio(il, "single/parallel", "redislock", "rueidis", wallNs) }, 1.1,
		and(cpuFloor("single/parallel", "redislock", "rueidis", true), scriptShare("single/parallel", "redislock", "rueidis")), "yes: a per-round ratio"},
	{"Redis CPU per op: redislock ÷ bsm (serial)", func(il *interleaved) spread { return ratio(il, "single/serial", "redislock", "bsm", cpuUs) }, 1,
		scriptShare("single/serial", "redislock", "bsm"), "yes: the server's own work"},
	{"Redis CPU per op: redislock ÷ bsm (parallel)", func(il *interleaved) spread { return ratio(il, "single/parallel", "redislock", "bsm", cpuUs) }, 1,
		scriptShare("single/parallel", "redislock", "bsm"), "yes: the server's own work"},
	{"allocations per op: redislock (serial)", func(il *interleaved) spread { return over(il, "single/serial", "redislock", allocsN) }, 25,
		nil, "yes: a count"},
	{"Redis CPU per op: Redlock 5 nodes ÷ 1 node (redislock)", func(il *interleaved) spread {
		return ratio(il, "redlock/serial", "redislock nodes=5", "redislock nodes=1", cpuUs)
	}, 5.5, and(redlockServers("redlock/serial", "redislock nodes=5", "redislock nodes=1", 5), redsyncLeanest(cpuUs)), "yes: the servers' own work"},
	{"Redlock 5 nodes, wall time ÷ 1 node's (redislock, serial)", func(il *interleaved) spread {
		return ratio(il, "redlock/serial", "redislock nodes=5", "redislock nodes=1", wallNs)
	}, 2, and(cpuFloor("redlock/serial", "redislock nodes=5", "redislock nodes=1", true), redsyncLeanest(wallNs)), "yes: a per-round ratio"},
	{"restart guard, wall time: redislock ÷ redislock-durable (serial)", func(il *interleaved) spread {
		return ratio(il, "single/serial", "redislock", "redislock-durable", wallNs)
	}, 1.03, nil, "yes: a per-round ratio, though within 3% the spread decides"},
	{"restart guard, Redis CPU: redislock ÷ redislock-durable (serial)", func(il *interleaved) spread {
		return ratio(il, "single/serial", "redislock", "redislock-durable", cpuUs)
	}, 1.03, nil, "yes: the server's own work"},
}

// writeTargets writes each target's median, its range and PASS or MISS
// (of the median; n/a when not measured), and what bounds it, measured in
// the same rounds on this machine's cores.
func writeTargets(w *strings.Builder, il *interleaved, cores int) {
	fmt.Fprintln(w, "| target | median [range] | at most | result | what bounds it, in the same rounds | noise-robust |")
	fmt.Fprintln(w, "|---|---:|---:|---|---|---|")
	for _, t := range targets {
		v := t.value(il)
		result, bound := "n/a", "–"
		if !math.IsNaN(v.median) {
			result = "MISS"
			if v.median <= t.limit {
				result = "PASS"
			}
			if t.bound != nil {
				bound = t.bound(il, cores)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %s | %s | %s |\n", t.what, v, t.limit, result, bound, t.robust)
	}
}
