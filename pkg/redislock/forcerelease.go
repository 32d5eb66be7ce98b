package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ForceRelease frees the lock called name from its current holder, as an
// administrator's override for a stuck lock: it reads the value held on
// the most nodes and deletes exactly that value everywhere, so a holder
// that acquired in between keeps its lock, then wakes the waiting
// candidates. It frees values this package did not write too. It never
// lets two leaders overlap: the holder learns of the loss at its next
// renewal, and no one is granted the lock before the time the holder's
// last renewal was valid for (at most a ttl; for a key with no expiry,
// ttl from now), which Released.Wait says. It returns the Holder it found
// (Identity is "" for a foreign value).
func (c *Client) ForceRelease(ctx context.Context, name string, ttl time.Duration) (Released, error) {
	if err := c.checkTTL(ttl); err != nil {
		return Released{}, err
	}
	h, value, err := c.inspect(ctx, name)
	r := Released{Holder: h}
	if value == "" || (err != nil && !errors.Is(err, ErrMalformedValue)) {
		return r, err
	}
	keys := keysFor(c.opts.KeyPrefix, name)
	ttlMs := ttl.Milliseconds()
	replies, buf := c.each(ctx, c.all, forceReleaseScript, &keys.lock, &keys.until, &keys.meta, &value, &ttlMs)
	defer c.done(buf)
	failed := false
	for _, rep := range replies {
		if ms, ok := rep.val.(int64); ok && ms >= 0 {
			r.Released++
			r.Wait = max(r.Wait, time.Duration(ms)*time.Millisecond)
		}
		failed = failed || rep.err != nil
	}
	if failed {
		return r, fmt.Errorf("force release %q: %w", name, nodeErrors(ErrNoQuorum, replies))
	}
	return r, nil
}

// Released is what ForceRelease did.
type Released struct {
	// Holder is what it found before releasing.
	Holder
	// Released is how many nodes it deleted the holder's key on.
	Released int
	// Wait is how long until the lock may be granted again: the rest of
	// the time the holder's last renewal was valid for.
	Wait time.Duration
}
