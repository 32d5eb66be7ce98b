// Command benchtable reads `go test -bench -benchmem` output of the bench
// module on stdin, copies it to stdout unchanged, and then prints markdown
// tables of the results and of the ratios we target, each marked PASS or
// MISS (n/a where a benchmark is missing). With -count > 1 each figure is
// the median of its samples.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// impls are the implementations in table order.
var impls = []string{"redislock", "redislock-durable", "bsm", "redsync", "rueidis", "raw"}

// procSuffix is the -GOMAXPROCS suffix go test appends to benchmark names.
var procSuffix = regexp.MustCompile(`-\d+$`)

// results maps benchmark name (without the -N suffix) and unit to samples.
type results map[string]map[string][]float64

func main() {
	r, err := parse(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	fmt.Println()
	printTables(os.Stdout, r)
}

// parse copies in to out and collects every benchmark result line.
func parse(in io.Reader, out io.Writer) (results, error) {
	r := results{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if _, err := fmt.Fprintln(out, line); err != nil {
			return nil, err
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		if r[name] == nil {
			r[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				r[name][f[i+1]] = append(r[name][f[i+1]], v)
			}
		}
	}
	return r, sc.Err()
}

// get returns the median of name's samples in unit, and whether any exist.
func (r results) get(name, unit string) (float64, bool) {
	s := slices.Clone(r[name][unit])
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 0 {
		return (s[m-1] + s[m]) / 2, true
	}
	return s[m], true
}

func (r results) cell(name, unit string) string {
	if v, ok := r.get(name, unit); ok {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return "n/a"
}

// check is one target: value = num/den must be at most (or, if atLeast,
// at least) limit.
type check struct {
	what     string
	num, den [2]string // benchmark name, unit
	atLeast  bool
	limit    float64
}

const (
	single = "BenchmarkAcquireRelease/"
	red5   = "BenchmarkRedlock5/"
	ns     = "ns/op"
	allocs = "allocs/op"
)

// checks are the targets. Throughput ratios are ns/op ratios turned over.
var checks = []check{
	{"serial: redislock / bsm ns/op", [2]string{single + "redislock/serial", ns}, [2]string{single + "bsm/serial", ns}, false, 1},
	{"serial: redislock / raw ns/op", [2]string{single + "redislock/serial", ns}, [2]string{single + "raw/serial", ns}, false, 1.10},
	{"parallel: redislock / bsm throughput", [2]string{single + "bsm/parallel", ns}, [2]string{single + "redislock/parallel", ns}, true, 1.4},
	{"parallel: redislock / rueidis throughput", [2]string{single + "rueidis/parallel", ns}, [2]string{single + "redislock/parallel", ns}, true, 1},
	{"allocs: redislock serial allocs/op", [2]string{single + "redislock/serial", allocs}, [2]string{}, false, 25},
	{"Redlock5 / single-node serial ns/op (redislock)", [2]string{red5 + "redislock/serial", ns}, [2]string{single + "redislock/serial", ns}, false, 1.5},
	{"Redlock5 parallel: redislock / redsync throughput", [2]string{red5 + "redsync/parallel", ns}, [2]string{red5 + "redislock/parallel", ns}, true, 2},
	// The restart guard reads INFO on every fresh name; what that costs.
	{"restart guard: redislock / redislock-durable serial ns/op", [2]string{single + "redislock/serial", ns}, [2]string{single + "redislock-durable/serial", ns}, false, 1.15},
}

func printTables(w io.Writer, r results) {
	fmt.Fprintln(w, "| impl | serial ns/op | parallel ns/op | serial allocs/op | parallel allocs/op | Redlock5 serial ns/op | Redlock5 parallel ns/op |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, im := range impls {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", im,
			r.cell(single+im+"/serial", ns), r.cell(single+im+"/parallel", ns),
			r.cell(single+im+"/serial", allocs), r.cell(single+im+"/parallel", allocs),
			r.cell(red5+im+"/serial", ns), r.cell(red5+im+"/parallel", ns))
	}
	fmt.Fprintln(w)
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
