package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/benchresult"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// busCounters is one node's CLUSTER INFO counters of pub/sub messages on
// the cluster bus, broadcast (publish) and sharded (publishshard).
type busCounters struct{ sent, received int }

func readBus(ctx context.Context, addr string) (busCounters, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return busCounters{}, err
	}
	var b busCounters
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		n, _ := strconv.Atoi(v)
		switch k {
		case "cluster_stats_messages_publish_sent", "cluster_stats_messages_publishshard_sent":
			b.sent += n
		case "cluster_stats_messages_publish_received", "cluster_stats_messages_publishshard_received":
			b.received += n
		}
	}
	return b, nil
}

// measureBus runs announce and returns the bus messages it caused and the
// nodes that received any, once every message sent has been received.
func measureBus(t *testing.T, addrs []string, announce func()) (messages, reached int) {
	t.Helper()
	ctx := context.Background()
	read := func() []busCounters {
		out := make([]busCounters, len(addrs))
		for i, a := range addrs {
			var err error
			if out[i], err = readBus(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	before := read()
	announce()
	deadline := time.Now().Add(30 * time.Second)
	for {
		after := read()
		sent, received := 0, 0
		reached = 0
		for i := range after {
			sent += after[i].sent - before[i].sent
			r := after[i].received - before[i].received
			received += r
			if r > 0 {
				reached++
			}
		}
		if received >= sent {
			return sent, reached
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bus messages sent, %d received after 30s", sent, received)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterEvents counts what a lock's grant and release cost on the
// bus of a Redis Cluster of 3 masters with a replica each: our Client's
// (SPUBLISH, which reaches the lock's shard only) against the broadcast
// PUBLISH of the same messages on the same channels, which the scripts
// sent before and which every node relays to every other.
func TestClusterEvents(t *testing.T) {
	const masters, replicas, cycles = 3, 1, 100
	cl := redistest.StartReplicatedCluster(t, masters, replicas)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	c, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{AssumeDurable: true, Identity: "bench", NodeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := func(i int) string { return fmt.Sprintf("events-%d", i) }
	out := benchresult.ClusterEvents{Masters: masters, Replicas: replicas, Cycles: cycles}

	n, reached := measureBus(t, cl.Addrs, func() {
		for i := range cycles {
			ch := redislock.DefaultKeyPrefix + "{" + name(i) + "}:events"
			for _, msg := range []string{"acquired", "released"} {
				if err := cc.Publish(ctx, ch, msg).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	out.Cases = append(out.Cases, benchresult.ClusterEventsCase{Name: "PUBLISH (broadcast; the scripts before)", Events: 2 * cycles, BusMessages: n, NodesReached: reached})

	n, reached = measureBus(t, cl.Addrs, func() {
		for i := range cycles {
			l, err := c.Obtain(ctx, name(i), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
	out.Cases = append(out.Cases, benchresult.ClusterEventsCase{Name: "SPUBLISH (sharded; redislock now)", Events: 2 * cycles, BusMessages: n, NodesReached: reached})

	for _, cs := range out.Cases {
		t.Logf("%-40s %4d events: %5d bus messages (%.2f per event), %d of %d nodes reached", cs.Name, cs.Events, cs.BusMessages, float64(cs.BusMessages)/float64(cs.Events), cs.NodesReached, len(cl.Addrs))
	}
	if path := os.Getenv("CLUSTER_EVENTS_JSON"); path != "" {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
