package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// impls are the implementations of BenchmarkAcquireRelease in table order.
var impls = []string{"redislock", "redislock-durable", "bsm", "redsync", "rueidis", "raw"}

// redlockImpls are the implementations of BenchmarkRedlock.
var redlockImpls = []string{"redislock", "redsync"}

const (
	single = "BenchmarkAcquireRelease/"
	ns     = "ns/op"
	allocs = "allocs/op"
)

// oneLock is the prefix of BenchmarkOneLock's sub-benchmarks, and
// oneLockImpls its implementations in table order.
const oneLock = "BenchmarkOneLock/"

var oneLockImpls = []string{"redislock", "bsm", "rueidis"}

// redlock is the prefix of BenchmarkRedlock's sub-benchmarks over n nodes.
func redlock(n int) string { return "BenchmarkRedlock/nodes=" + strconv.Itoa(n) + "/" }

// redlockName matches BenchmarkRedlock's sub-benchmarks and captures the
// node count.
var redlockName = regexp.MustCompile(`^BenchmarkRedlock/nodes=(\d+)/`)

// redlockNodes lists, in order, the node counts r has Redlock results for.
func (r results) redlockNodes() []int {
	var nodes []int
	for name := range r {
		if m := redlockName.FindStringSubmatch(name); m != nil {
			n, _ := strconv.Atoi(m[1])
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	slices.Sort(nodes)
	return nodes
}

// check is one target: value = num/den must be at most (or, if atLeast,
// at least) limit.
type check struct {
	what     string
	num, den [2]string // benchmark name, unit
	atLeast  bool
	limit    float64
}

// checks are the targets. Throughput ratios are ns/op ratios turned over.
var checks = []check{
	{"serial: redislock / bsm ns/op", [2]string{single + "redislock/serial", ns}, [2]string{single + "bsm/serial", ns}, false, 1},
	{"serial: redislock / raw ns/op", [2]string{single + "redislock/serial", ns}, [2]string{single + "raw/serial", ns}, false, 1.10},
	{"parallel: redislock / bsm throughput", [2]string{single + "bsm/parallel", ns}, [2]string{single + "redislock/parallel", ns}, true, 1.4},
	{"parallel: redislock / rueidis throughput", [2]string{single + "rueidis/parallel", ns}, [2]string{single + "redislock/parallel", ns}, true, 1},
	{"allocs: redislock serial allocs/op", [2]string{single + "redislock/serial", allocs}, [2]string{}, false, 25},
	{"Redlock5 / single-node serial ns/op (redislock)", [2]string{redlock(5) + "redislock/serial", ns}, [2]string{single + "redislock/serial", ns}, false, 1.5},
	{"Redlock5 parallel: redislock / redsync throughput", [2]string{redlock(5) + "redsync/parallel", ns}, [2]string{redlock(5) + "redislock/parallel", ns}, true, 2},
	// The restart guard reads INFO on every fresh name; what that costs.
	{"restart guard: redislock / redislock-durable serial ns/op", [2]string{single + "redislock/serial", ns}, [2]string{single + "redislock-durable/serial", ns}, false, 1.15},
}

// value computes num/den, or num alone when den is unset.
func (c check) value(r results) (float64, bool) {
	n, ok := r.get(c.num[0], c.num[1])
	if !ok {
		return 0, false
	}
	if c.den[0] == "" {
		return n, true
	}
	d, ok := r.get(c.den[0], c.den[1])
	if !ok || d == 0 {
		return 0, false
	}
	return n / d, true
}

// writeThroughput writes the single-node table: each implementation's
// ns/op, throughput and allocations, and redislock's throughput as a
// multiple of each one's.
func writeThroughput(w *strings.Builder, r results) {
	fmt.Fprintln(w, "| impl | serial ns/op | parallel ns/op | serial ops/s | parallel ops/s | serial allocs/op | parallel allocs/op | redislock ÷ impl throughput, serial | parallel |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, im := range impls {
		name := single + im
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", im,
			r.cell(name+"/serial", ns), r.cell(name+"/parallel", ns),
			opsCell(r, name+"/serial"), opsCell(r, name+"/parallel"),
			r.cell(name+"/serial", allocs), r.cell(name+"/parallel", allocs),
			ratioCell(r, name+"/serial", single+"redislock/serial"),
			ratioCell(r, name+"/parallel", single+"redislock/parallel"))
	}
}

// writeOneLock writes BenchmarkOneLock's table: every goroutine waiting
// for one lock, as rueidislock's README measures it.
func writeOneLock(w *strings.Builder, r results) {
	fmt.Fprintln(w, "| impl | µs/op | allocs/op | redislock ÷ impl throughput |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, im := range oneLockImpls {
		name := oneLock + im
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", im, usCell(r, name), r.cell(name, allocs), ratioCell(r, name, oneLock+"redislock"))
	}
}

// writeRedlock writes Redlock's ns/op against the number of nodes.
func writeRedlock(w *strings.Builder, r results) {
	fmt.Fprintln(w, "| nodes | redislock serial µs/op | redsync serial µs/op | redislock parallel µs/op | redsync parallel µs/op | redislock ÷ redsync throughput, serial | parallel |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.redlockNodes() {
		p := redlock(n)
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", n,
			usCell(r, p+"redislock/serial"), usCell(r, p+"redsync/serial"),
			usCell(r, p+"redislock/parallel"), usCell(r, p+"redsync/parallel"),
			ratioCell(r, p+"redsync/serial", p+"redislock/serial"),
			ratioCell(r, p+"redsync/parallel", p+"redislock/parallel"))
	}
}

// writeChecks writes each target with its value and PASS, MISS or n/a.
func writeChecks(w *strings.Builder, r results) {
	fmt.Fprintln(w, "| check | value | target | result |")
	fmt.Fprintln(w, "|---|---:|---:|---|")
	for _, c := range checks {
		op := "<="
		if c.atLeast {
			op = ">="
		}
		value, result := "n/a", "n/a"
		if v, ok := c.value(r); ok {
			value, result = strconv.FormatFloat(v, 'f', 2, 64), "MISS"
			if (c.atLeast && v >= c.limit) || (!c.atLeast && v <= c.limit) {
				result = "PASS"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s %.2f | %s |\n", c.what, value, op, c.limit, result)
	}
}

// opsCell formats name's throughput in operations per second.
func opsCell(r results, name string) string {
	if v, ok := r.opsPerSec(name); ok {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return "n/a"
}

// usCell formats name's median ns/op in microseconds.
func usCell(r results, name string) string {
	if v, ok := r.get(name, ns); ok {
		return strconv.FormatFloat(v/1e3, 'f', 1, 64)
	}
	return "n/a"
}

// ratioCell formats num's ns/op over den's: den's throughput as a multiple
// of num's.
func ratioCell(r results, num, den string) string {
	n, ok1 := r.get(num, ns)
	d, ok2 := r.get(den, ns)
	if !ok1 || !ok2 || d == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(n/d, 'f', 2, 64) + "×"
}
