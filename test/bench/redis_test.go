package bench

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// startRedis starts n independent redis-server processes on free loopback
// ports, stopped when tb ends, and returns their addresses once they have
// been up for a ttl: before that, our lock's restart guard refuses every
// fresh name, by design, and there would be nothing to measure.
func startRedis(tb testing.TB, n int) []string {
	tb.Helper()
	servers := redistest.StartN(tb, n)
	redistest.WaitUp(tb, ttl, servers...)
	addrs := make([]string, n)
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// startReplicated starts a master with n replicas (replicaof, no Sentinel:
// WAIT needs only the replicas) and returns the master's address once they
// are all online and it has been up for a ttl.
func startReplicated(tb testing.TB, n int) string {
	tb.Helper()
	master := redistest.Start(tb, redisproc.Options{})
	host, port, _ := net.SplitHostPort(master.Addr)
	for range n {
		redistest.Start(tb, redisproc.Options{Args: []string{"--replicaof", host, port}})
	}
	c := master.Client()
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Count(info, ",state=online,") == n {
			break
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("%d replicas of %s not online within 30s: %v\n%s", n, master.Addr, err, info)
		case <-time.After(50 * time.Millisecond):
		}
	}
	redistest.WaitUp(tb, ttl, master)
	return master.Addr
}
