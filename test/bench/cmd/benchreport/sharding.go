package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writeSharding writes the section of sharded leadership against a Lease
// per bucket, and the goals of #45 it can judge, each PASS or MISS.
func writeSharding(w *strings.Builder, s *sharding) {
	fmt.Fprintf(w, "Our sharded lock (`Client.NewSharded`, real redis-server) and a Lease per bucket (client-go's `leaderelection`, every replica campaigning for every bucket, on an envtest kube-apiserver), one after the other, %d shards, timing %s (TestShardingAgainstLeaseBuckets of `test/e2e`). 3 replicas settle, a 4th joins (scale up), leaves gracefully (scale down), and one of the 3 crashes (its connection fails; it releases nothing). Each move is timed from the change to the new holder's start; spread is the most shards a replica holds less the fewest.\n\n", s.Shards, s.Timing)
	moves := func(v []float64) string {
		if len(v) == 0 {
			return "none moved"
		}
		return fmt.Sprintf("%d: %s / %s", len(v), seconds(quantile(v, 0.5)), seconds(quantile(v, 0.99)))
	}
	fmt.Fprintln(w, "| | scale up: moved, p50 / p99 | spread after | scale down | crash | spread after | API writes/min idle | Redis scripts/min idle | shards started twice |")
	fmt.Fprintln(w, "|---|---|---:|---|---|---:|---:|---:|---:|")
	for _, d := range s.Sides {
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %d | %.0f | %.0f | %d |\n", d.Name, moves(d.UpSeconds), d.SpreadUp, moves(d.DownSeconds), moves(d.CrashSeconds), d.SpreadCrash, d.APIWritesPerMinute, d.RedisScriptsPerMinute, d.Overlaps)
	}
	if len(s.Sides) == 0 {
		return
	}
	ours := s.Sides[0]
	ttl, err1 := time.ParseDuration(s.LeaseDuration)
	every, err2 := time.ParseDuration(s.RetryPeriod)
	if err1 != nil || err2 != nil {
		return
	}
	graceful := append(append([]float64(nil), ours.UpSeconds...), ours.DownSeconds...)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| goal (ours) | value | result |")
	fmt.Fprintln(w, "|---|---:|---|")
	fmt.Fprintf(w, "| graceful moves (scale up and down) p99 ≤ 50 ms | %s | %s |\n", seconds(quantile(graceful, 0.99)), verdict(len(graceful) > 0 && quantile(graceful, 0.99) <= 0.05))
	fmt.Fprintf(w, "| crash moves p99 ≤ ttl + 250 ms | %s | %s |\n", seconds(quantile(ours.CrashSeconds, 0.99)), verdict(len(ours.CrashSeconds) > 0 && quantile(ours.CrashSeconds, 0.99) <= (ttl+250*time.Millisecond).Seconds()))
	fmt.Fprintf(w, "| balance: spread ≤ 1 once settled | %d, %d | %s |\n", ours.SpreadUp, ours.SpreadCrash, verdict(ours.SpreadUp <= 1 && ours.SpreadCrash <= 1))
	fmt.Fprintf(w, "| 0 API writes a minute for ownership | %.0f | %s |\n", ours.APIWritesPerMinute, verdict(ours.APIWritesPerMinute == 0))
	natural := float64(ours.Replicas) * time.Minute.Seconds() / every.Seconds()
	// Over a window of 10 renewIntervals, a replica's calls may count one
	// more at the window's edges.
	fmt.Fprintf(w, "| Redis scripts idle ≤ replicas ÷ renewInterval (%.0f/min, +10%% for the window's edges) | %.0f/min | %s |\n", natural, ours.RedisScriptsPerMinute, verdict(ours.RedisScriptsPerMinute <= natural*1.1))
	fmt.Fprintf(w, "| no shard started while another term of it ran | %d | %s |\n", ours.Overlaps, verdict(ours.Overlaps == 0))
}

// chaosGoalWindow is the chaos run per deployment that #45's goal asks
// for.
const chaosGoalWindow = 10 * time.Minute

// replicaFaults are the sharded chaos run's faults of a replica, after
// which a shard must be owned again within ttl + 1s; Redis's own faults
// hold grants back for a ttl by design (the restart guard, a failover).
var replicaFaults = []string{"kill", "stop", "rolling", "scale", "cut"}

