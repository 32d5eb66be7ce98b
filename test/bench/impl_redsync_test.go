package bench

import (
	"context"
	"errors"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

// rsync is github.com/go-redsync/redsync with its go-redis v9 pools: one
// node, or Redlock over N nodes. It makes a single attempt per lock.
type rsync struct {
	clients []*goredislib.Client
	rs      *redsync.Redsync
}

func newRedsync(addrs []string) (locker, error) {
	cs := newClients(addrs)
	pools := make([]redis.Pool, len(cs))
	for i, c := range cs {
		pools[i] = goredis.NewPool(c)
	}
	return &rsync{clients: cs, rs: redsync.New(pools...)}, nil
}

func (r *rsync) acquireRelease(ctx context.Context, key string) error {
	m := r.rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1))
	if err := m.LockContext(ctx); err != nil {
		return err
	}
	ok, err := m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock returned false")
	}
	return err
}

func (r *rsync) close() error { return closeClients(r.clients) }
