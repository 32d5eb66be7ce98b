package redisconn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
)

// ErrHolderNotShown means a RedisLock's status did not name a candidate
// as its holder in time (see AwaitHolder).
var ErrHolderNotShown = errors.New("redisconn: the RedisLock's status does not show this holder")

// AwaitHolder reads the RedisLock key through r until its status names
// identity as the holder: what the admission policy redislock-fencing
// admits a pod's writes by, so that a new holder that waits for it has its
// first write admitted. It reads at once, then after 10ms, doubling up to
// maxInterval on clk, so that the wait costs a handful of reads and then
// one per maxInterval while the controller is down. A failed read is
// retried as a stale one. When ctx ends first, it returns an error
// wrapping ErrHolderNotShown that names the holder last seen and the last
// failed read.
func AwaitHolder(ctx context.Context, r client.Reader, key types.NamespacedName, identity string, maxInterval time.Duration, clk clock.Clock) error {
	var (
		seen    string
		readErr error
	)
	for delay := firstHolderRead; ; delay = min(2*delay, maxInterval) {
		var rl v1alpha1.RedisLock
		if readErr = r.Get(ctx, key, &rl); readErr == nil {
			if seen = rl.Status.HolderIdentity; seen == identity {
				return nil
			}
		}
		t := clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			err := ctx.Err()
			if readErr != nil {
				err = fmt.Errorf("%w (last read: %w)", err, readErr)
			}
			return fmt.Errorf("%w: RedisLock %s shows holder %q, not %q: is the controller running? %w", ErrHolderNotShown, key, seen, identity, err)
		case <-t.C():
		}
	}
}

// firstHolderRead is AwaitHolder's first wait between reads.
const firstHolderRead = 10 * time.Millisecond
