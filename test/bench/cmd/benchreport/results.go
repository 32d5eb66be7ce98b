package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// procSuffix is the -GOMAXPROCS suffix go test appends to benchmark names.
var procSuffix = regexp.MustCompile(`-\d+$`)

// results maps benchmark name (without the -N suffix) and unit to samples.
type results map[string]map[string][]float64

// parse collects every benchmark result line of `go test -bench` output.
func parse(in io.Reader) (results, error) {
	r := results{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
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
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("no benchmark results")
	}
	return r, nil
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

// cell formats the median of name's samples in unit, or n/a.
func (r results) cell(name, unit string) string {
	if v, ok := r.get(name, unit); ok {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return "n/a"
}

// opsPerSec turns the median ns/op of name into operations per second.
func (r results) opsPerSec(name string) (float64, bool) {
	v, ok := r.get(name, ns)
	if !ok || v == 0 {
		return 0, false
	}
	return 1e9 / v, true
}
