package bench

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// ttl is the lock ttl every implementation is asked for. It does not change
// the cost of an acquire; it is short so that the servers are soon up for
// longer than it (see startRedis).
const ttl = 2 * time.Second

// locker adapts one lock library to the benchmarks.
type locker interface {
	// acquireRelease takes the lock named key in a single attempt and
	// releases it, returning the first error; a lock not obtained is an
	// error, since every key is fresh.
	acquireRelease(ctx context.Context, key string) error
	// close frees the library's clients.
	close() error
}

// newLocker builds a locker over the redis-server nodes at addrs.
type newLocker func(addrs []string) (locker, error)

// newClients returns one go-redis client, with default options, per address.
func newClients(addrs []string) []*redis.Client {
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		// Every go-redis based impl gets the same client; deadlines from
		// the context bound each call, as a lock library needs.
		cs[i] = redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
	}
	return cs
}

// closeClients closes every client in cs.
func closeClients(cs []*redis.Client) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
