package redisconn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
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
// maxInterval, so that the wait costs a handful of reads and then one per
// maxInterval while the controller is down. A failed read is retried as
// a stale one. When ctx ends first, it returns an error wrapping
// ErrHolderNotShown that names the holder last seen and the last failed
// read.
func AwaitHolder(ctx context.Context, r client.Reader, key types.NamespacedName, identity string, maxInterval time.Duration) error {
	var (
		seen    string
		readErr error
	)
	backoff := wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Cap: maxInterval, Steps: math.MaxInt32}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		var rl v1alpha1.RedisLock
		if readErr = r.Get(ctx, key, &rl); readErr != nil {
			return false, nil
		}
		seen = rl.Status.HolderIdentity
		return seen == identity, nil
	})
	if err == nil {
		return nil
	}
	if readErr != nil {
		err = fmt.Errorf("%w (last read: %w)", err, readErr)
	}
	return fmt.Errorf("%w: RedisLock %s shows holder %q, not %q: is the controller running? %w", ErrHolderNotShown, key, seen, identity, err)
}
