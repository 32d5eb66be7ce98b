package bench

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// releaseScript deletes KEYS[1] only if it still holds ARGV[1].
var releaseScript = redis.NewScript(`if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end`)

// raw is the floor any lock pays: go-redis doing one SET NX PX and one
// EVALSHA compare-and-delete, two round trips. Its token is random per
// locker rather than per lock, which is safe here because every key is
// fresh, and keeps token generation out of the baseline.
type raw struct {
	client *redis.Client
	token  string
	ttlMs  int64
}

func newRaw(addrs []string) (locker, error) {
	return &raw{client: newClients(addrs[:1])[0], token: rand.Text(), ttlMs: ttl.Milliseconds()}, nil
}

func (r *raw) acquireRelease(ctx context.Context, key string) error {
	if err := r.client.Do(ctx, "set", key, r.token, "nx", "px", r.ttlMs).Err(); err != nil {
		return fmt.Errorf("raw: SET NX %s: %w", key, err)
	}
	n, err := releaseScript.Run(ctx, r.client, []string{key}, r.token).Int64()
	if err != nil {
		return fmt.Errorf("raw: release %s: %w", key, err)
	}
	if n != 1 {
		return fmt.Errorf("raw: release %s: not held", key)
	}
	return nil
}

func (r *raw) close() error { return r.client.Close() }
