package bench

import (
	"testing"

	"github.com/redislock/redislock/internal/redistest"
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
