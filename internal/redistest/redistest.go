// Package redistest starts real redis-server processes for tests and stops
// them when the test ends.
package redistest

import (
	"testing"

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
