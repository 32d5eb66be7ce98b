package redislock

import (
	"fmt"
	"time"
)

// Timing says how long a lock lives and how it is kept. It uses the same
// words as the RedisLock resource and maps onto client-go's leader
// election: TTL is LeaseDuration, RenewDeadline is RenewDeadline and
// RenewInterval is RetryPeriod.
type Timing struct {
	// TTL is how long a key lives after each acquire or renew, a whole
	// number of milliseconds. A crashed holder's lock frees itself after
	// at most TTL. Default: 15s.
	TTL time.Duration
	// RenewInterval is how often a holder renews, and how long a
	// candidate backs off after a Redis fault. Default: 2/15 of TTL (2s
	// of the default 15s).
	RenewInterval time.Duration
	// RenewDeadline is how long a holder keeps trying to renew before it
	// steps down: it stops believing it leads RenewDeadline after the last
	// renewal that succeeded, ahead of the key's expiry. Default: 2/3 of
	// TTL (10s of the default 15s).
	RenewDeadline time.Duration
}

// DefaultTTL is the TTL of a zero Timing.
const DefaultTTL = 15 * time.Second

// WithDefaults returns t with its zero fields filled in: TTL DefaultTTL,
// RenewInterval 2/15 and RenewDeadline 2/3 of the TTL.
func (t Timing) WithDefaults() Timing {
	if t.TTL == 0 {
		t.TTL = DefaultTTL
	}
	if t.RenewInterval == 0 {
		t.RenewInterval = t.TTL * 2 / 15
	}
	if t.RenewDeadline == 0 {
		t.RenewDeadline = t.TTL * 2 / 3
	}
	return t
}

// validate checks 0 < RenewInterval < RenewDeadline < TTL less drift, one
// message per broken rule.
func (t Timing) validate() error {
	if err := validTTL(t.TTL); err != nil {
		return err
	}
	switch {
	case t.RenewInterval <= 0:
		return fmt.Errorf("%w: RenewInterval %v is not positive", ErrInvalidOptions, t.RenewInterval)
	case t.RenewInterval >= t.TTL:
		return fmt.Errorf("%w: RenewInterval %v is not shorter than TTL %v", ErrInvalidOptions, t.RenewInterval, t.TTL)
	case t.RenewDeadline <= t.RenewInterval:
		return fmt.Errorf("%w: RenewDeadline %v is not longer than RenewInterval %v: the holder would step down before its first renewal", ErrInvalidOptions, t.RenewDeadline, t.RenewInterval)
	case t.RenewDeadline >= t.TTL-drift(t.TTL):
		return fmt.Errorf("%w: RenewDeadline %v is not shorter than TTL %v less the drift allowance %v", ErrInvalidOptions, t.RenewDeadline, t.TTL, drift(t.TTL))
	}
	return nil
}

// validTTL checks the rules every ttl follows.
func validTTL(ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return fmt.Errorf("%w: TTL %v is not positive", ErrInvalidOptions, ttl)
	case ttl%time.Millisecond != 0:
		return fmt.Errorf("%w: TTL %v is not a whole number of milliseconds", ErrInvalidOptions, ttl)
	}
	return nil
}

// CheckTiming reports whether t, with its zero fields defaulted, suits
// this Client: an error wrapping ErrInvalidOptions names the broken rule
// (0 < RenewInterval < RenewDeadline < TTL less drift, TTL in whole
// milliseconds and longer than NodeTimeout).
func (c *Client) CheckTiming(t Timing) error {
	t = t.WithDefaults()
	if err := t.validate(); err != nil {
		return err
	}
	return c.checkTTL(t.TTL)
}

// drift is the allowance for clock drift between this process and the
// nodes over a ttl: 1% of it plus 2ms, as Redlock prescribes.
func drift(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}
