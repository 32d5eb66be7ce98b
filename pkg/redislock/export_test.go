package redislock

import (
	"context"
	"time"
)

// The value format, for the external tests that read or forge lock keys.
type Value = value

// ParseValue is parseValue.
var ParseValue = parseValue

// FenceLifetime is fenceLifetime.
var FenceLifetime = fenceLifetime

// SetFenceLifetime makes every fencing counter of c live d after its
// lock's last grant or renewal, whatever the ttl, so that tests can see
// counters expire.
func SetFenceLifetime(c *Client, d time.Duration) {
	c.fenceLife = func(time.Duration) time.Duration { return d }
}

// EpochKey is the key of the epoch marker that c's acquisitions of name
// read.
func EpochKey(c *Client, name string) string { return c.epoch(name) }

// EventsChannel is the events channel of the lock called name under the
// default KeyPrefix.
func EventsChannel(name string) string { return keysFor(DefaultKeyPrefix, name).channel() }

// CheckEvery is how long a subscription may be silent before its keeper
// PINGs.
const CheckEvery = checkEvery

// SubscriptionLinger is how long a subscription stays open with nothing
// watched.
const SubscriptionLinger = subscriptionLinger

// KeepSubscription is keepSubscription, for tests that listen as a Client
// does.
var KeepSubscription = keepSubscription

// WatchTurn is Client.watchTurn, its watch's wake channel.
func WatchTurn(c *Client, ctx context.Context, name string) (wake <-chan struct{}, stop func(passOn bool)) {
	w, stop := c.watchTurn(ctx, name)
	return w.wake, stop
}
