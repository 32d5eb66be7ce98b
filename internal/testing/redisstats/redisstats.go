// Package redisstats reads what Redis servers have executed, from INFO
// commandstats, so that tests, the demo and the benchmarks measure what the
// election costs Redis by counting commands rather than by timing.
package redisstats

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Counts is the number of calls of each command a server executed, by
// lower-case command name ("evalsha", "publish", ...). Commands that scripts
// call count too, under their own names.
type Counts map[string]int64

// Scripts is the number of script calls (EVALSHA and EVAL): one per lock
// operation (acquire, renew, release, inspect, ...) per node.
func (c Counts) Scripts() int64 { return c["evalsha"] + c["eval"] }

// Total is the number of all calls, those made inside scripts included.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Sub returns c less an earlier reading of the same servers.
func (c Counts) Sub(earlier Counts) Counts {
	d := Counts{}
	for k, v := range c {
		if v -= earlier[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

// Add returns the sum of c and o, for servers counted together.
func (c Counts) Add(o Counts) Counts {
	s := Counts{}
	for k, v := range c {
		s[k] += v
	}
	for k, v := range o {
		s[k] += v
	}
	return s
}

// Read returns the counts of one server, or of every master of a Cluster
// client (summed), or of the current master of a Sentinel client. Each
// reading's INFO counts in the next one.
func Read(ctx context.Context, c redis.UniversalClient) (Counts, error) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var (
			mu  sync.Mutex
			sum = Counts{}
		)
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := Read(ctx, m)
			mu.Lock()
			sum = sum.Add(n)
			mu.Unlock()
			return err
		})
		return sum, err
	}
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("redisstats: INFO commandstats: %w", err)
	}
	return Parse(s)
}

// ReadAll returns Read of each client, in their order; an error names the
// first that could not be read.
func ReadAll(ctx context.Context, clients ...redis.UniversalClient) ([]Counts, error) {
	counts := make([]Counts, len(clients))
	for i, c := range clients {
		var err error
		if counts[i], err = Read(ctx, c); err != nil {
			return nil, fmt.Errorf("redisstats: server %d: %w", i, err)
		}
	}
	return counts, nil
}

// Window counts what a set of servers execute between Begin and End.
type Window struct {
	clients []redis.UniversalClient
	before  []Counts
	at      time.Time
}

// Begin reads every client's counts (ReadAll) and opens a window on them.
func Begin(ctx context.Context, clients ...redis.UniversalClient) (*Window, error) {
	before, err := ReadAll(ctx, clients...)
	if err != nil {
		return nil, err
	}
	return &Window{clients: clients, before: before, at: time.Now()}, nil
}

// End reads every client's counts again and returns, in Begin's order, what
// each server executed since Begin, and the time from the end of Begin's
// reading to the start of End's. The INFO of Begin's reading counts, once
// per server, as do any commands of the clients themselves in between.
func (w *Window) End(ctx context.Context) ([]Counts, time.Duration, error) {
	took := time.Since(w.at)
	after, err := ReadAll(ctx, w.clients...)
	if err != nil {
		return nil, took, err
	}
	for i := range after {
		after[i] = after[i].Sub(w.before[i])
	}
	return after, took, nil
}

// Parse reads the text of INFO commandstats.
func Parse(info string) (Counts, error) {
	n := Counts{}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		calls, _, _ := strings.Cut(strings.TrimPrefix(fields, "calls="), ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("redisstats: cannot read %q", line)
		}
		n[strings.ReplaceAll(name, "|", " ")] = v
	}
	return n, nil
}

// Natural is what E1 says an election costs each node over window, in
// script calls: the leader's renewal once per renewInterval, and one
// attempt per ttl from each standby.
func Natural(window, ttl, renewInterval time.Duration, standbys int) float64 {
	return window.Seconds()/renewInterval.Seconds() + float64(standbys)*window.Seconds()/ttl.Seconds()
}

// Budget is the most script calls per node that the tests accept for an
// election over window: three times Natural, plus four calls per candidate
// for each leadership change (the release, the winner's acquire, one failed
// attempt per standby and its give-back). A loop that wakes itself exceeds
// it within a second.
func Budget(window, ttl, renewInterval time.Duration, standbys, changes int) int64 {
	return int64(3*Natural(window, ttl, renewInterval, standbys)) + int64(4*(standbys+1)*changes)
}
