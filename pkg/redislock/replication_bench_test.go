package redislock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// BenchmarkObtainReleaseWaitAllReplicas is one acquire and release, serial,
// with WaitAllReplicas: on a master with two replicas (a client of one
// server), and in a Cluster of three masters with a replica each (CLUSTER
// NODES read with each write). What a grant costs when it waits for every
// replica; run it beside an earlier build, in turns, to price a change of
// the wait.
func BenchmarkObtainReleaseWaitAllReplicas(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		m := redistest.Start(b, redisproc.Options{})
		host, port, _ := strings.Cut(m.Addr, ":")
		for range 2 {
			redistest.Start(b, redisproc.Options{Args: []string{"--replicaof", host, port}})
		}
		master := redistest.Clients(b, m)[0]
		waitFor(b, 30*time.Second, "two replicas online", func() bool {
			info, err := master.Info(context.Background(), "replication").Result()
			return err == nil && strings.Count(info, ",state=online,") == 2
		})
		benchObtainRelease(b, master)
	})
	b.Run("cluster", func(b *testing.B) {
		cl := redistest.StartReplicatedCluster(b, 3, 1)
		cc := redistest.ClusterClient(b, cl.Addrs)
		benchObtainRelease(b, cc)
	})
}

// benchObtainRelease obtains and releases one lock b.N times on rc with
// WaitAllReplicas.
func benchObtainRelease(b *testing.B, rc redis.UniversalClient) {
	ctx := context.Background()
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{
		AssumeDurable: true, Identity: "bench", WaitReplicas: redislock.WaitAllReplicas, NodeTimeout: 2 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		l, err := c.Obtain(ctx, "bench", 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
