package bench

import (
	"context"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/redislock/redislock/pkg/redislock"
)

// rueidisLock is github.com/redis/rueidis/rueidislock on one node: one key
// per lock (KeyMajority 1), NOLOOP tracking (redis >= 7.0.5), the same
// ttl as the others as KeyValidity, each call to the node bounded by our
// DefaultNodeTimeout (TryNextAfter), and a single attempt (TryWithContext).
// Its cancel func releases the key and waits for the DEL to finish.
type rueidisLock struct {
	l rueidislock.Locker
}

func newRueidis(addrs []string) (locker, error) { return openRueidis(addrs, true) }

// newRueidisLooping is rueidislock without NOLOOP tracking: its waiters
// then hear of their own process's releases through the server's
// invalidations (see BenchmarkOneLock).
func newRueidisLooping(addrs []string) (locker, error) { return openRueidis(addrs, false) }

func openRueidis(addrs []string, noLoop bool) (locker, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: addrs[:1]},
		KeyMajority:    1,
		KeyValidity:    ttl,
		NoLoopTracking: noLoop,
		// Each key's attempt is bounded as ours is (DefaultNodeTimeout),
		// not by rueidislock's 20ms default, which a GC pause or a busy
		// core on this 2-core machine exceeds: make bench failed on it.
		TryNextAfter: redislock.DefaultNodeTimeout,
	})
	if err != nil {
		return nil, err
	}
	return &rueidisLock{l: l}, nil
}

func (r *rueidisLock) acquireRelease(ctx context.Context, key string) error {
	_, cancel, err := r.l.TryWithContext(ctx, key)
	if err != nil {
		return err
	}
	cancel()
	return nil
}

func (r *rueidisLock) close() error {
	r.l.Close()
	return nil
}
