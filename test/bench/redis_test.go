package bench

import (
	"testing"

	"github.com/redislock/redislock/internal/redistest"
)

// startRedis starts n independent redis-server processes on free loopback
// ports, stopped when tb ends, and returns their addresses.
func startRedis(tb testing.TB, n int) []string {
	tb.Helper()
	addrs := make([]string, n)
	for i, s := range redistest.StartN(tb, n) {
		addrs[i] = s.Addr
	}
	return addrs
}
