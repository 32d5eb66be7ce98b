// Package redistest starts real redis-server processes for tests and stops
// them when the test ends.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/redisproc"
)

// Start launches a redis-server on a free loopback port for the length of
// t. A missing redis-server fails the test with a message that says how to
// install it: these tests are about a real Redis and never pass without one.
func Start(t testing.TB, opts redisproc.Options) *redisproc.Server {
	t.Helper()
	s, err := redisproc.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartN launches n servers, as the independent nodes of a Redlock.
func StartN(t testing.TB, n int) []*redisproc.Server {
	t.Helper()
	servers := make([]*redisproc.Server, n)
	for i := range servers {
		servers[i] = Start(t, redisproc.Options{})
	}
	return servers
}

// Clients returns one client per server, closed when t ends.
func Clients(t testing.TB, servers ...*redisproc.Server) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

// StartCluster launches a Redis Cluster of n masters (no replicas), with
// redis-cli --cluster create, and returns its seed addresses once every
// slot is served.
func StartCluster(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for i := 0; i < n; i++ {
		s := Start(t, redisproc.Options{Args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}})
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must see every slot served, not just the first asked.
	deadline := time.Now().Add(10 * time.Second)
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = c.Close()
				t.Fatalf("cluster node %s not ok after 10s: %v %s", a, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Close()
	}
	return addrs
}

// WaitUp waits until every server has been up for at least d, as the lock
// engine's restart guard judges it (uptime_in_seconds, a difference of
// whole-second readings, less one second), failing t after d plus 5s.
func WaitUp(t testing.TB, d time.Duration, servers ...*redisproc.Server) {
	t.Helper()
	deadline := time.Now().Add(d + 5*time.Second)
	for _, s := range servers {
		c := s.Client()
		for {
			up, err := upAtLeast(c)
			if err != nil {
				_ = c.Close()
				t.Fatal(err)
			}
			if up >= d {
				break
			}
			if time.Now().After(deadline) {
				_ = c.Close()
				t.Fatalf("redis-server %s up only %v after waiting for %v", s.Addr, up, d)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = c.Close()
	}
}

func upAtLeast(c *redis.Client) (time.Duration, error) {
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "uptime_in_seconds:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, fmt.Errorf("uptime_in_seconds %q: %w", v, err)
			}
			return time.Duration(n-1) * time.Second, nil
		}
	}
	return 0, fmt.Errorf("no uptime_in_seconds in INFO server")
}

// SentinelGroup is a Sentinel-managed deployment: a master, its replicas
// and the Sentinels that watch it under MasterName.
type SentinelGroup struct {
	MasterName string
	Master     *redisproc.Server
	Replicas   []*redisproc.Server
	Sentinels  []*redisproc.Server
}

// StartSentinelGroup starts a master, replicas replicas of it and
// sentinels Sentinels (quorum 1, down after 1s), and waits until every
// replica is in sync and every Sentinel knows every replica.
func StartSentinelGroup(t testing.TB, replicas, sentinels int) *SentinelGroup {
	t.Helper()
	g := &SentinelGroup{MasterName: "mymaster", Master: Start(t, redisproc.Options{})}
	host, port, err := net.SplitHostPort(g.Master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for range replicas {
		g.Replicas = append(g.Replicas, Start(t, redisproc.Options{Args: []string{"--replicaof", host, port}}))
	}
	for range sentinels {
		g.Sentinels = append(g.Sentinels, Start(t, redisproc.Options{SentinelFor: g.MasterName + " " + g.Master.Addr}))
	}
	deadline := time.Now().Add(30 * time.Second)
	for !g.settled(replicas) {
		if time.Now().After(deadline) {
			t.Fatalf("Sentinel group not settled within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return g
}

// settled reports whether the master has n replicas online and every
// Sentinel sees them.
func (g *SentinelGroup) settled(n int) bool {
	ctx := context.Background()
	mc := g.Master.Client()
	defer func() { _ = mc.Close() }()
	info, err := mc.Info(ctx, "replication").Result()
	if err != nil || strings.Count(info, "state=online") != n {
		return false
	}
	for _, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		reps, err := sc.Replicas(ctx, g.MasterName).Result()
		_ = sc.Close()
		if err != nil || len(reps) != n {
			return false
		}
	}
	return true
}

// SentinelAddrs are the Sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr
	}
	return addrs
}

// MasterAddr asks the first Sentinel that answers where the master is.
func (g *SentinelGroup) MasterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		addr, err := sc.GetMasterAddrByName(ctx, g.MasterName).Result()
		_ = sc.Close()
		if err == nil && len(addr) == 2 {
			return net.JoinHostPort(addr[0], addr[1]), nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no Sentinel named the master: %w", errors.Join(errs...))
}

// Server returns the server of the group at addr, nil if none.
func (g *SentinelGroup) Server(addr string) *redisproc.Server {
	for _, s := range append([]*redisproc.Server{g.Master}, g.Replicas...) {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}
