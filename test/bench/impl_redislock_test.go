package bench

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/redislock/redislock/pkg/redislock"
)

// ours is our package: one node, or Redlock over N nodes.
type ours struct {
	clients []*redis.Client
	lc      *redislock.Client
}

func newOurs(addrs []string) (locker, error) { return openOurs(addrs, false) }

// newOursDurable is our package with the restart guard off
// (AssumeDurable), to show what the guard costs on fresh names.
func newOursDurable(addrs []string) (locker, error) { return openOurs(addrs, true) }

func openOurs(addrs []string, durable bool) (locker, error) {
	cs := newClients(addrs)
	nodes := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		nodes[i] = c
	}
	lc, err := redislock.New(nodes, &redislock.Options{Identity: "bench", AssumeDurable: durable})
	if err != nil {
		_ = closeClients(cs)
		return nil, err
	}
	return &ours{clients: cs, lc: lc}, nil
}

func (o *ours) acquireRelease(ctx context.Context, key string) error {
	l, err := o.lc.Obtain(ctx, key, ttl)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

func (o *ours) close() error { return closeClients(o.clients) }