// writeShardedChaos writes the sharded chaos run's table and the goals of
// #45 it judges, each PASS or MISS.
func writeShardedChaos(w *strings.Builder, c *shardedChaos) {
	fmt.Fprintf(w, "Three replicas of `examples/sharded-operator` on %d shards, timing %s, ConfigMaps changing every 20 ms, under random faults for %s per Redis deployment (TestShardedChaos of `test/e2e`, docs/sharding.md). Overlaps are pairs of reconciles of one object by two replicas at overlapping times, token faults a token on two replicas or going down, from the replicas' logs of the reconciles that ended as their shard's holder; unowned is the longest time some shard had no holder after a fault of that kind (a sampler every 50 ms).\n\n", c.Shards, c.Timing, c.Window)
	fmt.Fprintln(w, "| deployment | faults | reconciles | overlaps | token faults | longest unowned, by fault |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|")
	twice, replicaWorst := 0, 0.0
	for _, d := range c.Deployments {
		var unowned []string
		for _, k := range slices.Sorted(maps.Keys(d.UnownedSeconds)) {
			unowned = append(unowned, k+" "+seconds(d.UnownedSeconds[k]))
			if slices.Contains(replicaFaults, k) {
				replicaWorst = math.Max(replicaWorst, d.UnownedSeconds[k])
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %s |\n", d.Name, d.Faults, d.Reconciles, d.Overlaps, d.TokenFaults, strings.Join(unowned, ", "))
		twice += d.Overlaps + d.TokenFaults
	}
	window, err1 := time.ParseDuration(c.Window)
	ttl, err2 := time.ParseDuration(c.LeaseDuration)
	if err1 != nil || err2 != nil {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| goal | value | result |")
	fmt.Fprintln(w, "|---|---:|---|")
	fmt.Fprintf(w, "| 0 objects processed twice and 0 fence regressions, %v chaos run per deployment | %d in %s per deployment | %s |\n", chaosGoalWindow, twice, c.Window, verdict(twice == 0 && window >= chaosGoalWindow && len(c.Deployments) > 0))
	fmt.Fprintf(w, "| no shard unowned longer than ttl + 1 s after a replica's fault (%s) | %s | %s |\n", strings.Join(replicaFaults, ", "), seconds(replicaWorst), verdict(replicaWorst <= (ttl+time.Second).Seconds()))
}

// plotSharding draws, for a scale up and a crash, how many shards each
// side had moved against the time since the change: a step per shard
// moved, from the change (0) to the last move.
func plotSharding(path string, s sharding) error {
	up, err := shardMovesPanel("Scale up: a 4th replica joins 3", "milliseconds after the join", 1000, s, func(d shardingSide) []float64 { return d.UpSeconds })
	if err != nil {
		return err
	}
	crash, err := shardMovesPanel("Crash: one of 3 replicas fails", "seconds after the crash", 1, s, func(d shardingSide) []float64 { return d.CrashSeconds })
	if err != nil {
		return err
	}
	return savePNG(path, up, crash)
}

// shardMovesPanel is one step line per side of the shards moved by each
// time after the change (the times of, scaled by unit), with the sides
// that moved none drawn flat at 0 across the panel.
func shardMovesPanel(title, xLabel string, unit float64, s sharding, of func(shardingSide) []float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "shards moved"
	p.Legend.Top, p.Legend.Left = true, true
	last := 0.0
	for _, d := range s.Sides {
		for _, v := range of(d) {
			last = math.Max(last, v*unit)
		}
	}
	last = math.Max(last*1.05, 1)
	for i, d := range s.Sides {
		times := slices.Sorted(slices.Values(of(d)))
		steps := plotter.XYs{{X: 0, Y: 0}}
		for j, v := range times {
			steps = append(steps, plotter.XY{X: v * unit, Y: float64(j)}, plotter.XY{X: v * unit, Y: float64(j + 1)})
		}
		steps = append(steps, plotter.XY{X: last, Y: float64(len(times))})
		l, err := plotter.NewLine(steps)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		name := d.Name
		if len(times) == 0 {
			name += " (none moved)"
		}
		p.Legend.Add(name, l)
	}
	p.X.Min, p.X.Max, p.Y.Min = 0, last, 0
	return p, nil
}
