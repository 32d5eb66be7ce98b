// Command benchreport turns one benchmark run into tables and a report.
//
// It reads DIR/bench.txt, the `go test -bench -benchmem` output of the
// bench module, and prints markdown tables of the lock results and of the
// ratios we target, each marked PASS or MISS (n/a where a benchmark is
// missing); with -count > 1 each figure is the median of its samples.
// It then writes DIR/REPORT.md with PNG plots next to it, adding the
// failover benchmark (DIR/failover.json, from test/e2e's
// TestFailoverBenchmark with FAILOVER_JSON) and the controller at scale
// (DIR/controller.json, from TestControllerBenchmark with
// CONTROLLER_BENCH_JSON) when those files exist. run.sh runs it.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

func main() {
	dir := flag.String("dir", "", "directory of bench.txt and the JSON files, where REPORT.md and the plots go (required)")
	command := flag.String("command", "make bench", "the command that ran the benchmarks, for the report")
	elapsed := flag.Duration("elapsed", 0, "how long the run took, for the report")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "benchreport: -dir is required")
		os.Exit(2)
	}
	if err := run(os.Stdout, *dir, *command, *elapsed); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// run prints the lock tables to stdout and writes the report into dir.
func run(stdout io.Writer, dir, command string, elapsed time.Duration) error {
	in, err := os.Open(filepath.Join(dir, "bench.txt"))
	if err != nil {
		return err
	}
	r, err := parse(in)
	_ = in.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", in.Name(), err)
	}
	writeThroughput(stdout, r)
	fmt.Fprintln(stdout)
	writeRedlock(stdout, r)
	fmt.Fprintln(stdout)
	writeChecks(stdout, r)

	rp := report{bench: r, machine: readMachine(), command: command, elapsed: elapsed, date: time.Now()}
	var f failover
	if ok, err := loadJSON(filepath.Join(dir, "failover.json"), &f); err != nil {
		return err
	} else if ok {
		rp.failover = &f
	}
	var c controllerScale
	if ok, err := loadJSON(filepath.Join(dir, "controller.json"), &c); err != nil {
		return err
	} else if ok {
		rp.controller = &c
	}
	if err := rp.write(dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nreport: %s\n", filepath.Join(dir, "REPORT.md"))
	return nil
}
