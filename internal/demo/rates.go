package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redislock/redislock/internal/redisstats"
)

// rateWindow is how long the demo counts each node's commands at the end.
const rateWindow = 10 * time.Second

// NodeRate is what one Redis node executed per second over a window.
type NodeRate struct {
	// Addr is the node's address.
	Addr string
	// Scripts is script calls (EVALSHA and EVAL): lock operations.
	Scripts float64
	// Publish is PUBLISH calls (release messages).
	Publish float64
	// Total is all calls, those made inside scripts and the demo's own
	// INFO included.
	Total float64
}

// commandRates counts what every node executes over rateWindow, with the
// election in its steady state after the scenario, and prints a line
// before and a table after.
func (d *demo) commandRates(ctx context.Context) error {
	var before, after []redisstats.Counts
	read := func(into *[]redisstats.Counts) error {
		for _, n := range d.nodes {
			c := n.Client()
			counts, err := redisstats.Read(ctx, c)
			if err = errors.Join(err, c.Close()); err != nil {
				return fmt.Errorf("demo: %s: %w", n.Addr, err)
			}
			*into = append(*into, counts)
		}
		return nil
	}
	if err := read(&before); err != nil {
		return err
	}
	from := time.Now()
	d.v.event("counting each Redis node's commands for %v (INFO commandstats): %d operators on %s/%s and %d agents on %s/%s electing (one leader each), and the controller",
		rateWindow, running(d.operators), namespace, operatorLock, running(d.agents), namespace, workerLock)
	if err := pause(ctx, rateWindow); err != nil {
		return fmt.Errorf("demo: counting commands: %w", err)
	}
	if err := read(&after); err != nil {
		return err
	}
	secs := time.Since(from).Seconds()
	rows := []string{"REDIS NODE\tSCRIPTS/s\tPUBLISH/s\tALL COMMANDS/s"}
	for i, n := range d.nodes {
		diff := after[i].Sub(before[i])
		r := NodeRate{Addr: n.Addr, Scripts: float64(diff.Scripts()) / secs, Publish: float64(diff["publish"]) / secs, Total: float64(diff.Total()) / secs}
		d.res.Rates = append(d.res.Rates, r)
		rows = append(rows, fmt.Sprintf("%s\t%.1f\t%.1f\t%.1f", r.Addr, r.Scripts, r.Publish, r.Total))
	}
	d.v.event("commands per second on each Redis node over the last %.1fs:\n%s", secs, strings.TrimRight(indent(table(rows)), "\n"))
	return nil
}
