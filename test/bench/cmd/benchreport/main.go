// Command benchreport turns one benchmark run into tables and a report.
//
// It reads DIR/interleaved.json (TestInterleaved with INTERLEAVED_JSON:
// the implementations in alternating rounds, with the servers' CPU and
// commands per op) and prints its tables and the targets, each marked PASS
// or MISS, then DIR/bench.txt, the `go test -bench -benchmem` output of the
// bench module, as tables of its own; with -count > 1 each figure is the
// median of its samples.
// It then writes DIR/REPORT.md with PNG plots next to it, adding the
// failover benchmark (DIR/failover.json, from test/e2e's
// TestFailoverBenchmark with FAILOVER_JSON), the steady-state cost of an
// election (DIR/steady.json, from TestSteadyStateBenchmark with
// STEADY_JSON), leadership through an API-server outage (DIR/outage.json,
// from TestLeadershipThroughAPIServerOutage with OUTAGE_JSON) and the
// controller at scale (DIR/controller.json, from TestControllerBenchmark
// with CONTROLLER_BENCH_JSON), the controller among hostile tenants
// (DIR/hostile.json, from TestControllerAmongHostileTenants with
// HOSTILE_BENCH_JSON), server-side fencing (DIR/fencing.json, from
// test/e2e's fencing tests with FENCING_JSON), sharded leadership against a
// Lease per bucket (DIR/sharding.json, with SHARDING_JSON) and many waiters on one Client
// (DIR/waiters.json, from this module's TestWaiters with WAITERS_JSON)
// when those files exist. run.sh runs it.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

func main() {
	dir := flag.String("dir", "", "directory of bench.txt and the JSON files, where REPORT.md and the plots go (required)")
	command := flag.String("command", "make bench", "the command that ran the benchmarks, for the report")
	elapsed := flag.Duration("elapsed", 0, "how long the run took, for the report (0: not said)")
	source := flag.String("source", "unknown", "the code measured, as `git describe --always --dirty` names it when the run began, for the report")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "benchreport: -dir is required")
		os.Exit(2)
	}
	if err := run(os.Stdout, *dir, report{command: *command, source: *source, elapsed: *elapsed}); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// run prints the lock tables to stdout and writes the report into dir,
// with what rp says about the run.
func run(stdout io.Writer, dir string, rp report) error {
	in, err := os.Open(filepath.Join(dir, "bench.txt"))
	if err != nil {
		return err
	}
	r, err := parse(in)
	_ = in.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", in.Name(), err)
	}
	if rp.il, err = loadJSON[interleaved](filepath.Join(dir, "interleaved.json")); err != nil {
		return err
	}
	var tables strings.Builder
	if rp.il != nil {
		writeInterleaved(&tables, rp.il)
		tables.WriteString("\n")
		writeCommands(&tables, rp.il)
		tables.WriteString("\n")
		writeTargets(&tables, rp.il, runtime.NumCPU())
		tables.WriteString("\n")
	}
	writeThroughput(&tables, r)
	tables.WriteString("\n")
	writeRedlock(&tables, r)
	tables.WriteString("\n")
	writeOneLock(&tables, r)
	tables.WriteString("\n")
	writeChecks(&tables, r)
	if _, err := io.WriteString(stdout, tables.String()); err != nil {
		return err
	}

	rp.bench, rp.machine, rp.date = r, readMachine(), time.Now()
	if rp.failover, err = loadJSON[failover](filepath.Join(dir, "failover.json")); err != nil {
		return err
	}
	if rp.outage, err = loadJSON[outage](filepath.Join(dir, "outage.json")); err != nil {
		return err
	}
	if rp.steady, err = loadJSON[steadyState](filepath.Join(dir, "steady.json")); err != nil {
		return err
	}
	if rp.controller, err = loadJSON[controllerScale](filepath.Join(dir, "controller.json")); err != nil {
		return err
	}
	if rp.hostile, err = loadJSON[hostileTenants](filepath.Join(dir, "hostile.json")); err != nil {
		return err
	}
	if rp.waiters, err = loadJSON[waiters](filepath.Join(dir, "waiters.json")); err != nil {
		return err
	}
	if rp.events, err = loadJSON[clusterEvents](filepath.Join(dir, "clusterevents.json")); err != nil {
		return err
	}
	if rp.fencing, err = loadJSON[fencing](filepath.Join(dir, "fencing.json")); err != nil {
		return err
	}
	if rp.sharding, err = loadJSON[sharding](filepath.Join(dir, "sharding.json")); err != nil {
		return err
	}
	if rp.chaos, err = loadJSON[shardedChaos](filepath.Join(dir, "sharded-chaos.json")); err != nil {
		return err
	}
	if err := rp.write(dir); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "\nreport: %s\n", filepath.Join(dir, "REPORT.md"))
	return err
}
