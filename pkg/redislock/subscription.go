package redislock

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

// checkEvery is how long a subscription may be silent before
// keepSubscription checks it with a PING.
const checkEvery = 30 * time.Second

// keepSubscription reads sub until ctx ends or sub is closed, passes each
// message to handle and each (un)subscription confirmation to confirmed
// (when not nil), and keeps the subscription alive: go-redis reconnects
// and resubscribes after a lost connection, but a SUBSCRIBE the server
// refused on the new connection (-NOAUTH while a password was being
// changed) leaves a healthy connection that is subscribed to nothing, for
// good. It sees the refusal, or a PING answered while nothing
// is subscribed, and calls subscribe again with backoff (100ms doubling to
// checkEvery) until the server confirms. It sends one PING per
// checkEvery of silence and nothing else while all is well. Until
// the subscription is back, waiters notice releases only at expiry; it
// logs both changes.
func keepSubscription(ctx context.Context, clk clock.Clock, log logr.Logger, sub *redis.PubSub, subscribe func(context.Context) error, handle func(*redis.Message), confirmed func(*redis.Subscription)) {
	sleep := func(d time.Duration) bool {
		t := clk.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		}
	}
	// lost says the loss was logged, so that its end is logged too (and
	// not a channel count that went to zero and back between one watch's
	// unsubscription and another's subscription).
	subscribed, lost, backoff := true, false, 100*time.Millisecond
	for ctx.Err() == nil {
		msg, err := sub.ReceiveTimeout(ctx, checkEvery)
		switch m := msg.(type) {
		case *redis.Message:
			handle(m)
			continue
		case *redis.Subscription:
			if m.Count > 0 && lost {
				log.Info("subscribed again; releases wake waiters at once again", "channel", m.Channel)
				lost = false
			}
			subscribed, backoff = m.Count > 0, 100*time.Millisecond
			if confirmed != nil {
				confirmed(m)
			}
			continue
		case *redis.Pong:
			if subscribed {
				continue
			}
		}
		var timeout net.Error
		switch {
		case errors.Is(err, redis.ErrClosed), ctx.Err() != nil:
			return
		case errors.As(err, &timeout) && timeout.Timeout():
			if err := sub.Ping(ctx); err == nil {
				continue // the Pong (or an error) comes next
			}
		case err == nil: // a Pong with nothing subscribed
		default:
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				// A lost connection: go-redis dials again and
				// resubscribes on the next receive.
				if !sleep(backoff) {
					return
				}
				backoff = min(2*backoff, checkEvery)
				continue
			}
		}
		// The server refused the subscription, or has none for us.
		if !lost {
			log.Info("subscription lost; releases are noticed at expiry until it is back", "error", errString(err))
			subscribed, lost = false, true
		}
		if !sleep(backoff) {
			return
		}
		backoff = min(2*backoff, checkEvery)
		if err := subscribe(ctx); err != nil && ctx.Err() == nil {
			log.V(1).Info("resubscribe failed; trying again", "error", err.Error(), "retryIn", backoff.String())
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "PING answered with no subscription"
	}
	return err.Error()
}
