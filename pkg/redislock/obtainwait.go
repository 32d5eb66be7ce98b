package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ObtainOptions are the options of one ObtainWait. A nil *ObtainOptions
// gives the defaults.
type ObtainOptions struct {
	// Metadata is a small value (at most MaxMetadataLen bytes) stored
	// beside the holder's value for as long as the lock is held, for
	// observers to read with Inspect: an address, a progress marker.
	// Lock.Metadata returns it. Default: none.
	Metadata string

	// Retry, when set, bounds the attempts: at most Retry.Steps of them
	// (at least 1; 1 tries once, as Obtain does; the attempt made again at
	// once after the first refusal, once subscribed to releases, is not
	// counted). After an attempt that failed for a fault (ErrNoQuorum:
	// nodes down, slow or refusing) the next one waits Retry's next delay:
	// Duration (at least 1ms) at first, then multiplied by Factor (0 or at
	// least 1) after each, up to Cap (0, or at least Duration), where the
	// delays stay, each spread by Jitter. An attempt that found a holder is
	// retried when the holder releases, or when its keys would expire,
	// whatever Retry says: waiting never polls. Retry itself is not
	// changed. Default: nil, attempts until ctx ends, and a fault is
	// retried after a random 1/15 to 3/15 of the ttl.
	Retry *wait.Backoff
}

// checkRetry enforces the rules of ObtainOptions.Retry, one message per
// rule; each rule keeps a retry after a fault from coming at once.
func checkRetry(b *wait.Backoff) error {
	switch {
	case b == nil:
		return nil
	case b.Steps < 1:
		return fmt.Errorf("%w: Retry.Steps %d allows no attempt", ErrInvalidOptions, b.Steps)
	case b.Duration < time.Millisecond:
		return fmt.Errorf("%w: Retry.Duration %v is below 1ms: retries after a fault (say, a refused connection) would come at once", ErrInvalidOptions, b.Duration)
	case b.Cap != 0 && b.Cap < b.Duration:
		return fmt.Errorf("%w: Retry.Cap %v is below Retry.Duration %v", ErrInvalidOptions, b.Cap, b.Duration)
	case b.Factor != 0 && b.Factor < 1:
		return fmt.Errorf("%w: Retry.Factor %v is below 1: the delays after faults would shrink towards none", ErrInvalidOptions, b.Factor)
	}
	return nil
}

// ObtainWait acquires the lock called name for ttl, as Obtain does, and
// when the lock is held by another, waits until it is granted or ctx ends.
// It does not poll: it sleeps until the holder's keys would expire and
// wakes at once when the holder releases (it subscribes to the lock's
// release messages, as WatchReleases does, after its first attempt fails).
// The waiters of one Client for one lock are woken one per release (per
// node on Redlock), in the order they started to wait, rather than all
// racing for it; a woken waiter that leaves without the lock wakes the
// next.
// After a race that no one won (Redlock: candidates split the nodes) it
// backs off at random within 2/15 of the ttl. It waits out the restart
// guard (ErrGuarded) for the time the nodes report, and gives up at once
// when ctx's deadline comes before that time. Each attempt costs one
// script call per node, as Obtain's.
//
// When ctx ends first, the error wraps ctx's error (context.Canceled or
// context.DeadlineExceeded) and that of the last attempt: ErrNotObtained
// (another holds it), ErrGuarded (a *GuardedError says how long it is held
// back) or ErrNoQuorum. When o.Retry's attempts are used up, the error is
// the last attempt's. Invalid arguments give an error wrapping
// ErrInvalidOptions before any I/O.
func (c *Client) ObtainWait(ctx context.Context, name string, ttl time.Duration, o *ObtainOptions) (*Lock, error) {
	var opts ObtainOptions
	if o != nil {
		opts = *o
	}
	if err := c.checkObtain(name, ttl, opts.Metadata); err != nil {
		return nil, err
	}
	if err := checkRetry(opts.Retry); err != nil {
		return nil, err
	}
	var retry wait.Backoff
	if opts.Retry != nil {
		retry = *opts.Retry
	}
	start := c.opts.Clock.Now()
	l, err := c.obtainWait(ctx, name, ttl, opts, retry)
	c.opts.Metrics.Wait(name, c.opts.Clock.Since(start), err)
	return l, err
}

// obtainWait is ObtainWait's loop, after its checks.
func (c *Client) obtainWait(ctx context.Context, name string, ttl time.Duration, opts ObtainOptions, retry wait.Backoff) (_ *Lock, err error) {
	clock := c.opts.Clock
	var (
		turn *releaseWatch
		last error
	)
	// attempt counts the attempts that Retry.Steps bounds: not the one
	// made again at once after subscribing, which only closes the window
	// in which a release would go unheard.
	for attempt := 1; ; {
		// tried, not err: the deferred stop below reads the result err.
		l, h, tried := c.obtain(ctx, name, ttl, opts.Metadata)
		switch {
		case tried == nil:
			return l, nil
		case ctx.Err() != nil:
			if last == nil {
				last = tried
			}
			return nil, waitEnded(ctx, name, last)
		case opts.Retry != nil && attempt >= opts.Retry.Steps:
			return nil, fmt.Errorf("%d attempts: %w", attempt, tried)
		}
		last = tried
		var (
			d       time.Duration
			guarded *GuardedError
		)
		switch {
		case errors.As(tried, &guarded):
			// A context's deadline runs on the real clock, whatever
			// the Client's is.
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < guarded.Wait {
				return nil, fmt.Errorf("%w: %w", context.DeadlineExceeded, tried)
			}
			d = afterRefusal(h, ttl, ttl*2/15)
		case errors.Is(tried, ErrNotObtained):
			d = afterRefusal(h, ttl, ttl*2/15)
			if turn == nil {
				// A release between this refusal and the subscription
				// would go unheard: try again at once once subscribed.
				d = 0
			}
		case opts.Retry != nil:
			d = retry.Step()
		default:
			d = jitter(ttl * 2 / 15)
		}
		if turn == nil {
			var stop func(passOn bool)
			turn, stop = c.watchTurn(ctx, name)
			defer func() { stop(err != nil) }()
		}
		if d == 0 {
			continue
		}
		timer := clock.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, waitEnded(ctx, name, last)
		case <-turn.wake:
			turn.owed.Store(false)
		case <-timer.C():
		}
		timer.Stop()
		attempt++
	}
}

// waitEnded is ObtainWait's error when ctx ended before the lock was
// granted.
func waitEnded(ctx context.Context, name string, last error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("waiting for %q: %w (%w): %w", name, ctx.Err(), cause, last)
	}
	return fmt.Errorf("waiting for %q: %w: %w", name, ctx.Err(), last)
}
