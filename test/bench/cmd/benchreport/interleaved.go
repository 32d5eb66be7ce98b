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

// ratio is m of num over m of den in each round (the two ran one after the
// other in it), as a median and its range.
func ratio(il *interleaved, scenario, num, den string, m metric) spread {
	n, ok1 := findEntry(il, scenario, num)
	d, ok2 := findEntry(il, scenario, den)
	if !ok1 || !ok2 {
		return spreadOf(nil)
	}
	var rs []float64
	for i := range min(len(n.Samples), len(d.Samples)) {
		if v := m(d.Samples[i]); v > 0 {
			rs = append(rs, m(n.Samples[i])/v)
		}
	}
	return spreadOf(rs)
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
// robust says whether the figure holds on a noisy machine.
type target struct {
	what   string
	value  func(*interleaved) spread
	limit  float64
	robust string
}

var targets = []target{
	{"serial wall time: redislock ÷ bsm", func(il *interleaved) spread { return ratio(il, "single/serial", "redislock", "bsm", wallNs) }, 1,
		"yes: a per-round ratio"},
	{"parallel wall time: redislock ÷ bsm", func(il *interleaved) spread { return ratio(il, "single/parallel", "redislock", "bsm", wallNs) }, 1,
		"yes: a per-round ratio"},
	{"parallel wall time: redislock ÷ rueidislock", func(il *interleaved) spread { return ratio(il, "single/parallel", "redislock", "rueidis", wallNs) }, 1.1,
		"yes: a per-round ratio"},
	{"Redis CPU per op: redislock ÷ bsm (serial)", func(il *interleaved) spread { return ratio(il, "single/serial", "redislock", "bsm", cpuUs) }, 1,
		"yes: the server's own work"},
	{"Redis CPU per op: redislock ÷ bsm (parallel)", func(il *interleaved) spread { return ratio(il, "single/parallel", "redislock", "bsm", cpuUs) }, 1,
		"yes: the server's own work"},
	{"allocations per op: redislock (serial)", func(il *interleaved) spread { return over(il, "single/serial", "redislock", allocsN) }, 25,
		"yes: a count"},
	{"Redis CPU per op: Redlock 5 nodes ÷ 1 node (redislock)", func(il *interleaved) spread {
		return ratio(il, "redlock/serial", "redislock nodes=5", "redislock nodes=1", cpuUs)
	}, 5.5, "yes: the servers' own work"},
	{"Redlock 5 nodes, wall time ÷ 1 node's (redislock, serial)", func(il *interleaved) spread {
		return ratio(il, "redlock/serial", "redislock nodes=5", "redislock nodes=1", wallNs)
	}, 2, "yes: a per-round ratio"},
	{"restart guard, wall time: redislock ÷ redislock-durable (serial)", func(il *interleaved) spread {
		return ratio(il, "single/serial", "redislock", "redislock-durable", wallNs)
	}, 1.03, "yes: a per-round ratio, though within 3% the spread decides"},
	{"restart guard, Redis CPU: redislock ÷ redislock-durable (serial)", func(il *interleaved) spread {
		return ratio(il, "single/serial", "redislock", "redislock-durable", cpuUs)
	}, 1.03, "yes: the server's own work"},
}

// writeTargets writes each target's median, its range and PASS or MISS
// (of the median; n/a when not measured).
func writeTargets(w *strings.Builder, il *interleaved) {
	fmt.Fprintln(w, "| target | median [range] | at most | result | noise-robust |")
	fmt.Fprintln(w, "|---|---:|---:|---|---|")
	for _, t := range targets {
		v := t.value(il)
		result := "n/a"
		if !math.IsNaN(v.median) {
			result = "MISS"
			if v.median <= t.limit {
				result = "PASS"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %s | %s |\n", t.what, v, t.limit, result, t.robust)
	}
}
