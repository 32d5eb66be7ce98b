package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// newClient returns a Client over servers, named identity.
func newClient(t testing.TB, identity string, servers ...*redisproc.Server) *redislock.Client {
	t.Helper()
	c, err := redislock.New(redistest.Clients(t, servers...), &redislock.Options{AssumeDurable: true, Identity: identity, NodeTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lockKey is the Redis key of the lock called name.
func lockKey(name string) string { return "redislock:{" + name + "}" }

// waitFor polls cond every 5ms until it holds, failing t after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// get reads key from a server; "" when absent.
func get(t testing.TB, s *redisproc.Server, key string) string {
	t.Helper()
	c := s.Client()
	defer func() { _ = c.Close() }()
	v, err := c.Get(context.Background(), key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

// set writes key on a server.
func set(t testing.TB, s *redisproc.Server, key, value string) {
	t.Helper()
	c := s.Client()
	defer func() { _ = c.Close() }()
	if err := c.Set(context.Background(), key, value, 0).Err(); err != nil {
		t.Fatal(err)
	}
}
