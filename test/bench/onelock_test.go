package bench

import (
	"context"
	"errors"
	"testing"

	bsmlock "github.com/bsm/redislock"
)

// waiter takes one lock, waiting while another holds it, and releases it.
type waiter interface {
	locker
	// holdRelease waits for the lock called key, then releases it.
	holdRelease(ctx context.Context, key string) error
}

// BenchmarkOneLock is rueidislock's own benchmark (its README: RunParallel
// with GOMAXPROCS goroutines, each taking and releasing the same lock), so
// that its published figure has our twin: our ObtainWait, which sleeps
// until the holder releases and is woken by the release; rueidislock's
// WithContext, woken by client-side caching; bsm, which has no wait,
// retried at once on ErrNotObtained as that README does.
func BenchmarkOneLock(b *testing.B) {
	addrs := startRedis(b, 1)
	for _, im := range []struct {
		name string
		new  newLocker
	}{{"redislock", newOurs}, {"bsm", newBSM}, {"rueidis", newRueidisLooping}} {
		b.Run(im.name, func(b *testing.B) {
			w := open(b, im.new, addrs).(waiter)
			key := nextKey()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := w.holdRelease(ctx, key); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func (o *ours) holdRelease(ctx context.Context, key string) error {
	l, err := o.lc.ObtainWait(ctx, key, ttl, nil)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

func (b *bsm) holdRelease(ctx context.Context, key string) error {
	for {
		l, err := b.lc.Obtain(ctx, key, ttl, nil)
		if errors.Is(err, bsmlock.ErrNotObtained) {
			continue
		}
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

func (r *rueidisLock) holdRelease(ctx context.Context, key string) error {
	_, cancel, err := r.l.WithContext(ctx, key)
	if err != nil {
		return err
	}
	cancel()
	return nil
}
