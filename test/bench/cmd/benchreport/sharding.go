package main

import (
	"fmt"
	"strings"
	"time"
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
