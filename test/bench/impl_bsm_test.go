package bench

import (
	"context"

	bsmlock "github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// bsm is github.com/bsm/redislock, single node.
type bsm struct {
	client *redis.Client
	lc     *bsmlock.Client
}

func newBSM(addrs []string) (locker, error) {
	c := newClients(addrs[:1])[0]
	return &bsm{client: c, lc: bsmlock.New(c)}, nil
}

func (b *bsm) acquireRelease(ctx context.Context, key string) error {
	l, err := b.lc.Obtain(ctx, key, ttl, nil)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

func (b *bsm) close() error { return b.client.Close() }
