package demo

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/redisproc"
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

// commandRates counts what every node executes over window, with the
// election in its steady state after the scenario, and prints a line
// before and a table after.
func (d *demo) commandRates(ctx context.Context, nodes []*redisproc.Server, window time.Duration) ([]NodeRate, error) {
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = n.Client()
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	read := func() ([]redisstats.Counts, time.Time, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		counts := make([]redisstats.Counts, len(clients))
		for i, c := range clients {
			n, err := redisstats.Read(ctx, c)
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("demo: %s: %w", nodes[i].Addr, err)
			}
			counts[i] = n
		}
		return counts, time.Now(), nil
	}

	before, from, err := read()
	if err != nil {
		return nil, err
	}
	d.v.event("counting each Redis node's commands for %v (INFO commandstats): %s, and the controller",
		window, d.electing())
	if err := pause(ctx, window); err != nil {
		return nil, fmt.Errorf("demo: counting commands: %w", err)
	}
	after, to, err := read()
	if err != nil {
		return nil, err
	}

	secs := to.Sub(from).Seconds()
	rates := make([]NodeRate, len(nodes))
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "REDIS NODE\tSCRIPTS/s\tPUBLISH/s\tALL COMMANDS/s")
	for i, n := range nodes {
		diff := after[i].Sub(before[i])
		r := NodeRate{Addr: n.Addr, Scripts: float64(diff.Scripts()) / secs,
			Publish: float64(diff["publish"]) / secs, Total: float64(diff.Total()) / secs}
		rates[i] = r
		_, _ = fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\n", r.Addr, r.Scripts, r.Publish, r.Total)
	}
	_ = tw.Flush()
	d.v.event("commands per second on each Redis node over the last %.1fs:\n%s", secs, strings.TrimRight(indent(b.String()), "\n"))
	return rates, nil
}

// electing says which candidates are still running on each lock.
func (d *demo) electing() string {
	operators, agents := 0, 0
	for _, p := range d.operators {
		if p.alive() {
			operators++
		}
	}
	for _, a := range d.agents {
		if a.alive() {
			agents++
		}
	}
	return fmt.Sprintf("%d operators on %s/%s and %d agents on %s/%s electing (one leader each)",
		operators, namespace, operatorLock, agents, namespace, workerLock)
}
