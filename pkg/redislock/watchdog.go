package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errStopped is the cause of a watchdog context ended by its stop function.
var errStopped = errors.New("redislock: watchdog stopped")

// Watchdog keeps l renewed every renewInterval until ctx ends, the stop
// function is called, or the lock is lost. It returns a context for the
// work the lock protects; that context is cancelled
//
//   - when a renewal finds the lock lost (cause wraps ErrLockLost);
//   - when no renewal has succeeded for renewDeadline, which is shorter than
//     the lock's ttl less drift, so the holder stops believing before its
//     key can expire (S1), even when Redis is unreachable or a renewal is
//     stuck (cause wraps ErrLockLost);
//   - when ctx ends or stop is called.
//
// stop ends the watchdog and returns nil, or the error wrapping
// ErrLockLost that ended it earlier. It does not release the lock. The
// durations must satisfy 0 < renewInterval < renewDeadline < ttl less drift;
// otherwise Watchdog returns an error wrapping ErrInvalidOptions.
func (l *Lock) Watchdog(ctx context.Context, renewInterval, renewDeadline time.Duration) (context.Context, func() error, error) {
	l.mu.Lock()
	ttl := l.ttl
	l.mu.Unlock()
	t := Timing{TTL: ttl, RenewInterval: renewInterval, RenewDeadline: renewDeadline}
	if err := t.validate(); err != nil {
		return nil, nil, err
	}
	held, stop := l.watch(ctx, t)
	return held, stop, nil
}

// watch runs the watchdog for a validated t.
func (l *Lock) watch(ctx context.Context, t Timing) (context.Context, func() error) {
	clock := l.client.opts.Clock
	log := l.client.opts.Logger.WithValues("lock", l.keys.name)
	held, cancel := context.WithCancelCause(ctx)
	lapse := func() {
		cancel(fmt.Errorf("%w: %q: no renewal succeeded within %v", ErrLockLost, l.keys.name, t.RenewDeadline))
	}
	until := func() time.Duration {
		d := l.stepDown(t.RenewDeadline)
		if d.IsZero() {
			return 0
		}
		return d.Sub(clock.Now())
	}
	stepDown := clock.AfterFunc(until(), lapse)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer stepDown.Stop()
		tick := clock.NewTimer(t.RenewInterval)
		defer tick.Stop()
		for {
			select {
			case <-held.Done():
				return
			case <-tick.C():
			}
			err := l.Refresh(held)
			switch {
			case err == nil:
				stepDown.Reset(until())
			case errors.Is(err, ErrLockLost):
				log.Info("lock lost", "error", err.Error())
				cancel(err)
				return
			case held.Err() == nil:
				log.Info("renewal failed; retrying", "error", err.Error(), "stepDownIn", until().String())
			}
			tick.Reset(t.RenewInterval)
		}
	}()
	stop := func() error {
		cancel(errStopped)
		<-done
		if err := context.Cause(held); errors.Is(err, ErrLockLost) {
			return err
		}
		return nil
	}
	return held, stop
}
